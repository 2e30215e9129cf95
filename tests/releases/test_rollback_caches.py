"""Caches after a rollback (§6.15): whether the engine's prefix cache and the gateway's
response cache were flushed, asked when the rollback is recorded and answerable later,
each answer in the ledger; readiness stays at risk until both are answered; the help
names the target engine's flush call."""

from __future__ import annotations

import datetime as dt

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse
from django.utils import timezone

from ledger import services as ledger_services
from ledger.chain import verify_chain
from ledger.models import Event, Runtime
from releases.governance import playbooks, services
from releases.governance.forms.rollout import prefix_cache_help
from releases.governance.queries.plan import plan_readiness, rollback_plan
from releases.governance.queries.readiness import rollback_readiness
from releases.models import RollbackEvent
from tests.releases.factories import roll_out
from tests.releases.test_api import client_for
from tests.releases.test_readiness import _verified
from tests.releases.test_rollbacks import release_fully

pytestmark = pytest.mark.django_db


@pytest.fixture
def released(world, release, owner, signers, sre):
    return release_fully(roll_out(release, owner, signers), sre)


def _rollback_form(client, world, **answers: str):
    return client.post(
        reverse("releases:rollback_new", args=[world.service.slug]),
        {"target_revision": str(world.live.pk), "reason": "errors at 4 % since 14:05", **answers},
    )


# ---------------------------------------------------------------- recording


def test_the_rollback_form_takes_both_answers_and_the_event_keeps_them(
    client, world, released, sre
):
    client.force_login(sre)
    response = _rollback_form(client, world, prefix_cache="flushed", response_cache="not_in_use")
    assert response.status_code == 302
    rollback = RollbackEvent.objects.get()
    assert (rollback.prefix_cache, rollback.response_cache) == ("flushed", "not_in_use")
    payload = Event.objects.get(action="rollback.recorded").payload_data
    assert (payload["prefix_cache"], payload["response_cache"]) == ("flushed", "not_in_use")


def test_the_answers_may_wait_when_the_rollback_is_recorded(client, world, released, sre):
    client.force_login(sre)
    assert _rollback_form(client, world).status_code == 302
    rollback = RollbackEvent.objects.get()
    assert (rollback.prefix_cache, rollback.response_cache) == ("", "")


def test_a_bad_answer_on_the_form_is_refused_beside_its_field_and_nothing_is_written(
    client, world, released, sre
):
    client.force_login(sre)
    response = _rollback_form(client, world, prefix_cache="wiped")
    assert response.status_code == 400
    assert list(response.context["form"].errors) == ["prefix_cache"]
    assert "wiped" in response.context["form"].errors["prefix_cache"][0]
    assert not RollbackEvent.objects.exists()
    world.service.refresh_from_db()
    assert world.service.live_revision == world.candidate


def test_the_verb_refuses_a_bad_answer_naming_the_field(world, released, sre):
    with pytest.raises(ValidationError) as refused:
        services.record_rollback(world.service, actor=sre, reason="slow", response_cache="gone")
    assert refused.value.message_dict == {
        "response_cache": [
            "'gone' is not an answer; expected one of flushed, not_flushed, not_in_use, or blank."
        ]
    }
    assert not RollbackEvent.objects.exists()
    assert not Event.objects.filter(action="rollback.recorded").exists()


def test_the_api_records_the_answers_and_refuses_a_bad_one_by_field(world, released, sre):
    api = client_for(sre)
    bad = api.post(
        "/api/services/kb-assistant/rollbacks/",
        {"reason": "slow", "prefix_cache": "wiped"},
        format="json",
    )
    assert bad.status_code == 400
    assert list(bad.json()) == ["prefix_cache"]
    assert not RollbackEvent.objects.exists()
    good = api.post(
        "/api/services/kb-assistant/rollbacks/",
        {"reason": "slow", "prefix_cache": "not_flushed", "response_cache": "flushed"},
        format="json",
    )
    assert good.status_code == 201, good.json()
    body = good.json()
    assert (body["prefix_cache"], body["response_cache"]) == ("not_flushed", "flushed")
    assert RollbackEvent.objects.get().prefix_cache == "not_flushed"


# ---------------------------------------------------------------- answering later


@pytest.fixture
def rolled_back(world, released, sre) -> RollbackEvent:
    return services.record_rollback(world.service, actor=sre, reason="errors at 4 %")


