"""The admission policy: which gates apply to a release, and their thresholds, per tier.

This is the one place to read (and change) what a release must show before it
may be submitted. `releases/governance/gates/` computes each gate; it reads every number
and list from here. A tier maps to the gates that apply to it; the change kind
can take some away (a decommission measures nothing new) and add its own.

| gate                | experimental | internal | production |
|---------------------|:------------:|:--------:|:----------:|
| license             | yes          | yes      | yes        |
| provenance          | yes          | yes      | yes        |
| image_pinned        | yes          | yes      | yes        |
| load_evidence       |              | short    | short, high_concurrency, long_context (with its GPU-memory and KV-cache peaks), streaming, and each class its task types need (`TASK_TYPE_WORKLOADS`) |
| metrics_coverage    |              | ttft, tpot, error_rate | all seven (declared, and seen on the candidate's /metrics by a probe) |
| replay              |              | ≥ 1 set  | ≥ 1 set    |
| failures_classified |              | yes      | yes        |
| rollback_plan       |              | verified ≤ 30 days | verified ≤ 7 days |
| gray_plan           |              | ≥ 1 stage below 100 % | ≥ 2 stages below 100 % |
| logging_policy      |              | yes      | yes        |
| impact_assessed     |              | yes      | yes        |
| retirement_plan     |              |          | yes        |
| risk                | yes          | yes      | yes        |
| change_path         | yes          | yes      | yes        |
| blackout            | yes          | yes      | yes        |
| gateway_policy      | advisory: limits, tenants | limits, tenants | limits, tenants, degradation, egress |
| cost_record         |              | yes      | yes        |
| decommission_plan   | decommission releases only               |
| signoffs            | none         | model team, platform | model team, platform, security & compliance, business owner |

A failure sample classified `risk_accepted` adds the business owner's sign-off on every
tier and path: only the business owner accepts a risk.

A decommission skips load_evidence, metrics_coverage, replay,
failures_classified, gray_plan, gateway_policy, cost_record, impact_assessed and
retirement_plan: nothing new is served.

impact_assessed reads the revision diff (`releases.governance.impact`): every downstream
system it suggests is ticked or dismissed with a reason, and every impacted task type is
covered by a required replay sample set with a sample tagged with it. A release whose
impacted task types include one that must never degrade silently
(`releases.governance.playbooks.never_degrading`) is suggested one risk step higher,
needs one more gray stage below 100 % than its tier, and a rollback target that is
ready: its image pinned by digest and its model asset neither retired nor deprecated,
beside the verification every rollback plan needs.

cost_record reads the candidate's runtime: it names a GPU model, and that model has a
price sheet (`ledger.models.PriceSheet`) in force on the day (UTC) of the assessment.

gateway_policy reads the candidate's gateway policy version: *limits* means every
limit set, *tenants* every tenant of the service listed with rpm and tpm,
*degradation* an entry for every task type the service serves (a task type that must
never degrade silently, `releases.governance.playbooks`, may only stop or go to human
review), *egress* stated. On an experimental service it is advisory: it says what is
missing and holds nothing back. The standard path
needs only the model team's sign-off; the emergency path may start its rollout
before its sign-offs, which are then due within `settings.RELEASES_EMERGENCY_SIGNOFF_HOURS`.

Waivers. Every gate but signoffs, change_path, risk and blackout may be set aside
for one release, with a reason, for at most `settings.WAIVER_MAX_DAYS[tier]` days
(14, 30, 90 by default), and only by the sign-off role whose part of the release
the gate is (`WAIVER_OWNERS`):

| waived by               | gates |
|-------------------------|-------|
| security & compliance   | license, provenance, logging_policy |
| platform                | image_pinned, load_evidence, metrics_coverage, replay, rollback_plan, gray_plan, decommission_plan, gateway_policy, cost_record, peak_drill, impact_assessed |
| business owner          | failures_classified, retirement_plan |

Whoever waives a gate does not sign off the role that owns it on that release, nor
waives a gate of a role they signed (`releases.permissions`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Final

from django.conf import settings
from django.utils.translation import gettext_noop

from releases.schemas import METRICS

# Every gate, in the order pages and the API list them, with the title pages show (in
# English here: the API and the records carry it; a page translates it, `gate_title`).
GATES: Final[dict[str, str]] = {
    "license": gettext_noop("License approved for the service's exposure"),
    "provenance": gettext_noop("Provenance complete"),
    "image_pinned": gettext_noop("Image pinned and launch parameters recorded"),
    "load_evidence": gettext_noop("Load-test evidence current and within the SLOs"),
    "metrics_coverage": gettext_noop("Metrics coverage declared"),
    "replay": gettext_noop("Replay passed without regression"),
    "failures_classified": gettext_noop("Every failure sample classified"),
    "rollback_plan": gettext_noop("Rollback plan complete and its target verified"),
    "gray_plan": gettext_noop("Gray plan valid"),
    "logging_policy": gettext_noop("Logging policy recorded"),
    "impact_assessed": gettext_noop("Downstream impact assessed from the diff"),
    "risk": gettext_noop("Risk assessed"),
    "change_path": gettext_noop("Change path justified"),
    "decommission_plan": gettext_noop("Decommission moves recorded"),
    "retirement_plan": gettext_noop("Retirement plan recorded"),
    "blackout": gettext_noop("Planned start outside blackout windows"),
    "gateway_policy": gettext_noop("Gateway policy complete for the tier"),
    "cost_record": gettext_noop("Cost record: a price sheet for the GPU model"),
    "peak_drill": gettext_noop("Capacity drilled at the planned peak rate"),
    "signoffs": gettext_noop("Sign-offs complete"),
}

GATE_KEYS: Final = tuple(GATES)

# How long before its planned start a rollout may start without a word: beyond it, the
# start page warns and the verb asks for a reason, kept in the ledger.
EARLY_START_TOLERANCE: Final = dt.timedelta(minutes=15)
_EVERY_GATE = GATE_KEYS
_BASIC = (
    "license",
    "provenance",
    "image_pinned",
    "risk",
    "change_path",
    "blackout",
    "gateway_policy",
    "signoffs",
)

# Gates only production takes (the seed's §6.14: what a production service must have
# before it goes live, beyond an internal one).
_PRODUCTION_ONLY = frozenset({"retirement_plan"})

TIER_GATES: Final[dict[str, tuple[str, ...]]] = {
    "experimental": _BASIC,
    "internal": tuple(key for key in _EVERY_GATE if key not in _PRODUCTION_ONLY),
    "production": _EVERY_GATE,
}

# Gates that measure what the candidate serves: moot when it serves nothing new.
NOT_FOR_DECOMMISSION: Final = frozenset(
    {
        "load_evidence",
        "metrics_coverage",
        "replay",
        "failures_classified",
        "gray_plan",
        "gateway_policy",
        "cost_record",
        "impact_assessed",
        "retirement_plan",
    }
)

# Nobody may set these aside: a waiver of them would be a signature without a signer,
# or a path chosen without a reason. A blackout is bypassed by the emergency path only.
NOT_WAIVABLE: Final = frozenset({"signoffs", "change_path", "risk", "blackout"})

# Who may set each other gate aside: the sign-off role whose part of the release it is
# (a holder of that role with the `releases.waive_gate` permission). Never the model
# team: it files the release, and a gate is not set aside by the team that asks.
WAIVER_OWNERS: Final[dict[str, str]] = {
    # What the model may be, where it comes from, what is kept of its traffic.
    "license": "security_compliance",
    "provenance": "security_compliance",
    "logging_policy": "security_compliance",
    # How it is run, measured, watched, rolled out and rolled back; where its load goes.
    "image_pinned": "platform",
    "load_evidence": "platform",
    "metrics_coverage": "platform",
    "replay": "platform",
    "rollback_plan": "platform",
    "gray_plan": "platform",
    "decommission_plan": "platform",
    # When and how it stops serving: the tenants' notice is the business owner's.
    "retirement_plan": "business_owner",
    "gateway_policy": "platform",
    # What an hour of the hardware costs: platform runs it and records its price.
    "cost_record": "platform",
    # Whether the new capacity carries the peak: platform owns the scale-up.
    "peak_drill": "platform",
    # Which systems downstream must hear of the change: platform runs what they call.
    "impact_assessed": "platform",
    # Whether it is fit for the tasks it serves: the failures it is allowed to keep.
    "failures_classified": "business_owner",
}

# Tiers where a capacity change must state the peak rate it is for (and so be drilled at
# it); elsewhere stating one is the filer's choice, and it then requires the drill too.
PEAK_RATE_REQUIRED_TIERS: Final = frozenset({"production"})

# Workload classes whose current load-test evidence each tier needs.
REQUIRED_WORKLOADS: Final[dict[str, tuple[str, ...]]] = {
    "experimental": (),
    "internal": ("short",),
    "production": ("short", "high_concurrency", "long_context", "streaming"),
}

# What each task type asks of load-test evidence (the seed's table 6-4). On the tiers of
# `TASK_TYPE_EVIDENCE_TIERS` a service needs a current report of every class its task
# types list here, beside the tier's own (`load_evidence`). A drill records its requests
# of a task type as evidence of the first class here; a task type not listed as
# high-concurrency evidence (a drill is a peak's concurrency).
TASK_TYPE_WORKLOADS: Final[dict[str, tuple[str, ...]]] = {
    "chat": ("streaming", "short"),
    "rag": ("long_context",),
    "summarization": ("batch",),
    "sql": ("structured",),
    "tool-use": ("structured",),
}
TASK_TYPE_EVIDENCE_TIERS: Final = frozenset({"production"})

# Workload classes whose evidence must also carry its GPU-memory and KV-cache peaks
# (`LoadTestReport.gpu_memory_peak_gib`, `kv_cache_peak_pct`), per tier: a long context
# is where the KV cache runs out (the seed's §6.6 and §6.7).
PEAKS_REQUIRED: Final[dict[str, tuple[str, ...]]] = {
    "experimental": (),
    "internal": (),
    "production": ("long_context",),
}
DRILL_DEFAULT_WORKLOAD: Final = "high_concurrency"


def required_workloads(tier: str, task_types: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """The workload classes a service of `tier` serving `task_types` needs current
    evidence of, each with the task types that need it (empty: the tier itself does),
    the tier's classes first."""
    by_tier = REQUIRED_WORKLOADS[tier]
    needed: dict[str, list[str]] = {workload: [] for workload in by_tier}
    if tier in TASK_TYPE_EVIDENCE_TIERS:
        for task_type in sorted(set(task_types)):
            for workload in TASK_TYPE_WORKLOADS.get(task_type, ()):
                if workload not in by_tier:
                    needed.setdefault(workload, []).append(task_type)
    return {workload: tuple(by) for workload, by in needed.items()}


