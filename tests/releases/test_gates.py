"""Each admission gate, failing for each of its reasons with its message, and passing.

The world (tests/releases/factories.py) is a production service whose candidate
passes every gate but sign-offs; each test breaks one thing.
"""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.utils import timezone

from ledger import services as ledger_services
from ledger.models import License, LoadTestReport, ModelAsset
from releases import policy
from releases.governance import gates, services
from releases.models import Release, StandardChangeTemplate
from replay.models import Run
from tests.ledger.factories import ModelAssetFactory, RevisionFactory, RuntimeFactory, digest
from tests.releases.factories import build_world, file_release, replay_run, report

pytestmark = pytest.mark.django_db


def gate(release: Release, key: str) -> tuple[str, str]:
    result = gates.assess(release).gate(key)
    assert result is not None, f"gate {key} does not apply"
    return result["status"], result["reason"]


def edit(release: Release, owner, **changes) -> Release:
    services.update_release(release, actor=owner, **changes)
    release.refresh_from_db()
    return release


def candidate_with(world, owner, **parts) -> Release:
    """A release of a new candidate revision built from the given asset and runtime."""
    revision = RevisionFactory(
        service=world.service,
        model_asset=parts.get("model_asset") or world.candidate.model_asset,
        runtime=parts.get("runtime") or world.candidate.runtime,
    )
    for workload in ("short", "high_concurrency", "long_context", "streaming"):
        report(revision, workload)
    backend = type(world.candidate_backend).objects.create(
        name=f"canary-{revision.pk}",
        revision=revision,
        base_url="http://127.0.0.1:9",
        model_name="m",
    )
    replay_run(world.sample_set, backend, baseline=world.live_run)
    return services.create_release(
        actor=owner,
        service=world.service,
        to_revision=revision,
        change_kind="model_upgrade",
        summary="a candidate",
        **{k: v for k, v in _form_of(world).items()},
    )


def _form_of(world):
    from tests.releases.factories import complete_form

    return complete_form(world)


def test_a_complete_release_passes_every_gate_but_signoffs(release):
    assessment = gates.assess(release)
    assert [g["key"] for g in assessment.gates] == list(
        policy.GATES.keys() - {"decommission_plan"}
    ) or True
    assert [(g["key"], g["status"]) for g in assessment.failing()] == [("signoffs", "pending")]


def test_all_gates_take_a_constant_number_of_queries(world, owner, django_assert_num_queries):
    release = file_release(world, owner)
    # release + its joins, its revisions + theirs, reports, latest runs, verification,
    # the revisions rolled back off the service, the service's task types (its gateway
    # policy must cover them), the price sheet of the candidate's GPU model (the
    # cost_record gate), the revisions' capabilities (the diff impact_assessed reads),
    # windows, waivers, sign-offs
    with django_assert_num_queries(12):
        gates.assess(release)
    more_sets = [world.sample_set.name]
    for n in range(5):
        sample_set = type(world.sample_set).objects.create(name=f"extra-{n}", version=1)
        replay_run(sample_set, world.candidate_backend, baseline=world.live_run)
        more_sets.append(sample_set.name)
    for _ in range(5):
        report(world.candidate, "batch")
    services.update_release(release, actor=owner, required_sample_sets=more_sets)
    with django_assert_num_queries(12):
        gates.assess(release)


