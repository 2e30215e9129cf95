"""What the gateway should be doing, read from the ledger: the weights at every step of
a rollout, the policy in force, and the rendered config over the API."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
import yaml
from django.utils import timezone

from ledger import services as ledger_services
from releases.gateway import litellm
from releases.gateway.queries import gateway
from releases.governance import services
from releases.models import Release, Stage
from replay.models import Backend
from tests.releases.factories import observe, roll_out
from tests.replay.factories import BackendFactory

pytestmark = pytest.mark.django_db

GOOD = {"requests": 1200, "ttft_p95_ms": 640, "error_rate_pct": 0.2, "json_valid_pct": 99.5}


def weights(slug: str = "kb-assistant") -> dict[str, int]:
    """Backend name → the weight rendered for it (left out: 0)."""
    names = dict(Backend.objects.values_list("pk", "name"))
    [route] = [r for r in gateway().routes if r.slug == slug]
    return {names[d.backend_id]: d.weight for d in route.deployments if d.weight}


def after_window(release: Release) -> dt.datetime:
    stage = Stage.objects.get(release=release, state="observing")
    return stage.started_at + dt.timedelta(minutes=stage.observation_minutes + 1)


def promote(release: Release, sre) -> None:
    observe(release, sre, GOOD)
    with time_machine.travel(after_window(release)):
        services.promote_release(release, actor=sre)


def test_before_a_rollout_the_live_backends_carry_everything(world):
    assert weights() == {"kb-assistant-live": 10_000}


def test_each_stage_sets_the_candidates_share_and_100_percent_makes_it_live(
    world, release, owner, signers, sre
):
    roll_out(release, owner, signers)
    assert weights() == {"kb-assistant-live": 9_500, "kb-assistant-canary": 500}

    promote(release, sre)
    assert weights() == {"kb-assistant-live": 7_500, "kb-assistant-canary": 2_500}

    promote(release, sre)
    release.refresh_from_db()
    assert release.state == "released"
    # The candidate is the live revision now: its backends carry everything.
    assert weights() == {"kb-assistant-canary": 10_000}


def test_a_hold_keeps_the_share_and_an_abort_takes_the_candidate_to_zero(
    world, release, owner, signers, sre
):
    roll_out(release, owner, signers)
    services.hold_release(release, actor=sre, reason="p95 TTFT rising")
    assert weights()["kb-assistant-canary"] == 500

    services.abort_release(release, actor=sre, reason="p95 TTFT doubled")
    assert weights() == {"kb-assistant-live": 10_000}


def test_a_rollback_takes_the_candidate_to_zero(world, release, owner, signers, sre):
    roll_out(release, owner, signers)

    from releases.governance.services import record_rollback

    record_rollback(world.service, actor=sre, reason="errors")

    assert weights() == {"kb-assistant-live": 10_000}


def test_weights_are_split_over_several_backends_of_each_side(world, release, owner, signers):
    BackendFactory(name="kb-assistant-live-2", revision=world.live)
    BackendFactory(name="kb-assistant-canary-2", revision=world.candidate)
    BackendFactory(name="kb-assistant-off", revision=world.live, routed=False)
    roll_out(release, owner, signers)

    assert weights() == {
        "kb-assistant-live": 4_750,
        "kb-assistant-live-2": 4_750,
        "kb-assistant-canary": 250,
        "kb-assistant-canary-2": 250,
    }


def test_a_candidate_with_no_routed_backend_gets_nothing(world, release, owner, signers):
    Backend.objects.filter(pk=world.candidate_backend.pk).update(routed=False)
    roll_out(release, owner, signers)

    assert weights() == {"kb-assistant-live": 10_000}


def test_a_live_service_with_no_backend_is_named_unrouted(world):
    Backend.objects.filter(revision=world.live).update(routed=False)

    found = gateway()

    assert found.unrouted == ["kb-assistant"]
    assert found.routes == []


def test_the_policy_in_force_is_the_live_revisions_version(world, owner):
    document = {"limits": {"max_input_tokens": 4096, "timeout_s": 30}}
    ledger_services.create_gateway_policy(world.service, actor=owner, document=document)
    revision = ledger_services.new_revision_from(
        world.live, actor=owner, gateway_policy_version="v2"
    )
    # v1, the live revision's, until the revision naming v2 is live.
    assert gateway().routes[0].policy == world.live.gateway_policy.document
    assert gateway().routes[0].policy != document

    ledger_services.set_live_revision(world.service, revision, actor=None, reason="policy")
    BackendFactory(name="kb-assistant-v2", revision=revision)
    [route] = gateway().routes

    assert route.policy == document
    deployment = litellm.render_config([route])["model_list"][0]
    assert deployment["model_info"]["max_input_tokens"] == 4096
    assert deployment["litellm_params"]["timeout"] == 30


def test_four_queries_whatever_the_number_of_services(
    world, release, owner, signers, team, django_assert_num_queries
):
    roll_out(release, owner, signers)
    with django_assert_num_queries(4):
        gateway()
    from tests.releases.factories import build_world

    for n in range(3):
        build_world(team, slug=f"more-{n}")
    with django_assert_num_queries(4):
        assert len(gateway().routes) == 4


# ---------------------------------------------------------------- the API


def test_the_config_is_yaml_with_its_sha256_and_a_304_when_unchanged(client, world, auditor):
    client.force_login(auditor)

    response = client.get("/api/gateway/litellm/")

    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/yaml")
    text = response.content.decode()
    assert response["X-Config-SHA256"] == litellm.config_sha256(text)
    assert response["ETag"] == f'"{response["X-Config-SHA256"]}"'
    config = yaml.safe_load(text)
    assert [m["model_name"] for m in config["model_list"]] == ["kb-assistant"]
    again = client.get("/api/gateway/litellm/", HTTP_IF_NONE_MATCH=response["ETag"])
    assert (again.status_code, again.content) == (304, b"")


def test_the_whole_config_asks_for_the_proxys_metrics_when_set_and_a_part_never_does(
    client, world, auditor, settings
):
    client.force_login(auditor)
    without = yaml.safe_load(client.get("/api/gateway/litellm/").content)
    part_before = client.get("/api/services/kb-assistant/gateway/litellm/").content
    settings.GATEWAY_PROMETHEUS_METRICS = True
    settings.GATEWAY_METRICS_REQUIRE_AUTH = False

    with_metrics = yaml.safe_load(client.get("/api/gateway/litellm/").content)

    assert "litellm_settings" not in without
    assert with_metrics["litellm_settings"] == {
        "callbacks": ["prometheus"],
        "require_auth_for_metrics_endpoint": False,
        # The caller's metadata as labels: the gateway's metrics then say the task type.
        "custom_prometheus_metadata_labels": [
            "metadata.ledger_tenant",
            "metadata.ledger_task_type",
        ],
    }
    assert with_metrics["model_list"] == without["model_list"]
    # A service's part (and the sha256 its gateway.config_changed Events record) is the same.
    assert client.get("/api/services/kb-assistant/gateway/litellm/").content == part_before


def test_a_promotion_changes_the_config_and_its_sha256(
    client, world, release, owner, signers, sre, auditor
):
    client.force_login(auditor)
    before = client.get("/api/gateway/litellm/")
    roll_out(release, owner, signers)

    after = client.get("/api/gateway/litellm/", HTTP_IF_NONE_MATCH=before["ETag"])

    assert after.status_code == 200
    assert after["X-Config-SHA256"] != before["X-Config-SHA256"]
    weights_rendered = sorted(
        m["litellm_params"]["weight"] for m in yaml.safe_load(after.content)["model_list"]
    )
    assert weights_rendered == [500, 9_500]


def test_credentials_are_named_never_rendered(client, world, auditor, monkeypatch):
    Backend.objects.filter(pk=world.live_backend.pk).update(credential_env="KB_LIVE_KEY")
    monkeypatch.setenv("KB_LIVE_KEY", "sk-secret-value-never-rendered")
    client.force_login(auditor)

    text = client.get("/api/services/kb-assistant/gateway/litellm/").content.decode()

    assert "os.environ/KB_LIVE_KEY" in text
    assert "sk-secret-value-never-rendered" not in text


def test_one_service_and_its_refusals(client, world, auditor):
    client.force_login(auditor)

    assert client.get("/api/services/kb-assistant/gateway/litellm/").status_code == 200
    missing = client.get("/api/services/no-such/gateway/litellm/")
    assert missing.status_code == 404
    assert "There is no service 'no-such'" in missing.content.decode()


def test_signing_in_is_required(client, world):
    assert client.get("/api/gateway/litellm/").status_code in (401, 403)


def test_the_window_of_a_stage_does_not_matter_only_its_state(world, release, owner, signers):
    roll_out(release, owner, signers)
    with time_machine.travel(timezone.now() + dt.timedelta(days=3)):
        assert weights()["kb-assistant-canary"] == 500


def test_render_gateway_writes_the_file_once_and_says_when_it_is_unchanged(
    world, release, owner, signers, tmp_path
):
    import io

    from django.core.management import call_command

    target = tmp_path / "litellm" / "config.yaml"
    out = io.StringIO()
    call_command("render_gateway", output=str(target), stdout=out)
    first = target.read_text()
    call_command("render_gateway", output=str(target), stdout=out)
    roll_out(release, owner, signers)
    call_command("render_gateway", output=str(target), stdout=out)

    lines = out.getvalue().splitlines()
    assert [line.split()[0] for line in lines] == ["written", "unchanged", "written"]
    assert lines[0].split()[-1] == litellm.config_sha256(first)
    assert lines[2].split()[-1] == litellm.config_sha256(target.read_text())
    assert yaml.safe_load(target.read_text())["model_list"][1]["litellm_params"]["weight"] == 500


def test_render_gateway_names_an_unwritable_output(world, tmp_path):
    from django.core.management import CommandError, call_command

    blocker = tmp_path / "file"
    blocker.write_text("not a folder")

    with pytest.raises(CommandError, match=r"--output .*file/config.yaml"):
        call_command("render_gateway", output=str(blocker / "config.yaml"))


def test_a_backend_replay_does_not_monitor_still_serves_and_one_not_routed_does_not(world):
    Backend.objects.filter(pk=world.live_backend.pk).update(enabled=False)
    assert weights() == {"kb-assistant-live": 10_000}

    Backend.objects.filter(pk=world.live_backend.pk).update(routed=False)
    assert gateway().unrouted == ["kb-assistant"]