def drill_workload(task_type: str) -> str:
    """The workload class a drill's requests of `task_type` are evidence of."""
    return TASK_TYPE_WORKLOADS.get(task_type, (DRILL_DEFAULT_WORKLOAD,))[0]


REQUIRED_METRICS: Final[dict[str, tuple[str, ...]]] = {
    "experimental": (),
    "internal": ("ttft", "tpot", "error_rate"),
    "production": tuple(METRICS),
}

# Required metrics the gate takes as declared without seeing them on the engine's
# /metrics: GPU memory is DCGM's, which runs beside the engine, not in it. Every other
# required metric must be backed by a series a probe found (`replay.metrics_probe`).
METRICS_NOT_ON_ENGINE: Final = frozenset({"gpu_memory"})

# The least number of replay sample sets a release must name.
MIN_SAMPLE_SETS: Final[dict[str, int]] = {"experimental": 0, "internal": 1, "production": 1}

# How recent the rollback target's last verification replay must be, in days.
ROLLBACK_VERIFICATION_MAX_AGE_DAYS: Final[dict[str, int]] = {
    "experimental": 90,
    "internal": 30,
    "production": 7,
}

# What the candidate's gateway policy must state, per tier (`gates/gateway.py`); on an
# advisory tier the gate says what is missing and passes the release on.
GATEWAY_POLICY_NEEDS: Final[dict[str, tuple[str, ...]]] = {
    "experimental": ("limits", "tenants"),
    "internal": ("limits", "tenants"),
    "production": ("limits", "tenants", "degradation", "egress"),
}
ADVISORY_GATEWAY_TIERS: Final = frozenset({"experimental"})