def test_a_later_answer_on_the_rollbacks_page_is_an_event(client, world, rolled_back, sre):
    client.force_login(sre)
    page = client.get(
        reverse("releases:rollback_detail", args=[world.service.slug, rolled_back.pk])
    )
    assert page.status_code == 200
    assert page.context["caches_form"] is not None
    assert 'data-cache-answer="unanswered"' in page.content.decode()
    response = client.post(
        reverse("releases:rollback_caches", args=[world.service.slug, rolled_back.pk]),
        {"prefix_cache": "flushed", "response_cache": "not_flushed"},
    )
    assert response.status_code == 302
    rolled_back.refresh_from_db()
    assert (rolled_back.prefix_cache, rolled_back.response_cache) == ("flushed", "not_flushed")
    event = Event.objects.get(action="rollback.caches_answered")
    assert event.subject_id == str(rolled_back.pk)
    assert event.actor == sre
    assert event.payload_data["changed"] == {
        "prefix_cache": {"before": "", "after": "flushed"},
        "response_cache": {"before": "", "after": "not_flushed"},
    }
    assert verify_chain().ok
    # A blank answer keeps the one recorded; a changed one is another Event.
    client.post(
        reverse("releases:rollback_caches", args=[world.service.slug, rolled_back.pk]),
        {"prefix_cache": "", "response_cache": "flushed"},
    )
    rolled_back.refresh_from_db()
    assert (rolled_back.prefix_cache, rolled_back.response_cache) == ("flushed", "flushed")
    assert Event.objects.filter(action="rollback.caches_answered").count() == 2


def test_a_later_answer_that_changes_nothing_is_refused_beside_the_field(
    client, world, rolled_back, sre
):
    client.force_login(sre)
    response = client.post(
        reverse("releases:rollback_caches", args=[world.service.slug, rolled_back.pk]),
        {"prefix_cache": "", "response_cache": ""},
    )
    assert response.status_code == 400
    assert "Nothing to record" in response.context["caches_form"].errors["prefix_cache"][0]
    bad = client.post(
        reverse("releases:rollback_caches", args=[world.service.slug, rolled_back.pk]),
        {"response_cache": "purged"},
    )
    assert bad.status_code == 400
    assert list(bad.context["caches_form"].errors) == ["response_cache"]
    assert not Event.objects.filter(action="rollback.caches_answered").exists()


def test_answering_later_needs_the_rollback_permission_and_a_post(
    client, world, rolled_back, owner
):
    url = reverse("releases:rollback_caches", args=[world.service.slug, rolled_back.pk])
    client.force_login(owner)
    assert client.post(url, {"prefix_cache": "flushed"}).status_code == 403
    page = client.get(
        reverse("releases:rollback_detail", args=[world.service.slug, rolled_back.pk])
    )
    assert page.context["caches_form"] is None
    assert client.get(url).status_code == 405
    refused = client_for(owner).post(
        f"/api/rollbacks/{rolled_back.pk}/caches/", {"prefix_cache": "flushed"}, format="json"
    )
    assert refused.status_code == 403
    rolled_back.refresh_from_db()
    assert rolled_back.prefix_cache == ""
    assert not Event.objects.filter(action="rollback.caches_answered").exists()


def test_the_api_answers_later_and_refuses_a_bad_answer_by_field(world, rolled_back, sre):
    api = client_for(sre)
    bad = api.post(
        f"/api/rollbacks/{rolled_back.pk}/caches/", {"response_cache": "purged"}, format="json"
    )
    assert bad.status_code == 400
    assert list(bad.json()) == ["response_cache"]
    answered = api.post(
        f"/api/rollbacks/{rolled_back.pk}/caches/",
        {"prefix_cache": "not_in_use", "response_cache": "flushed"},
        format="json",
    )
    assert answered.status_code == 200, answered.json()
    assert (answered.json()["prefix_cache"], answered.json()["response_cache"]) == (
        "not_in_use",
        "flushed",
    )
    assert Event.objects.filter(action="rollback.caches_answered").count() == 1
    assert api.post("/api/rollbacks/999999/caches/", {}, format="json").status_code == 404


# ---------------------------------------------------------------- readiness


@pytest.fixture
def after_rollback(team, sre):
    """r1 served, then r2, rolled back to r1, and r2 put live again by hand: the target
    is r1 (current evidence, verified), and the newest rollback's caches are unanswered."""
    from tests.ledger.evidence.conftest import import_file, sample_asset, sample_runtime
    from tests.ledger.factories import RevisionFactory, ServiceFactory

    service = ServiceFactory(slug="kb-assistant", team=team, tier="production")
    r1 = RevisionFactory(
        service=service, model_asset=sample_asset(team), runtime=sample_runtime(team)
    )
    r2 = RevisionFactory(
        service=service,
        model_asset=r1.model_asset,
        runtime=r1.runtime,
        gateway_policy_version="gw-2",
    )
    ledger_services.set_live_revision(service, r1, actor=None)
    ledger_services.set_live_revision(service, r2, actor=None)
    import_file(r1, "vllm", "vllm_c2_n20_detailed.json")
    _verified(r1)
    service.refresh_from_db()
    rollback = services.record_rollback(service, actor=sre, reason="errors at 4 %")
    ledger_services.set_live_revision(service, r2, actor=None)
    service.refresh_from_db()
    return service, rollback