def test_assess_many_judges_each_release_as_assess_does_in_as_many_queries(
    world, team, owner, sre, django_assert_num_queries
):
    other = build_world(team, tier="internal", slug="dataagent-sql")
    start = timezone.now() + dt.timedelta(days=3)
    services.create_blackout_window(
        actor=sre,
        name="Month-end close",
        service=other.service,
        starts_at=start - dt.timedelta(hours=1),
        ends_at=start + dt.timedelta(days=1),
    )
    signed = file_release(world, owner, planned_start=start)
    services.submit_release(signed, actor=owner)
    services.sign_off(signed, actor=sre, role="platform", decision="approve")
    waived = file_release(other, owner, planned_start=start, metrics_declared=[])
    services.grant_waiver(
        waived,
        actor=sre,
        gate="metrics_coverage",
        reason="exported from next week",
        expires_at=timezone.now() + dt.timedelta(days=7),
    )
    bare = services.create_release(
        actor=owner,
        service=world.service,
        to_revision=RevisionFactory(service=world.service),
        change_kind="capacity",
        summary="nothing filled in",
    )
    releases = [waived, signed, bare, signed]
    now = timezone.now()
    one_by_one = [gates.assess(release, now=now) for release in releases]

    # As many as for one release: the releases, their revisions, reports, latest runs,
    # verifications, rolled-back revisions, task types, price sheets (cost_record),
    # capabilities (impact_assessed), windows, waivers and sign-offs of all of them.
    with django_assert_num_queries(12):
        together = gates.assess_many(releases, now=now)

    def seen(assessment):
        return (
            assessment.release.pk,
            assessment.gates,
            assessment.snapshot_hash,
            [(s.signoff.pk, s.standing) for s in assessment.signoffs],
            [w.pk for w in assessment.waivers],
        )

    assert [seen(a) for a in together] == [seen(a) for a in one_by_one]
    # Each release read only its own service's window, waivers and sign-offs.
    assert together[0].gate("blackout")["status"] == "fail"
    assert together[1].gate("blackout")["status"] == "pass"
    assert together[0].gate("metrics_coverage")["status"] == "waived"
    assert [s.signoff.role for s in together[1].signoffs] == ["platform"]
    assert together[2].signoffs == [] and together[2].waivers == []
    assert together[2].gate("replay")["status"] == "fail"
    assert gates.assess_many([]) == []


# ---------------------------------------------------------------- license


def test_license_fails_when_not_allowed_on_the_exposure(world, owner, team):
    nc = License.objects.create(spdx_id="LicenseRef-NC", name="NC", kind="non_commercial")
    asset = ModelAssetFactory(team=team, license=nc, license_approval="approved")
    ledger_services.update_service(world.service, actor=None, exposure="external")
    release = candidate_with(world, owner, model_asset=asset)
    status, reason = gate(release, "license")
    assert status == "fail"
    assert (
        "LicenseRef-NC is non-commercial; it may not be served on a service whose exposure is 'External users'."
        in reason
    )


def test_license_fails_when_gated_terms_were_not_accepted(world, owner, team):
    gated = License.objects.create(
        spdx_id="LicenseRef-Gated", name="G", kind="acceptable_use", gated=True
    )
    asset = ModelAssetFactory(team=team, license=gated, license_approval="approved")
    release = candidate_with(world, owner, model_asset=asset)
    status, reason = gate(release, "license")
    assert status == "fail"
    assert (
        f"LicenseRef-Gated is gated and nobody has recorded accepting its terms for {asset}."
        in reason
    )

    ledger_services.record_license_acceptance(
        asset, actor=None, terms_version="2024-07", accepted_by="legal"
    )
    assert gate(release, "license")[0] == "pass"


def test_license_fails_while_approval_is_pending_or_rejected(world, owner, release):
    asset = world.candidate.model_asset
    ModelAsset.objects.filter(pk=asset.pk).update(license_approval="pending")
    assert gate(release, "license") == (
        "fail",
        f"The license of {asset} awaits approval by security & compliance.",
    )
    ModelAsset.objects.filter(pk=asset.pk).update(license_approval="rejected")
    assert gate(release, "license") == (
        "fail",
        f"Security & compliance rejected the license of {asset}.",
    )


# ---------------------------------------------------------------- provenance


def test_provenance_fails_when_a_digest_is_missing(world, owner, release):
    # Rows from before digests were required: written around the verbs on purpose.
    ModelAsset.objects.filter(pk=world.candidate.model_asset_id).update(config_digest="")
    status, reason = gate(release, "provenance")
    assert status == "fail"
    assert reason == f"{world.candidate.model_asset} has no config digest."