# Gray stages below 100 % traffic a plan must have; every stage must carry these guards.
MIN_STAGES_BELOW_FULL: Final[dict[str, int]] = {"experimental": 0, "internal": 1, "production": 2}
REQUIRED_GUARDS: Final[dict[str, tuple[str, ...]]] = {
    "experimental": (),
    "internal": ("ttft_p95_ms", "error_rate_pct"),
    "production": ("ttft_p95_ms", "error_rate_pct", "structured_error_rate_pct"),
}

# What a stage's analysis does on a breach when its plan does not say (`on_breach`), per
# tier: production and internal hold the stage for a person; experimental rolls back.
ANALYSIS_ON_BREACH_DEFAULT: Final[dict[str, str]] = {
    "production": "hold",
    "internal": "hold",
    "experimental": "rollback",
}
# The tiers whose plans may let the analysis roll back by itself (`on_breach: rollback`).
# Going back to the live revision only narrows exposure, so every tier may; a company
# that wants a person in every production rollback removes "production" here.
ANALYSIS_MAY_ROLL_BACK: Final = frozenset({"production", "internal", "experimental"})

# Sign-off roles per tier, and for the standard path (any tier).
REQUIRED_SIGNOFFS: Final[dict[str, tuple[str, ...]]] = {
    "experimental": (),
    "internal": ("model_team", "platform"),
    "production": ("model_team", "platform", "security_compliance", "business_owner"),
}
STANDARD_PATH_SIGNOFFS: Final[tuple[str, ...]] = ("model_team",)