def _cache_reasons(readiness) -> list[str]:
    return [r.text for r in readiness.reasons if "cache" in r.text]


def test_readiness_says_caches_unknown_until_both_are_answered(after_rollback, sre):
    service, rollback = after_rollback
    when = f"{rollback.started_at.astimezone(dt.UTC):%Y-%m-%d %H:%M} UTC"
    readiness = rollback_readiness(service, expected_minutes=5, now=timezone.now())
    assert readiness.verdict == "at risk"
    assert [(r.verdict, r.text) for r in readiness.reasons] == [
        (
            "at risk",
            f"caches unknown: were the prefix and response caches flushed after the "
            f"rollback of {when} (rollback #{rollback.pk})? Answer on the rollback's page",
        )
    ]
    services.answer_rollback_caches(rollback, actor=sre, prefix_cache="flushed")
    readiness = plan_readiness(service, rollback_plan(service))
    assert _cache_reasons(readiness) == [
        f"caches unknown: was the response cache flushed after the rollback of {when} "
        f"(rollback #{rollback.pk})? Answer on the rollback's page"
    ]
    services.answer_rollback_caches(rollback, actor=sre, response_cache="not_in_use")
    readiness = rollback_readiness(service, expected_minutes=5, now=timezone.now())
    assert (readiness.verdict, readiness.reasons) == ("ready", [])


def test_a_cache_not_flushed_stays_at_risk(after_rollback, sre):
    service, rollback = after_rollback
    services.answer_rollback_caches(
        rollback, actor=sre, prefix_cache="not_in_use", response_cache="not_flushed"
    )
    readiness = rollback_readiness(service, expected_minutes=5, now=timezone.now())
    assert readiness.verdict == "at risk"
    (reason,) = _cache_reasons(readiness)
    assert reason.startswith("the response cache was not flushed after the rollback of ")
    assert reason.endswith("cached answers of the rolled-back revision may still be served")


def test_the_incident_screen_and_the_stored_verdict_say_caches_unknown(client, after_rollback, sre):
    service, rollback = after_rollback
    client.force_login(sre)
    page = client.get(reverse("releases:incident", args=[service.slug]))
    assert page.status_code == 200
    assert "caches unknown: were the prefix and response caches flushed" in page.content.decode()
    services.answer_rollback_caches(
        rollback, actor=sre, prefix_cache="flushed", response_cache="flushed"
    )
    page = client.get(reverse("releases:incident", args=[service.slug]))
    assert "caches unknown" not in page.content.decode()


def test_only_the_newest_rollback_is_asked_about(after_rollback, sre):
    service, older = after_rollback
    # A second rollback (r2 -> r1), answered at once: the older one's silence is moot.
    newer = services.record_rollback(
        service,
        actor=sre,
        reason="errors again",
        prefix_cache="flushed",
        response_cache="flushed",
    )
    assert older.prefix_cache == "" and newer.pk != older.pk
    ledger_services.set_live_revision(service, newer.from_revision, actor=None)
    service.refresh_from_db()
    assert _cache_reasons(rollback_readiness(service, expected_minutes=5)) == []


# ---------------------------------------------------------------- the flush calls


def test_the_help_names_the_flush_call_of_the_targets_engine(client, world, released, sre):
    client.force_login(sre)
    assert world.live.runtime.engine == "vllm"
    page = client.get(reverse("releases:rollback_new", args=[world.service.slug]))
    help_text = page.context["form"].fields["prefix_cache"].help_text
    assert "vLLM: POST /reset_prefix_cache" in help_text
    assert "VLLM_SERVER_DEV_MODE=1" in help_text
    assert "POST /reset_prefix_cache" in page.content.decode()
    Runtime.objects.filter(pk=world.live.runtime_id).update(engine="sglang")
    page = client.get(reverse("releases:rollback_new", args=[world.service.slug]))
    help_text = page.context["form"].fields["prefix_cache"].help_text
    assert "SGLang: POST /flush_cache" in help_text
    assert "400 while requests are running" in help_text


def test_an_engine_without_a_flush_call_says_restart_the_replica():
    assert "POST /flush_cache" in prefix_cache_help("sglang")
    assert "POST /reset_prefix_cache" in prefix_cache_help("vllm")
    help_text = prefix_cache_help("tgi")
    assert "Text Generation Inference: no flush call is known" in help_text
    assert "restart the replica" in help_text


def test_the_playbooks_rollback_step_names_the_flush_calls():
    for playbook in playbooks.DEFAULT_PLAYBOOKS.values():
        step = playbook.recovery[-1]
        assert step.startswith("Roll back to the rollback target")
        assert "vLLM: POST /reset_prefix_cache" in step
        assert "SGLang: POST /flush_cache" in step
        assert "other engines: no flush call is known, restart the replica" in step