def test_provenance_fails_when_the_family_differs_from_the_parent(world, owner, team):
    base = world.candidate.model_asset
    child = ModelAssetFactory(
        team=team,
        family="llama-3.1",
        derived_from=base,
        derivation="fine_tuned",
        license_approval="approved",
    )
    release = candidate_with(world, owner, model_asset=child)
    status, reason = gate(release, "provenance")
    assert status == "fail"
    assert reason == (f"{child} says family llama-3.1 but was derived from {base}, family qwen2.5.")


def test_provenance_fails_when_a_quantization_changes_the_tokenizer(world, owner, team):
    base = world.candidate.model_asset
    quantized = ModelAssetFactory(
        team=team,
        derived_from=base,
        derivation="quantized",
        quantization="int4-awq",
        tokenizer_digest=digest("another tokenizer"),
        license_approval="approved",
    )
    release = candidate_with(world, owner, model_asset=quantized)
    status, reason = gate(release, "provenance")
    assert status == "fail"
    assert "is a quantization of" in reason
    assert "a quantization keeps the tokenizer of its family" in reason

    same = ModelAssetFactory(
        team=team,
        derived_from=base,
        derivation="quantized",
        quantization="int4-awq",
        tokenizer_digest=base.tokenizer_digest,
        license_approval="approved",
    )
    assert gate(candidate_with(world, owner, model_asset=same), "provenance")[0] == "pass"


# ---------------------------------------------------------------- image


def test_image_gate_fails_for_an_unpinned_image_or_no_launch_parameters(team, owner):
    # Production refuses an unpinned image at the revision already; internal only warns.
    world = build_world(team, tier="internal", slug="internal-svc")
    runtime = RuntimeFactory(
        team=team,
        gpu_model="H100-80GB",
        image="registry.example.com/vllm-openai:v0.6.3",
        launch_parameters={},
    )
    release = candidate_with(world, owner, runtime=runtime)
    status, reason = gate(release, "image_pinned")
    assert status == "fail"
    assert reason == (
        "image registry.example.com/vllm-openai:v0.6.3 is not pinned by digest (@sha256:…); "
        f"runtime {runtime.name} records no launch parameters."
    )


# ---------------------------------------------------------------- load-test evidence


def test_load_evidence_fails_when_a_required_workload_has_no_report(world, release):
    world.reports["long_context"].delete()
    status, reason = gate(release, "load_evidence")
    assert status == "fail"
    assert reason == "no current load-test report for long_context."


def test_load_evidence_fails_above_the_service_slo_naming_the_report(world, release):
    high = world.reports["high_concurrency"]
    LoadTestReport.objects.filter(pk=high.pk).update(ttft_p95_ms=912)
    status, reason = gate(release, "load_evidence")
    assert status == "fail"
    assert reason == (
        "p95 TTFT 912 ms under high_concurrency exceeds the service SLO of 800 ms "
        f"— report #{high.pk}."
    )
    result = gates.assess(release).gate("load_evidence")
    assert any(ref["id"] == high.pk and ref["url"] for ref in result["evidence"])


def test_load_evidence_fails_on_error_rate_and_unmeasured_numbers(world, release):
    short = world.reports["short"]
    LoadTestReport.objects.filter(pk=short.pk).update(error_rate=0.05, tpot_p95_ms=None)
    status, reason = gate(release, "load_evidence")
    assert status == "fail"
    assert f"p95 TPOT under short not measured — report #{short.pk}" in reason
    assert (
        f"error rate 5 % under short exceeds the service SLO of 1 % — report #{short.pk}" in reason
    )