# The roles each sign-off role's signer must hold (ledger.roles), and the gates the
# role looks at first on its "waiting for me" page.
SIGNER_ROLES: Final[dict[str, str]] = {
    "model_team": "model_owner",
    "platform": "platform_sre",
    "security_compliance": "security_compliance",
    "business_owner": "business_owner",
}
GATES_OF_INTEREST: Final[dict[str, tuple[str, ...]]] = {
    "model_team": ("load_evidence", "replay", "failures_classified", "metrics_coverage"),
    "platform": ("image_pinned", "rollback_plan", "gray_plan", "blackout", "load_evidence"),
    "security_compliance": ("license", "provenance", "logging_policy"),
    "business_owner": ("failures_classified", "impact_assessed", "risk", "gray_plan", "blackout"),
}

# Risk suggested by change kind for an internal service; a production service moves one
# step up, an experimental one a step down. Choosing a lower risk needs a reason.
RISK_ORDER: Final = ("low", "medium", "high")
BASE_RISK: Final[dict[str, str]] = {
    "model_upgrade": "high",
    "engine_upgrade": "medium",
    "quantization_switch": "medium",
    "launch_parameters": "low",
    "routing": "low",
    "capacity": "low",
    "decommission": "medium",
}
_TIER_RISK_STEP: Final[dict[str, int]] = {"experimental": -1, "internal": 0, "production": 1}


