"""A drill's plan checked before anything is written: what can run as written, and each
fault named by its path (`mix[1].sample_set`) with what would be accepted.

Pure reading: the services, sample sets and gateway policies are looked up, nothing is
written. `releases.drills.services.plan_drill` records what this returns.

**Can it run?** A sample set with no re-runnable sample cannot (a drill sends only what
may be sent again); weights adding up to nothing, a task type no service in scope
serves, or a rate the in-flight ceiling cannot carry cannot either. The last is Little's
law: at the peak rate, with every request taking its task type's acceptable p95 end to
end, `rate * e2e` requests are in flight; above the ceiling, starts would be dropped by
design, so the plan is refused with the rate and the ceiling that would fit.
"""

from __future__ import annotations

import datetime as dt
import math
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from django.utils.dateparse import parse_datetime
from django.utils.translation import gettext as _

from ledger.models import LoadTestReport, Revision, Service
from ledger.roles import Role
from releases import policy

ARRIVAL_TYPES = ("constant", "poisson", "ramp")
MAX_RATE = 2_000.0  # requests per second
MAX_DURATION_S = 3_600
MAX_STAGES = 20
MAX_MIX = 20
MAX_CEILING = 10_000
DEFAULT_CEILING = 256
SIGNER_ROLES = (Role.PLATFORM_SRE, Role.BUSINESS_OWNER, Role.SECURITY_COMPLIANCE)
DEFAULT_SIGNERS = [Role.PLATFORM_SRE.value, Role.BUSINESS_OWNER.value]
SEED_LIMIT = 2**63


@dataclass
class CleanPlan:
    name: str
    business_event: str
    window_starts_at: dt.datetime | None
    window_ends_at: dt.datetime | None
    services: list[Service]
    revision: Revision | None
    mix: list[dict[str, Any]]
    arrival: dict[str, Any]
    bounds: dict[str, dict[str, Any]]
    capacity: dict[str, Any]
    seed: int
    in_flight_ceiling: int
    signers: list[str]
    notes: list[str] = field(default_factory=list)


class PlanRefused(Exception):
    """Faults by path; the API answers 400 with them, a form shows each by its field."""

    def __init__(self, errors: dict[str, str]) -> None:
        super().__init__("; ".join(f"{path}: {message}" for path, message in errors.items()))
        self.errors = errors


def _is_number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _text(data: Mapping, name: str, errors: dict, *, limit: int, required: bool = False) -> str:
    value = data.get(name, "")
    if value is None:
        value = ""
    if not isinstance(value, str):
        errors[name] = _("expected text.")
        return ""
    value = value.strip()
    if "\x00" in value:
        errors[name] = _("must not contain NUL characters.")
    elif required and not value:
        errors[name] = _("this field is required.")
    elif len(value) > limit:
        errors[name] = _("at most %(limit)d characters (got %(length)d).") % {
            "limit": limit,
            "length": len(value),
        }
    return value


def _moment(value: Any, path: str, errors: dict) -> dt.datetime | None:
    if value in (None, ""):
        return None
    parsed = None
    if isinstance(value, dt.datetime):
        parsed = value
    elif isinstance(value, str) and "\x00" not in value:
        try:
            parsed = parse_datetime(value)
        except ValueError:
            parsed = None
    if parsed is None:
        errors[path] = _("expected a date and time such as 2026-12-31T18:00:00Z.")
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return parsed


def _services(value: Any, errors: dict) -> list[Service]:
    if not isinstance(value, list) or not value:
        errors["services"] = _("expected a list of service slugs, at least one.")
        return []
    slugs = [slug for slug in value if isinstance(slug, str)]
    found = {
        s.slug: s
        for s in Service.objects.filter(slug__in=slugs).select_related(
            "team", "live_revision__gateway_policy"
        )
    }
    services = []
    for index, slug in enumerate(value):
        if not isinstance(slug, str) or slug not in found:
            errors[f"services[{index}]"] = _("no service %(slug)s.") % {"slug": repr(slug)}
        elif found[slug] in services:
            errors[f"services[{index}]"] = _("%(slug)s is named twice.") % {"slug": slug}
        else:
            services.append(found[slug])
    return services