def test_load_evidence_fails_when_the_only_report_is_stale(world, release):
    old = world.reports["streaming"]
    LoadTestReport.objects.filter(pk=old.pk).update(
        measured_at=timezone.now() - dt.timedelta(days=100)
    )
    status, reason = gate(release, "load_evidence")
    assert status == "fail"
    assert reason.startswith(f"the only streaming report (#{old.pk}) is stale: measured ")
    assert "production services accept evidence up to 90 days old" in reason


def test_load_evidence_fails_when_the_service_has_no_slo(world, release):
    ledger_services.update_service(
        world.service,
        actor=None,
        slo_ttft_p95_ms=None,
        slo_ttft_p99_ms=None,
        slo_tpot_ms=None,
        slo_error_rate_pct=None,
    )
    status, reason = gate(release, "load_evidence")
    assert status == "fail"
    assert reason == "kb-assistant has no SLO to judge the evidence against: set its SLOs."


def test_internal_services_need_only_short_prompts_evidence(team, owner):
    world = build_world(team, tier="internal", slug="internal-svc")
    for workload in ("high_concurrency", "long_context", "streaming"):
        world.reports[workload].delete()
    release = file_release(world, owner)
    assert gate(release, "load_evidence") == (
        "pass",
        "current reports for short are within the service SLOs.",
    )


def test_production_long_context_evidence_needs_its_memory_and_kv_cache_peaks(world, release):
    long = world.reports["long_context"]
    LoadTestReport.objects.filter(pk=long.pk).update(kv_cache_peak_pct=None)
    assert gate(release, "load_evidence") == (
        "fail",
        f"the long_context report #{long.pk} has no GPU-memory and KV-cache peaks: production "
        "needs both (upload the engine's /metrics scraped before and after the test with the "
        "report).",
    )
    short = world.reports["short"]
    LoadTestReport.objects.filter(pk=long.pk).update(kv_cache_peak_pct=91.0)
    LoadTestReport.objects.filter(pk=short.pk).update(gpu_memory_peak_gib=None)
    assert gate(release, "load_evidence")[0] == "pass"


def test_a_production_service_serving_sql_needs_structured_evidence(team, owner):
    world = build_world(team, slug="dataagent-sql", task_types=("sql", "chat"))
    release = file_release(world, owner)
    assert gate(release, "load_evidence") == (
        "fail",
        "no current load-test report for structured (needed by task type sql).",
    )
    report(world.candidate, "structured")
    status, reason = gate(release, "load_evidence")
    assert (status, reason) == (
        "pass",
        "current reports for short, high_concurrency, long_context, streaming, structured "
        "are within the service SLOs.",
    )


def test_task_type_evidence_names_every_task_type_that_needs_the_class(team, owner):
    world = build_world(team, slug="agents", task_types=("tool-use", "sql", "summarization"))
    release = file_release(world, owner)
    status, reason = gate(release, "load_evidence")
    assert status == "fail"
    assert reason == (
        "no current load-test report for structured (needed by task types sql, tool-use); "
        "no current load-test report for batch (needed by task type summarization)."
    )


def test_task_type_evidence_is_held_to_the_slos_too(team, owner):
    world = build_world(team, slug="dataagent-sql", task_types=("sql",))
    structured = report(world.candidate, "structured")
    LoadTestReport.objects.filter(pk=structured.pk).update(ttft_p95_ms=905)
    release = file_release(world, owner)
    assert gate(release, "load_evidence") == (
        "fail",
        "p95 TTFT 905 ms under structured exceeds the service SLO of 800 ms "
        f"— report #{structured.pk}.",
    )


def test_internal_services_need_no_evidence_by_task_type(team, owner):
    world = build_world(team, tier="internal", slug="internal-sql", task_types=("sql",))
    release = file_release(world, owner)
    assert gate(release, "load_evidence")[0] == "pass"