def gates_for(tier: str, change_kind: str) -> tuple[str, ...]:
    """The gate keys that apply, in `GATES` order."""
    keys = set(TIER_GATES[tier])
    if change_kind == "decommission":
        keys -= NOT_FOR_DECOMMISSION
        keys.add("decommission_plan")
    else:
        keys.discard("decommission_plan")
    if change_kind != "capacity":
        keys.discard("peak_drill")
    return tuple(key for key in GATES if key in keys)


def suggested_risk(tier: str, change_kind: str, *, strict: bool = False) -> str:
    """`strict`: an impacted task type must never degrade silently (a step up)."""
    index = RISK_ORDER.index(BASE_RISK[change_kind]) + _TIER_RISK_STEP[tier] + int(strict)
    return RISK_ORDER[max(0, min(index, len(RISK_ORDER) - 1))]


def effective_risk(release_risk: str, tier: str, change_kind: str, *, strict: bool = False) -> str:
    """The release's risk: the filer's choice, else the one suggested."""
    return release_risk or suggested_risk(tier, change_kind, strict=strict)


# A release touching a task type that must never degrade silently needs this many more
# gray stages below 100 % than its tier does.
STRICT_EXTRA_STAGES: Final = 1


def required_signoffs(tier: str, path: str, *, risk_accepted: bool = False) -> tuple[str, ...]:
    """The roles that must approve. `risk_accepted`: the form keeps a failure sample as a
    risk the business accepts (`accepts_risk`), which only the business owner may
    accept, on every tier and path."""
    roles = STANDARD_PATH_SIGNOFFS if path == "standard" else REQUIRED_SIGNOFFS[tier]
    if risk_accepted and RISK_ACCEPTED_BY not in roles:
        return (*roles, RISK_ACCEPTED_BY)
    return roles


RISK_ACCEPTED_BY: Final = "business_owner"


def accepts_risk(failure_classifications: object) -> bool:
    """Whether a release form classifies a failure sample as a risk accepted."""
    return isinstance(failure_classifications, list) and any(
        isinstance(entry, dict) and entry.get("classification") == "risk_accepted"
        for entry in failure_classifications
    )


def waiver_owner(gate: str) -> str | None:
    """The sign-off role that may waive `gate`, or None when nobody may."""
    return None if gate in NOT_WAIVABLE else WAIVER_OWNERS.get(gate)


def gates_waived_by(role: str) -> tuple[str, ...]:
    """The gates a sign-off role owns the waivers of, in `GATES` order."""
    return tuple(key for key in GATES if WAIVER_OWNERS.get(key) == role)


def waiver_max_days(tier: str) -> int:
    """How many days a waiver on a service of `tier` may last (read when asked)."""
    days: int = settings.WAIVER_MAX_DAYS[tier]
    return days


def waiver_bound(tier: str, granted_at: dt.datetime) -> dt.datetime:
    """The latest expiry of a waiver granted at `granted_at` on a service of `tier`."""
    return granted_at + dt.timedelta(days=waiver_max_days(tier))


# ---------------------------------------------------------------- periodic reviews
# (releases/reviews/queries/review_triggers.py; docs/reviews.md says each rule in words.)

# cost_drift: how far, in percent, the last 7 full days' measured cost per million output
# tokens (idle capacity included) may sit above the live revision's expected cost at
# release before a review is raised. Production runs on budgets agreed per tenant, so a
# fifth more is worth a look; an internal service is allowed more slack, an experimental
# one half again (its traffic is small and uneven, so its idle share swings).
COST_DRIFT_MAX_PCT: Final[dict[str, int]] = {
    "production": 20,
    "internal": 30,
    "experimental": 50,
}
# The least number of the 7 days that must be priced, served by the live revision and
# carry output tokens before a cost per million is judged at all.
COST_DRIFT_MIN_DAYS: Final = 3

# quota_pressure: a tenant whose calls the gateway refused for its rate limit on at least
# this many of the last 7 full days. One bad day is a burst; three is a quota that no
# longer fits what the tenant does.
QUOTA_PRESSURE_MIN_DAYS: Final = 3