def _revision(value: Any, services: list[Service], errors: dict) -> Revision | None:
    if value in (None, ""):
        return None
    if len(services) != 1:
        errors["revision"] = _(
            "a revision under test can be named only for a drill of one service; leave it "
            "out to drill what is live."
        )
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        errors["revision"] = _("expected a revision id.")
        return None
    revision = Revision.objects.filter(pk=value, service=services[0]).first()
    if revision is None:
        errors["revision"] = _("%(service)s has no revision with id %(id)s.") % {
            "service": services[0].slug,
            "id": value,
        }
    return revision


def _served_task_types(services: Sequence[Service]) -> dict[str, list[str]]:
    """Each task type any service in scope serves, and which services serve it."""
    served: dict[str, list[str]] = {}
    for service in services:
        for slug in service.task_types.values_list("slug", flat=True):
            served.setdefault(slug, []).append(service.slug)
    return served


def _sample_set(value: Any) -> Any:
    from replay.models import SampleSet

    sets = SampleSet.objects.all()
    if isinstance(value, int) and not isinstance(value, bool):
        return sets.filter(pk=value).first()
    if not isinstance(value, str) or not value or "\x00" in value:
        return None
    name, _at, version = value.partition("@")
    if version:
        return sets.filter(name=name, version=int(version)).first() if version.isdigit() else None
    return sets.filter(name=name).order_by("-version").first()


def _mix(value: Any, served: Mapping[str, list[str]], errors: dict) -> list[dict[str, Any]]:
    from replay.models import Sample

    if not isinstance(value, list) or not value:
        errors["mix"] = _("expected a list of {task_type, sample_set, weight}, at least one.")
        return []
    if len(value) > MAX_MIX:
        errors["mix"] = _("at most %(limit)d entries.") % {"limit": MAX_MIX}
        return []
    mix: list[dict[str, Any]] = []
    seen: set[str] = set()
    for index, entry in enumerate(value):
        path = f"mix[{index}]"
        if not isinstance(entry, dict):
            errors[path] = _("expected an object {task_type, sample_set, weight}.")
            continue
        task_type = entry.get("task_type")
        if not isinstance(task_type, str) or task_type not in served:
            errors[f"{path}.task_type"] = _(
                "%(value)s is not a task type the services in scope serve (%(served)s)."
            ) % {"value": repr(task_type), "served": ", ".join(sorted(served)) or "none"}
        elif task_type in seen:
            errors[f"{path}.task_type"] = _(
                "%(task_type)s is in the mix twice; give it one sample set and one weight."
            ) % {"task_type": task_type}
        sample_set = _sample_set(entry.get("sample_set"))
        rerunnable = 0
        if sample_set is None:
            errors[f"{path}.sample_set"] = _(
                "no sample set %(value)s; expected its id, its name (the newest version) "
                "or name@version."
            ) % {"value": repr(entry.get("sample_set"))}
        else:
            rerunnable = Sample.objects.filter(sample_set=sample_set, rerunnable=True).count()
            if not rerunnable:
                errors[f"{path}.sample_set"] = _(
                    "%(set)s has no re-runnable sample: a drill sends only samples that may "
                    "be sent again."
                ) % {"set": str(sample_set)}
        workload = entry.get("workload") or (
            policy.drill_workload(task_type) if isinstance(task_type, str) else ""
        )
        if workload not in LoadTestReport.Workload.values:
            errors[f"{path}.workload"] = _(
                "%(value)s is not a workload class; expected one of %(classes)s (empty: the "
                "class its task type needs)."
            ) % {"value": repr(workload), "classes": ", ".join(LoadTestReport.Workload.values)}
        given = entry.get("weight")
        weight = float(given) if _is_number(given) and given >= 0 else 0.0
        if not _is_number(given) or given < 0:
            errors[f"{path}.weight"] = _("expected a number of 0 or more.")
        if isinstance(task_type, str):
            seen.add(task_type)
        if sample_set is not None:
            mix.append(
                {
                    "task_type": task_type,
                    "sample_set": sample_set.pk,
                    "sample_set_label": str(sample_set),
                    "weight": weight,
                    "workload": workload,
                    "rerunnable_samples": rerunnable,
                }
            )
    if mix and not errors and not any(entry["weight"] > 0 for entry in mix):
        errors["mix"] = _("the weights add up to 0: give at least one entry a weight above 0.")
    return mix