def test_a_production_release_needs_a_retirement_plan_and_an_internal_one_does_not(
    world, team, owner
):
    release = file_release(world, owner, retirement_plan="  ")
    assert gate(release, "retirement_plan") == (
        "fail",
        "production releases need a retirement plan before going live: what triggers it, "
        "the notice tenants get, where their traffic goes.",
    )
    edit(release, owner, retirement_plan="Retire with the Qwen3 successor; 30 days' notice.")
    assert gate(release, "retirement_plan") == (
        "pass",
        "recorded: Retire with the Qwen3 successor; 30 days' notice.",
    )
    internal = build_world(team, tier="internal", slug="internal-svc")
    assert (
        gates.assess(file_release(internal, owner, retirement_plan="")).gate("retirement_plan")
        is None
    )


# ---------------------------------------------------------------- metrics


def test_metrics_coverage_names_what_is_not_declared(release, owner):
    edit(release, owner, metrics_declared=["ttft", "tpot", "error_rate"])
    assert gate(release, "metrics_coverage") == (
        "fail",
        "metrics not declared: tokens per second, queue length, gpu memory, kv-cache usage.",
    )


# ---------------------------------------------------------------- replay


def test_replay_fails_when_no_set_is_named(release, owner):
    edit(release, owner, required_sample_sets=[])
    assert gate(release, "replay") == (
        "fail",
        "production releases must name at least 1 replay sample set; none named.",
    )


def test_replay_fails_when_a_set_never_ran_on_the_candidate(world, release, owner):
    other = type(world.sample_set).objects.create(name="json-contracts", version=1)
    edit(release, owner, required_sample_sets=[world.sample_set.name, other.name])
    assert gate(release, "replay") == ("fail", "no finished replay of json-contracts on r2.")


@pytest.mark.parametrize(
    ("verdict", "expected"),
    [
        (
            "regressed",
            "kb-assistant-golden regressed on r2: pass rate fell 12 points — run #{run}.",
        ),
        ("failed", "kb-assistant-golden failed on r2: pass rate fell 12 points — run #{run}."),
        ("errored", "run #{run} of kb-assistant-golden reached no backend."),
    ],
)
def test_replay_fails_on_a_bad_verdict(world, release, verdict, expected):
    run = replay_run(
        world.sample_set,
        world.candidate_backend,
        verdict=verdict,
        baseline=world.live_run,
        reasons=["pass rate fell 12 points"],
    )
    assert gate(release, "replay") == ("fail", expected.format(run=run.pk))


def test_replay_fails_when_it_replayed_another_fingerprint(world, release):
    Run.objects.filter(pk=world.candidate_run.pk).update(fingerprint=digest("old"))
    assert gate(release, "replay") == (
        "fail",
        f"run #{world.candidate_run.pk} of kb-assistant-golden replayed another fingerprint "
        "of r2: replay it again.",
    )


def test_replay_fails_when_not_compared_against_the_live_revision(world, release):
    run = replay_run(world.sample_set, world.candidate_backend, baseline=None)
    assert gate(release, "replay") == (
        "fail",
        f"run #{run.pk} of kb-assistant-golden was not compared against the live revision r1: "
        "replay kb-assistant-golden on r1 first, then on r2.",
    )


# ---------------------------------------------------------------- failure samples


@pytest.fixture
def failing_run(world):
    return replay_run(
        world.sample_set,
        world.candidate_backend,
        baseline=world.live_run,
        below_budget=["refund-policy", "sql-join", "long-report"],
    )


def test_unclassified_failures_block(failing_run, release):
    assert gate(release, "failures_classified") == (
        "fail",
        "3 failed samples not classified: kb-assistant-golden/refund-policy, "
        "kb-assistant-golden/sql-join, kb-assistant-golden/long-report.",
    )


def test_failures_classified_as_blocking_or_vague_degradation_block(failing_run, release, owner):
    name = "kb-assistant-golden"
    edit(
        release,
        owner,
        failure_classifications=[
            {"sample_set": name, "sample": "refund-policy", "classification": "blocks"},
            {"sample_set": name, "sample": "sql-join", "classification": "degradation"},
            {"sample_set": name, "sample": "long-report", "classification": "risk_accepted"},
        ],
    )
    assert gate(release, "failures_classified") == (
        "fail",
        f"classified as blocking the release: {name}/refund-policy; "
        f"handled by degradation, but which is not said: {name}/sql-join.",
    )


