"""Each change of routing is recorded with the rendered config's sha256 and announced: a
`gateway.config_changed` Event (and its webhook) exactly when the sha256 changes, with
the weights the endpoint serves then — at every stage of a rollout, on promotion, hold,
breach, abort and rollback, and when a backend is switched off or on."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
import yaml
from django.conf import settings
from django.db import transaction

from ledger import services as ledger_services
from ledger.models import Event
from releases.audit.services import webhooks
from releases.gateway import litellm
from releases.gateway.queries import gateway
from releases.gateway.services.config_record import record_config_changes
from releases.governance import services
from releases.models import Release, RollbackEvent, Stage
from replay import services as replay_services
from replay.models import Backend
from tests.releases.factories import approve, observe
from tests.replay.factories import BackendFactory

pytestmark = pytest.mark.django_db

GOOD = {"requests": 1200, "ttft_p95_ms": 640, "error_rate_pct": 0.2, "json_valid_pct": 99.5}
SLOW = {**GOOD, "ttft_p95_ms": 1400}
CONFIG_URL = "/api/services/kb-assistant/gateway/litellm/"


@pytest.fixture
def record(django_capture_on_commit_callbacks):
    """Run a verb, commit, then the recorder it queued (as the worker would): the
    `gateway.config_changed` Events appended."""

    def run(verb, *args, **kwargs) -> list[Event]:
        with django_capture_on_commit_callbacks() as callbacks:
            verb(*args, **kwargs)
        recorded: list[Event] = []
        for callback in callbacks:
            if getattr(callback, "args", None) == ("record_gateway_config",):
                (causes,) = callback.keywords["args"]
                recorded += record_config_changes(causes)
        return recorded

    return run


@pytest.fixture
def served(client, auditor):
    """The service's config as the endpoint serves it: (its sha256, backend name → weight)."""
    client.force_login(auditor)

    def read() -> tuple[str, dict[str, int]]:
        response = client.get(CONFIG_URL)
        assert response.status_code == 200
        names = dict(Backend.objects.values_list("pk", "name"))
        weights = {
            names[int(m["model_info"]["id"].rsplit("-", 1)[1])]: m["litellm_params"]["weight"]
            for m in yaml.safe_load(response.content)["model_list"]
        }
        return response["X-Config-SHA256"], weights

    return read


def after_window(release: Release) -> dt.datetime:
    stage = Stage.objects.get(release=release, state__in=Stage.ACTIVE_STATES)
    return stage.started_at + dt.timedelta(minutes=stage.observation_minutes, seconds=1)


def promote(record, release: Release, sre) -> list[Event]:
    observe(release, sre, GOOD)
    with time_machine.travel(after_window(release)):
        return record(services.promote_release, release, actor=sre)


def start(record, release: Release, owner, signers) -> list[Event]:
    # Approved outside the recorder: only the start is looked at.
    approve(release, owner, signers)
    recorded = record(services.start_rollout, release, actor=owner)
    release.refresh_from_db()
    return recorded


def test_every_stage_of_a_rollout_records_its_config_once_with_the_served_sha256(
    world, release, owner, signers, sre, record, served
):
    [started] = start(record, release, owner, signers)
    sha, weights = served()
    assert weights == {"kb-assistant-live": 9_500, "kb-assistant-canary": 500}
    assert started.service == world.service and started.actor is None
    cause = Event.objects.get(action="release.rollout_started")
    assert started.payload_data == {
        "service": "kb-assistant",
        "sha256": sha,
        "previous_sha256": None,  # the first config recorded for the service
        "cause": {
            "action": "release.rollout_started",
            "event": cause.pk,
            "sequence": cause.sequence,
        },
        "url": f"{settings.LEDGER_BASE_URL}{CONFIG_URL}",
    }

    [second] = promote(record, release, sre)
    sha_25, weights = served()
    assert weights == {"kb-assistant-live": 7_500, "kb-assistant-canary": 2_500}
    assert second.payload_data["sha256"] == sha_25 != sha
    assert second.payload_data["previous_sha256"] == sha
    assert second.payload_data["cause"]["action"] == "release.promoted"

    [live] = promote(record, release, sre)
    release.refresh_from_db()
    assert release.state == "released"
    sha_100, weights = served()
    assert weights == {"kb-assistant-canary": 10_000}
    assert (live.payload_data["previous_sha256"], live.payload_data["sha256"]) == (sha_25, sha_100)
    assert Event.objects.filter(action="gateway.config_changed").count() == 3


def test_a_hold_and_a_breach_keep_the_share_and_record_nothing(
    world, release, owner, signers, sre, record, served
):
    start(record, release, owner, signers)
    sha, weights = served()

    assert record(services.hold_release, release, actor=sre, reason="p95 TTFT rising") == []
    assert record(observe, release, sre, SLOW) == []
    assert record(observe, release, sre, SLOW) == []  # the second failure breaches

    assert Stage.objects.get(release=release, number=1).state == "breached"
    assert served() == (sha, weights)
    assert weights["kb-assistant-canary"] == 500
    assert Event.objects.filter(action="gateway.config_changed").count() == 1


def test_an_abort_takes_the_candidate_to_zero_at_once(
    world, release, owner, signers, sre, record, served
):
    [started] = start(record, release, owner, signers)

    [aborted] = record(services.abort_release, release, actor=sre, reason="p95 TTFT doubled")

    sha, weights = served()
    assert weights == {"kb-assistant-live": 10_000}
    assert aborted.payload_data["sha256"] == sha
    assert aborted.payload_data["previous_sha256"] == started.payload_data["sha256"]
    assert aborted.payload_data["cause"]["action"] == "release.aborted"