def _rate(value: Any, path: str, errors: dict, *, zero_ok: bool = False) -> float:
    if not _is_number(value) or value < 0 or (value == 0 and not zero_ok) or value > MAX_RATE:
        errors[path] = _("expected requests per second above 0 and at most %(max)s.") % {
            "max": f"{MAX_RATE:g}"
        }
        return 0.0
    return float(value)


def _duration(value: Any, path: str, errors: dict) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 < value <= MAX_DURATION_S:
        errors[path] = _("expected whole seconds above 0 and at most %(max)d.") % {
            "max": MAX_DURATION_S
        }
        return 0
    return value


def _arrival(value: Any, errors: dict) -> dict[str, Any]:
    if not isinstance(value, dict):
        errors["arrival"] = _("expected an object with a type: constant, poisson or ramp.")
        return {}
    kind = value.get("type")
    if kind not in ARRIVAL_TYPES:
        errors["arrival.type"] = _("expected constant, poisson or ramp; got %(value)s.") % {
            "value": repr(kind)
        }
        return {}
    if kind != "ramp":
        return {
            "type": kind,
            "rate": _rate(value.get("rate"), "arrival.rate", errors),
            "duration_s": _duration(value.get("duration_s"), "arrival.duration_s", errors),
        }
    stages = value.get("stages")
    if not isinstance(stages, list) or not 0 < len(stages) <= MAX_STAGES:
        errors["arrival.stages"] = _(
            "expected a list of {duration_s, rate}, from 1 to %(max)d stages."
        ) % {"max": MAX_STAGES}
        return {"type": kind, "stages": []}
    clean = []
    for index, stage in enumerate(stages):
        path = f"arrival.stages[{index}]"
        if not isinstance(stage, dict):
            errors[path] = _("expected an object {duration_s, rate}.")
            continue
        clean.append(
            {
                "duration_s": _duration(stage.get("duration_s"), f"{path}.duration_s", errors),
                "rate": _rate(stage.get("rate"), f"{path}.rate", errors, zero_ok=True),
            }
        )
    total = sum(stage["duration_s"] for stage in clean)
    if total > MAX_DURATION_S:
        errors["arrival.stages"] = _(
            "the stages last %(total)d s; a drill lasts at most %(max)d s."
        ) % {"total": total, "max": MAX_DURATION_S}
    elif clean and not errors and not any(stage["rate"] for stage in clean):
        errors["arrival.stages"] = _("every stage's rate is 0: nothing would be sent.")
    return {"type": kind, "stages": clean}


def peak_rate(arrival: Mapping[str, Any]) -> float:
    if arrival.get("type") == "ramp":
        return max((stage["rate"] for stage in arrival.get("stages", [])), default=0.0)
    return float(arrival.get("rate") or 0.0)


def _latency(value: Any, path: str, errors: dict) -> float | None:
    if not _is_number(value) or value <= 0:
        errors[path] = _("expected milliseconds above 0.")
        return None
    return float(value)


def _policy_degradation(services: Sequence[Service], task_type: str) -> dict[str, Any]:
    for service in services:
        policy = service.live_revision.gateway_policy if service.live_revision else None
        rule = ((policy.document or {}).get("degradation") or {}).get(task_type) if policy else None
        if rule:
            return rule
    return {}