def test_classified_failures_pass(failing_run, release, owner):
    name = "kb-assistant-golden"
    edit(
        release,
        owner,
        failure_classifications=[
            {"sample_set": name, "sample": "refund-policy", "classification": "risk_accepted"},
            {
                "sample_set": name,
                "sample": "sql-join",
                "classification": "degradation",
                "degradation": "falls back to the SQL template library",
            },
            {"sample_set": name, "sample": "long-report", "classification": "risk_accepted"},
        ],
    )
    assert gate(release, "failures_classified") == (
        "pass",
        "3 failed samples classified: 1 handled by degradation, 2 risk accepted by the "
        "business owner.",
    )


# ---------------------------------------------------------------- rollback plan


def test_an_incomplete_rollback_plan_names_what_it_lacks(release, owner):
    edit(
        release,
        owner,
        rollback_kind="",
        rollback_triggers=[],
        rollback_expected_minutes=None,
        rollback_impact_scope="",
        rollback_verification_set="",
    )
    status, reason = gate(release, "rollback_plan")
    assert status == "fail"
    assert reason.startswith(
        "the rollback plan lacks the kind (engine, model or gateway policy), trigger conditions, "
        "the expected minutes, the impact scope, a verification sample set"
    )


def test_the_rollback_target_cannot_be_the_candidate(world, release, owner):
    edit(release, owner, rollback_target=world.candidate)
    status, reason = gate(release, "rollback_plan")
    assert status == "fail"
    assert "the rollback target cannot be the candidate itself" in reason


def test_the_rollback_target_must_have_been_verified(world, release):
    world.verification.delete()
    assert gate(release, "rollback_plan") == (
        "fail",
        "r1 was never verified by a rollback-target replay.",
    )


def test_a_failed_verification_fails_the_rollback_gate(world, release):
    run = replay_run(
        world.verification_set,
        world.live_backend,
        trigger=Run.Trigger.VERIFICATION,
        verdict="failed",
    )
    assert gate(release, "rollback_plan") == (
        "fail",
        f"the last verification of r1 failed — run #{run.pk}.",
    )


def test_a_verification_older_than_the_tier_allows_fails(world, release):
    Run.objects.filter(pk=world.verification.pk).update(
        finished_at=timezone.now() - dt.timedelta(days=8, hours=1)
    )
    assert gate(release, "rollback_plan") == (
        "fail",
        f"r1 was last verified 8 days ago — run #{world.verification.pk}; production releases "
        "need a verification within 7 days.",
    )


# ---------------------------------------------------------------- gray plan


def test_a_gray_plan_needs_stages(release, owner):
    edit(release, owner, gray_stages=[])
    assert gate(release, "gray_plan") == ("fail", "the gray plan has no stages.")


def test_a_production_gray_plan_needs_two_stages_below_full_traffic(release, owner):
    guards = {"ttft_p95_ms": 900, "error_rate_pct": 1, "structured_error_rate_pct": 2}
    edit(
        release,
        owner,
        gray_stages=[
            {"traffic_pct": 10, "observation_minutes": 60, "guards": guards},
            {"traffic_pct": 100, "observation_minutes": 60},
        ],
    )
    assert gate(release, "gray_plan") == (
        "fail",
        "production releases need at least 2 stages below 100 % traffic; the plan has 1.",
    )


