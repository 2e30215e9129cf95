"""The impact a release has downstream, suggested from the revision diff and held by the
impact_assessed gate; a task type that must never degrade silently raises the risk,
the stages and the rollback target's bar (issue 34, item 1)."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from ledger import queries as ledger_queries
from ledger.models import Runtime, TaskType
from releases.governance import gates, services
from releases.governance.forms.release import ReleaseForm
from releases.governance.impact import suggested_systems
from releases.models import Release
from tests.releases.factories import GOOD_STAGES, build_world, file_release
from tests.replay.factories import SampleFactory, SampleSetFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _task_types():
    for slug in ("chat", "sql", "tool-use", "summarization"):
        TaskType.objects.get_or_create(slug=slug, defaults={"name": slug})


def gate(release: Release, key: str) -> tuple[str, str]:
    result = gates.assess(release).gate(key)
    assert result is not None, f"gate {key} does not apply"
    return result["status"], result["reason"]


def change(field: str) -> ledger_queries.Change:
    return {"field": field, "from": 1, "to": 2, "breaking": False, "why": ""}


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        (["capabilities.streaming"], ["front_end", "trace"]),
        (["launch_parameters.chat_template"], ["front_end", "trace"]),
        (["launch_parameters.tool_call_parser"], ["tool_registry", "dataagent", "trace"]),
        (["capabilities.structured_output"], ["tool_registry", "dataagent", "trace"]),
        (["launch_parameters.grammar_backend"], ["tool_registry", "dataagent", "trace"]),
        (["quantization"], ["trace", "eval"]),
        (["tokenizer_digest"], ["trace", "eval"]),
        (["model_asset"], ["trace", "eval"]),
        (["launch_parameters.quantization"], ["trace", "eval"]),
        (["launch_parameters.kv_cache_dtype"], ["trace", "eval"]),
        (["gateway_policy.egress.external_fallback_allowed"], ["trace", "security", "cost_view"]),
        (["gateway_policy_version"], ["trace", "security", "cost_view"]),
        (["launch_parameters.gpu_memory_utilization"], ["trace"]),
        ([], []),
    ],
)
def test_what_each_change_suggests(fields, expected):
    assert list(suggested_systems([change(f) for f in fields])) == expected


def test_the_gate_names_each_suggested_system_by_its_label_until_ticked_or_dismissed(world, owner):
    release = file_release(world, owner, impact_downstream=[])
    status, reason = gate(release, "impact_assessed")
    assert status == "fail"
    assert reason == (
        "the diff suggests Front end (chat_template_digest), Trace (any change), Eval "
        "(tokenizer_digest, model_asset, weights_digest): tick each as touched or dismiss "
        "it with a reason."
    )
    services.update_release(
        release,
        actor=owner,
        impact_downstream=["eval", "trace"],
        impact_dismissed=[{"system": "front_end", "reason": "no page renders its prompts"}],
    )
    release.refresh_from_db()
    assert gate(release, "impact_assessed") == (
        "pass",
        "Front end, Trace, Eval suggested by the diff, each ticked or dismissed.",
    )


def test_a_dismissal_needs_a_reason_and_cannot_contradict_a_tick(world, owner):
    release = file_release(world, owner)
    with pytest.raises(ValidationError) as refused:
        services.update_release(
            release, actor=owner, impact_dismissed=[{"system": "eval", "reason": ""}]
        )
    assert "impact_dismissed[0].reason" in str(refused.value.message_dict["impact_dismissed"])
    with pytest.raises(ValidationError) as refused:
        services.update_release(
            release, actor=owner, impact_dismissed=[{"system": "eval", "reason": "no evals"}]
        )
    assert refused.value.message_dict["impact_dismissed"] == [
        "eval both ticked as touched and dismissed: keep one."
    ]
    release.refresh_from_db()
    assert release.impact_dismissed == []


def test_every_impacted_task_type_needs_a_required_set_tagged_with_it(
    world, owner, django_assert_num_queries
):
    release = file_release(world, owner, impact_task_types=["chat"])
    assert gate(release, "impact_assessed") == (
        "fail",
        "no required replay sample set has a sample tagged chat: name one that covers each "
        "impacted task type.",
    )
    # An older version of the set does not count: the newest is what replays.
    SampleFactory(sample_set=world.sample_set, tags=["factual"])
    newer = SampleSetFactory(name=world.sample_set.name, version=2)
    SampleFactory(sample_set=newer, tags=["chat", "factual"])
    with django_assert_num_queries(13):  # the sets' tags: one more
        status, reason = gate(release, "impact_assessed")
    assert (status, reason) == (
        "pass",
        "Front end, Trace, Eval suggested by the diff, each ticked or dismissed; chat covered "
        "by required sample sets.",
    )


def test_an_internal_release_is_held_too_and_an_experimental_one_is_not(team, owner):
    internal = build_world(team, tier="internal", slug="internal-svc")
    release = file_release(internal, owner, impact_downstream=[])
    assert gate(release, "impact_assessed")[0] == "fail"
    lab = build_world(team, tier="experimental", slug="lab")
    assert gates.assess(file_release(lab, owner)).gate("impact_assessed") is None


# ---------------------------------------------------------------- never degrade silently


def test_a_sql_change_is_suggested_riskier_than_the_same_change_on_a_summarizer(team, owner):
    sql = build_world(team, tier="internal", slug="dataagent-sql", task_types=("sql",))
    summarizer = build_world(
        team, tier="internal", slug="summarizer", task_types=("summarization",)
    )
    on_sql = file_release(sql, owner, change_kind="quantization_switch", impact_task_types=["sql"])
    on_summaries = file_release(
        summarizer,
        owner,
        change_kind="quantization_switch",
        impact_task_types=["summarization"],
    )
    assert gate(on_sql, "risk") == (
        "pass",
        "high, as suggested for a quantization switch touching sql, which must never degrade "
        "silently, on an internal service.",
    )
    assert gate(on_summaries, "risk") == (
        "pass",
        "medium, as suggested for a quantization switch on an internal service.",
    )
    lowered = file_release(
        sql,
        owner,
        change_kind="quantization_switch",
        impact_task_types=["sql"],
        risk="medium",
    )
    assert gate(lowered, "risk")[0] == "fail"


def test_a_never_degrading_task_type_needs_one_more_stage(world, owner):
    release = file_release(world, owner, impact_task_types=["tool-use"])
    assert gate(release, "gray_plan") == (
        "fail",
        "production releases need at least 3 stages below 100 % traffic when tool-use must "
        "never degrade silently; the plan has 2.",
    )
    stages = [dict(s) for s in GOOD_STAGES]
    stages.insert(1, {**stages[0], "traffic_pct": 10})
    services.update_release(release, actor=owner, gray_stages=stages)
    release.refresh_from_db()
    assert gate(release, "gray_plan")[0] == "pass"


def test_a_never_degrading_task_type_needs_a_ready_rollback_target(world, owner):
    Runtime.objects.filter(pk=world.live.runtime_id).update(image="vllm/vllm-openai:v0.6.4")
    plain = file_release(world, owner)
    assert gate(plain, "rollback_plan")[0] == "pass"
    strict = file_release(world, owner, impact_task_types=["sql"])
    status, reason = gate(strict, "rollback_plan")
    assert status == "fail"
    assert reason == (
        f"{world.live.label}'s image vllm/vllm-openai:v0.6.4 is not pinned by digest (sql "
        "must never degrade silently, so the target must be ready)."
    )


# ---------------------------------------------------------------- the form


def test_a_new_release_touches_the_services_tenants_and_task_types_by_default(team):
    world = build_world(team, slug="kb", task_types=("chat", "rag"))
    form = ReleaseForm(service=world.service)
    assert form.initial["impact_tenants"] == ["support", "sales"]
    assert sorted(form.initial["impact_task_types"]) == ["chat", "rag"]


def test_the_form_reads_dismissals_a_line_each_and_names_a_bad_line(world, owner):
    release = file_release(world, owner)
    base = {"to_revision": world.candidate.pk, "change_kind": "model_upgrade", "summary": "x"}
    form = ReleaseForm(
        {**base, "impact_dismissed": "Front end: no page renders its prompts\ncost_view: flat fee"},
        service=world.service,
        release=release,
    )
    form.is_valid()
    assert form.cleaned_data["impact_dismissed"] == [
        {"system": "front_end", "reason": "no page renders its prompts"},
        {"system": "cost_view", "reason": "flat fee"},
    ]
    bad = ReleaseForm(
        {**base, "impact_dismissed": "Front end: fine\nBilling: not ours"},
        service=world.service,
        release=release,
    )
    assert not bad.is_valid()
    assert bad.errors["impact_dismissed"][0].startswith(
        "Line 2 ('Billing: not ours'): expected 'SYSTEM: WHY IT IS NOT TOUCHED'"
    )


def test_the_api_takes_dismissals_and_refuses_one_without_a_reason(world, owner):
    from tests.releases.test_api import client_for

    release = file_release(world, owner, impact_downstream=["eval", "trace"])
    api = client_for(owner)
    refused = api.patch(
        f"/api/releases/{release.pk}/",
        {"impact_dismissed": [{"system": "front_end"}]},
        format="json",
    )
    assert refused.status_code == 400
    assert "impact_dismissed[0]" in refused.json()["impact_dismissed"][0]
    assert "'reason' is a required property" in refused.json()["impact_dismissed"][0]
    accepted = api.patch(
        f"/api/releases/{release.pk}/",
        {"impact_dismissed": [{"system": "front_end", "reason": "no page renders its prompts"}]},
        format="json",
    )
    assert accepted.status_code == 200, accepted.json()
    gate = next(g for g in accepted.json()["gates"] if g["key"] == "impact_assessed")
    assert gate["status"] == "pass"