def _bounds(
    value: Any, mix: Sequence[Mapping[str, Any]], services: Sequence[Service], errors: dict
) -> dict[str, dict[str, Any]]:
    if not isinstance(value, dict):
        errors["bounds"] = _(
            "expected an object per task type: {ttft_p95_ms, e2e_p95_ms, failure_message, "
            "degrade_to}."
        )
        return {}
    task_types = [entry["task_type"] for entry in mix if isinstance(entry["task_type"], str)]
    for name in value:
        if name not in task_types:
            errors[f"bounds.{name}"] = _("%(name)s is not a task type of the mix.") % {
                "name": repr(name)
            }
    bounds = {}
    for task_type in task_types:
        path = f"bounds.{task_type}"
        given = value.get(task_type)
        if not isinstance(given, dict):
            errors[path] = _(
                "every task type of the mix needs its acceptable p95 TTFT and end to end "
                "(ttft_p95_ms, e2e_p95_ms)."
            )
            continue
        ttft = _latency(given.get("ttft_p95_ms"), f"{path}.ttft_p95_ms", errors)
        e2e = _latency(given.get("e2e_p95_ms"), f"{path}.e2e_p95_ms", errors)
        if ttft is not None and e2e is not None and e2e < ttft:
            errors[f"{path}.e2e_p95_ms"] = _(
                "the end-to-end bound (%(e2e)g ms) cannot be below the TTFT bound (%(ttft)g ms)."
            ) % {"e2e": e2e, "ttft": ttft}
        rule = _policy_degradation(services, task_type)
        failure = _text(given, "failure_message", errors, limit=500)
        degrade = _text(given, "degrade_to", errors, limit=200)
        for name in ("failure_message", "degrade_to"):
            if name in errors:
                errors[f"{path}.{name}"] = errors.pop(name)
        bounds[task_type] = {
            "ttft_p95_ms": ttft,
            "e2e_p95_ms": e2e,
            # From the gateway policy when the plan leaves them out.
            "failure_message": failure or rule.get("message", ""),
            # A fallback names where to; a queue is a degradation too; a stop is not.
            "degrade_to": degrade
            or rule.get("to_service", "")
            or ("" if rule.get("action") in (None, "stop") else str(rule["action"])),
        }
    return bounds


def _ceiling(value: Any, errors: dict) -> int:
    if value in (None, ""):
        return DEFAULT_CEILING
    if not isinstance(value, int) or isinstance(value, bool) or not 0 < value <= MAX_CEILING:
        errors["in_flight_ceiling"] = _("expected a whole number from 1 to %(max)d.") % {
            "max": MAX_CEILING
        }
        return DEFAULT_CEILING
    return value


def _check_ceiling(
    arrival: Mapping[str, Any], bounds: Mapping[str, Mapping[str, Any]], ceiling: int, errors: dict
) -> None:
    """Little's law at the peak: rate * the slowest acceptable end to end."""
    slowest = max((b["e2e_p95_ms"] or 0 for b in bounds.values()), default=0) / 1000
    rate = peak_rate(arrival)
    if not slowest or not rate:
        return
    in_flight = rate * slowest
    if in_flight > ceiling:
        path = "arrival.stages" if arrival.get("type") == "ramp" else "arrival.rate"
        errors[path] = _(
            "%(rate)g requests/s taking up to %(e2e)g s each keep %(in_flight)d in flight, "
            "above the in-flight ceiling of %(ceiling)d: lower the peak to %(fits)g/s or "
            "raise in_flight_ceiling to %(needed)d."
        ) % {
            "rate": rate,
            "e2e": slowest,
            "in_flight": math.ceil(in_flight),
            "ceiling": ceiling,
            "fits": math.floor(ceiling / slowest * 10) / 10,
            "needed": math.ceil(in_flight),
        }