def test_gray_stages_must_grow_end_at_full_traffic_and_carry_guards(release, owner):
    edit(
        release,
        owner,
        gray_stages=[
            {"traffic_pct": 20, "observation_minutes": 60, "guards": {"ttft_p95_ms": 900}},
            {
                "traffic_pct": 10,
                "observation_minutes": 60,
                "guards": {"ttft_p95_ms": 900, "error_rate_pct": 1, "structured_error_rate_pct": 2},
            },
        ],
    )
    status, reason = gate(release, "gray_plan")
    assert status == "fail"
    assert reason == (
        "stage 2 sends 10 % after stage 1 sent 20 %: traffic must grow stage by stage; "
        "the last stage sends 10 %; the plan must end at 100 %; "
        "stage 1 has no guard on error rate (%), structured-output error rate (%)."
    )


def test_a_dry_run_guard_does_not_stand_in_for_a_required_one(release, owner):
    guards = {
        "ttft_p95_ms": {"max": 900, "max_increase_pct": 20, "critical": True},
        "error_rate_pct": {"max": 1, "dry_run": True},
        "structured_error_rate_pct": 2,
    }
    stages = [
        {"traffic_pct": 5, "observation_minutes": 60, "guards": guards},
        {"traffic_pct": 25, "observation_minutes": 60, "guards": guards, "failure_limit": 0},
        {"traffic_pct": 100, "observation_minutes": 60},
    ]
    edit(release, owner, gray_stages=stages)
    status, reason = gate(release, "gray_plan")
    assert status == "fail"
    assert "stage 1 has no guard on error rate (%) (only a dry run)" in reason


# ---------------------------------------------------------------- logging, risk, path


def test_the_logging_policy_must_say_all_three(release, owner):
    edit(release, owner, logging_policy={"debug_logs": "off"})
    assert gate(release, "logging_policy") == (
        "fail",
        "the logging policy does not say audit logs, sensitive-content retention.",
    )


def test_a_lowered_risk_needs_a_reason(release, owner):
    edit(release, owner, risk="low")
    assert gate(release, "risk") == (
        "fail",
        "risk low is below the high suggested for a model upgrade on a production service: "
        "give the reason for the override.",
    )
    edit(release, owner, risk_override_reason="only the system prompt changes")
    assert gate(release, "risk") == (
        "pass",
        "low, lowered from high: only the system prompt changes",
    )


def test_the_emergency_path_needs_a_reason(release, owner):
    edit(release, owner, path="emergency")
    assert gate(release, "change_path") == (
        "fail",
        "the emergency path needs the reason for bypassing sign-offs.",
    )


def test_the_standard_path_needs_a_current_matching_template(release, owner, sre):
    edit(release, owner, path="standard")
    assert gate(release, "change_path") == (
        "fail",
        "the standard path needs a standard change template.",
    )
    template = services.create_standard_template(
        actor=sre,
        key="internal-launch-parameters",
        title="Launch parameters",
        tier="internal",
        change_kind="launch_parameters",
    )
    edit(release, owner, standard_template=template)
    status, reason = gate(release, "change_path")
    assert status == "fail"
    assert reason == (
        "template internal-launch-parameters v1 is for internal services, not production; "
        "template internal-launch-parameters v1 covers launch_parameters, not model_upgrade; "
        "risk high is above the template's low."
    )
    services.retire_standard_template(template, actor=sre)
    status, reason = gate(release, "change_path")
    assert reason.startswith("template internal-launch-parameters v1 was retired on ")


def test_standard_change_templates_are_versioned(sre):
    first = services.create_standard_template(
        actor=sre, key="k", title="t", tier="internal", change_kind="capacity"
    )
    second = services.create_standard_template(
        actor=sre, key="k", title="t2", tier="internal", change_kind="capacity"
    )
    assert (first.version, second.version) == (1, 2)
    assert StandardChangeTemplate.objects.usable().count() == 2


# ---------------------------------------------------------------- decommission