def test_a_rollback_during_the_rollout_takes_the_candidate_to_zero(
    world, release, owner, signers, sre, record, served
):
    [started] = start(record, release, owner, signers)

    [rolled_back] = record(services.record_rollback, world.service, actor=sre, reason="errors")

    assert served() == (rolled_back.payload_data["sha256"], {"kb-assistant-live": 10_000})
    assert rolled_back.payload_data["previous_sha256"] == started.payload_data["sha256"]
    assert rolled_back.payload_data["cause"]["action"] == "release.aborted"


def test_a_rollback_after_the_release_sends_everything_back_to_the_old_revision(
    world, release, owner, signers, sre, record, served
):
    start(record, release, owner, signers)
    promote(record, release, sre)
    promote(record, release, sre)
    released_sha, weights = served()
    assert weights == {"kb-assistant-canary": 10_000}

    [rolled_back] = record(services.record_rollback, world.service, actor=sre, reason="errors")

    assert served() == (rolled_back.payload_data["sha256"], {"kb-assistant-live": 10_000})
    assert rolled_back.payload_data["previous_sha256"] == released_sha
    assert rolled_back.payload_data["cause"]["action"] == "service.live_revision_changed"
    # Saying how the rollback went changes no routing.
    rollback = RollbackEvent.objects.get()
    rollback.state = RollbackEvent.State.AWAITING_CONFIRMATION
    rollback.save(update_fields=["state"])
    assert record(services.confirm_rollback, rollback, actor=sre, succeeded=True, note="ok") == []


def test_a_backend_switched_off_and_on_is_recorded_each_time(
    world, release, owner, signers, sre, record, served
):
    start(record, release, owner, signers)
    canary = world.candidate_backend

    [off] = record(replay_services.update_backend, canary, actor=owner, routed=False)
    assert served() == (off.payload_data["sha256"], {"kb-assistant-live": 10_000})
    assert off.payload_data["cause"]["action"] == "replay.backend_updated"

    [on] = record(replay_services.update_backend, canary, actor=owner, routed=True)
    sha, weights = served()
    assert on.payload_data["sha256"] == sha
    assert weights == {"kb-assistant-live": 9_500, "kb-assistant-canary": 500}


def test_a_service_left_with_no_route_records_none(world, owner, record):
    # Nothing recorded yet for the service: its first routing change records its config.
    [first] = record(replay_services.update_backend, world.live_backend, actor=owner, name="kb-1")
    assert first.payload_data["previous_sha256"] is None

    [off] = record(replay_services.update_backend, world.live_backend, actor=owner, routed=False)

    # The endpoint answers 404 now: the gateway has nothing to route for it.
    assert off.payload_data["sha256"] is None
    assert off.payload_data["previous_sha256"] == first.payload_data["sha256"]


def test_recording_twice_records_once_and_a_rolled_back_change_queues_nothing(
    world, release, owner, signers, sre, record, django_capture_on_commit_callbacks
):
    [started] = start(record, release, owner, signers)
    cause = Event.objects.get(action="release.rollout_started")

    assert record_config_changes([(world.service.pk, cause.pk)]) == []
    assert Event.objects.filter(action="gateway.config_changed").get() == started

    with django_capture_on_commit_callbacks() as callbacks:
        try:
            with transaction.atomic():
                services.abort_release(release, actor=sre, reason="changed my mind")
                raise RuntimeError("rolled back")
        except RuntimeError:
            pass
    assert callbacks == []


def test_the_webhook_carries_the_config_change_and_only_it(
    world, release, owner, signers, sre, record, served
):
    subscription = webhooks.create_subscription(
        actor=sre,
        name="GitOps deployer",
        url="http://127.0.0.1:9/hooks",
        event_types=["gateway.config_changed"],
    )
    start(record, release, owner, signers)
    record(services.hold_release, release, actor=sre, reason="looking")

    [delivery_id] = webhooks.dispatch()

    delivery = subscription.deliveries.get(pk=delivery_id)
    body = webhooks.payload_of(delivery)
    sha, _ = served()
    assert body["type"] == "gateway.config_changed"
    assert body["data"]["service"] == "kb-assistant"
    assert body["data"]["payload"]["sha256"] == sha
    assert body["data"]["payload"]["previous_sha256"] is None
    assert body["data"]["payload"]["cause"]["action"] == "release.rollout_started"
    assert body["data"]["payload"]["url"].endswith(CONFIG_URL)


def test_a_live_revision_set_with_a_new_policy_version_records_its_limits(
    world, owner, record, served
):
    document = {"limits": {"max_input_tokens": 4096, "timeout_s": 30}}
    ledger_services.create_gateway_policy(world.service, actor=owner, document=document)
    revision = ledger_services.new_revision_from(
        world.live, actor=owner, gateway_policy_version="v2"
    )
    BackendFactory(name="kb-assistant-v2", revision=revision)

    [changed] = record(
        ledger_services.set_live_revision, world.service, revision, actor=None, reason="policy"
    )

    assert changed.payload_data["cause"]["action"] == "service.live_revision_changed"
    sha, weights = served()
    assert (changed.payload_data["sha256"], weights) == (sha, {"kb-assistant-v2": 10_000})
    config = yaml.safe_load(
        litellm.render_yaml(litellm.render_config(gateway(["kb-assistant"]).routes))
    )
    assert config["model_list"][0]["model_info"]["max_input_tokens"] == 4096
    assert config["model_list"][0]["litellm_params"]["timeout"] == 30