def _capacity(value: Any, errors: dict) -> dict[str, Any]:
    from django.contrib.auth import get_user_model

    if value in (None, ""):
        return {}
    if not isinstance(value, dict):
        errors["capacity"] = _(
            "expected an object {extra_replicas, pool, prewarm_pools, owner, reclaim_by}."
        )
        return {}
    extra = value.get("extra_replicas", 0)
    if not isinstance(extra, int) or isinstance(extra, bool) or not 0 <= extra <= 1000:
        errors["capacity.extra_replicas"] = _("expected a whole number from 0 to 1000.")
        extra = 0
    pool = _text(value, "pool", errors, limit=100)
    if "pool" in errors:
        errors["capacity.pool"] = errors.pop("pool")
    prewarm = value.get("prewarm_pools", [])
    if not isinstance(prewarm, list) or not all(
        isinstance(p, str) and p and "\x00" not in p and len(p) <= 100 for p in prewarm
    ):
        errors["capacity.prewarm_pools"] = _("expected a list of pool names.")
        prewarm = []
    owner = value.get("owner") or ""
    if owner and (
        not isinstance(owner, str)
        or not get_user_model().objects.filter(username=owner, is_active=True).exists()
    ):
        errors["capacity.owner"] = _("no active user %(name)s.") % {"name": repr(owner)}
    reclaim_by = _moment(value.get("reclaim_by"), "capacity.reclaim_by", errors)
    if extra or pool:
        if not owner and "capacity.owner" not in errors:
            errors["capacity.owner"] = _("a scale-up needs the person who owns it.")
        if reclaim_by is None and "capacity.reclaim_by" not in errors:
            errors["capacity.reclaim_by"] = _("a scale-up needs the time it is reclaimed by.")
    return {
        "extra_replicas": extra,
        "pool": pool,
        "prewarm_pools": list(prewarm),
        "owner": owner if isinstance(owner, str) else "",
        "reclaim_by": reclaim_by.isoformat() if reclaim_by else None,
    }


def _signers(value: Any, errors: dict) -> list[str]:
    if value in (None, []):
        return list(DEFAULT_SIGNERS)
    allowed = [role.value for role in SIGNER_ROLES]
    if not isinstance(value, list) or not all(role in allowed for role in value):
        errors["signers"] = _("expected a list of roles among %(roles)s.") % {
            "roles": ", ".join(allowed)
        }
        return list(DEFAULT_SIGNERS)
    return sorted(set(value), key=allowed.index)


def _seed(value: Any, errors: dict) -> int:
    if value in (None, ""):
        return secrets.randbelow(SEED_LIMIT)
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < SEED_LIMIT:
        errors["seed"] = _("expected a whole number from 0 to 2^63 - 1.")
        return 0
    return value


def clean_plan(data: Any) -> CleanPlan:
    """The plan, or PlanRefused naming every fault at once."""
    if not isinstance(data, Mapping):
        raise PlanRefused({"": _("expected a JSON object.")})
    errors: dict[str, str] = {}
    name = _text(data, "name", errors, limit=160, required=True)
    business_event = _text(data, "business_event", errors, limit=200)
    window = data.get("window") or {}
    if not isinstance(window, dict):
        errors["window"] = _("expected an object {starts_at, ends_at}.")
        window = {}
    starts = _moment(window.get("starts_at"), "window.starts_at", errors)
    ends = _moment(window.get("ends_at"), "window.ends_at", errors)
    if starts and ends and ends <= starts:
        errors["window.ends_at"] = _("the window must end after it starts.")
    services = _services(data.get("services"), errors)
    revision = _revision(data.get("revision"), services, errors)
    served = _served_task_types(services)
    mix = _mix(data.get("mix"), served, errors)
    arrival = _arrival(data.get("arrival"), errors)
    bounds = _bounds(data.get("bounds", {}), mix, services, errors)
    ceiling = _ceiling(data.get("in_flight_ceiling"), errors)
    if not errors:
        _check_ceiling(arrival, bounds, ceiling, errors)
    capacity = _capacity(data.get("capacity"), errors)
    signers = _signers(data.get("signers"), errors)
    seed = _seed(data.get("seed"), errors)
    if errors:
        raise PlanRefused(errors)
    return CleanPlan(
        name=name,
        business_event=business_event,
        window_starts_at=starts,
        window_ends_at=ends,
        services=services,
        revision=revision,
        mix=mix,
        arrival=arrival,
        bounds=bounds,
        capacity=capacity,
        seed=seed,
        in_flight_ceiling=ceiling,
        signers=signers,
    )