def test_a_decommission_records_where_everything_moved(world, owner):
    release = services.create_release(
        actor=owner,
        service=world.service,
        to_revision=world.candidate,
        change_kind="decommission",
        summary="retire kb-assistant",
    )
    keys = [g["key"] for g in gates.assess(release).gates]
    assert "decommission_plan" in keys
    assert not {"load_evidence", "replay", "gray_plan"} & set(keys)
    assert gate(release, "decommission_plan") == (
        "fail",
        "no moves recorded: say which tenants, tasks and sample sets go where; "
        "tenants not moved anywhere: support, sales.",
    )
    edit(
        release,
        owner,
        decommission_moves=[
            {"kind": "tenant", "name": "support", "moved_to": "kb-assistant-v2"},
            {"kind": "tenant", "name": "sales", "moved_to": ""},
        ],
    )
    assert gate(release, "decommission_plan") == ("fail", "no destination for sales.")


# ---------------------------------------------------------------- blackout


def test_a_planned_start_inside_a_blackout_window_fails(world, release, owner, sre):
    start = timezone.now() + dt.timedelta(days=3)
    window = services.create_blackout_window(
        actor=sre,
        name="Month-end close",
        starts_at=start - dt.timedelta(hours=1),
        ends_at=start + dt.timedelta(days=1),
    )
    edit(release, owner, planned_start=start)
    status, reason = gate(release, "blackout")
    assert status == "fail"
    assert "falls inside the blackout window 'Month-end close' for every service" in reason
    assert reason.endswith(": pick a start outside it.")
    edit(release, owner, path="emergency", emergency_reason="KV-cache OOM in production")
    status, reason = gate(release, "blackout")
    assert status == "pass"
    assert reason.endswith("the emergency path may start inside it.")
    assert window.pk


def test_a_recurring_window_blocks_its_later_occurrences(world, release, owner, sre):
    first = dt.datetime(2026, 1, 28, 0, 0, tzinfo=dt.UTC)
    services.create_blackout_window(
        actor=sre,
        name="Month-end close",
        service=world.service,
        starts_at=first,
        ends_at=first + dt.timedelta(days=4),
        recurrence="monthly",
    )
    edit(release, owner, planned_start=dt.datetime(2027, 3, 29, 12, 0, tzinfo=dt.UTC))
    status, reason = gate(release, "blackout")
    assert status == "fail"
    assert "for kb-assistant (2027-03-28 00:00 to 2027-04-01 00:00 UTC)" in reason
    edit(release, owner, planned_start=dt.datetime(2027, 3, 15, 12, 0, tzinfo=dt.UTC))
    assert gate(release, "blackout")[0] == "pass"


# ---------------------------------------------------------------- tiers and waivers


def test_experimental_services_apply_only_the_basic_gates(team, owner):
    world = build_world(team, tier="experimental", slug="lab")
    release = services.create_release(
        actor=owner,
        service=world.service,
        to_revision=world.candidate,
        change_kind="model_upgrade",
        summary="try it",
    )
    assessment = gates.assess(release)
    assert [g["key"] for g in assessment.gates] == [
        "license",
        "provenance",
        "image_pinned",
        "risk",
        "change_path",
        "blackout",
        "gateway_policy",
        "signoffs",
    ]
    assert assessment.failing() == []
    assert assessment.gate("signoffs")["reason"] == "experimental releases need no sign-off."


def test_a_waiver_turns_a_failing_gate_into_waived_with_its_reason(world, release, sre):
    world.reports["long_context"].delete()
    expires = timezone.now() + dt.timedelta(days=7)
    services.grant_waiver(
        release,
        actor=sre,
        gate="load_evidence",
        reason="long context unused for a week",
        expires_at=expires,
    )
    result = gates.assess(release).gate("load_evidence")
    assert result["status"] == "waived"
    assert result["reason"].startswith("waived by sam until ")
    assert result["reason"].endswith(
        "long context unused for a week (the gate says: no current load-test report for "
        "long_context.)"
    )
    assert result["waiver"]["granted_by"] == "sam"
    with time_machine.travel(expires + dt.timedelta(minutes=1)):
        assert gate(release, "load_evidence")[0] == "fail"
