"""Is the gateway doing it? The running gateway's /model/info against the config the
ledger renders: in sync, drifted (an unauthorized change of kind gateway, once), unknown
when it cannot be read (never in sync), and reconciled as every unauthorized change is.

One real LiteLLM proxy start serves the flow test (the session's proxy, on the config the
ledger rendered; a promotion then makes the ledger say otherwise). The other tests give
the recording verb what LiteLLM reports, built from the rendered config the way the proxy
reports it (the flow test checks that shape against the proxy itself), or a gateway that
cannot be read: a closed port, a 404, a body that is not JSON.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import http.server
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import time_machine
from django.urls import reverse

from ledger.models import Event
from releases.gateway import litellm
from releases.gateway.drift import compare, not_routed
from releases.gateway.queries import gateway
from releases.gateway.services import checks as services
from releases.governance import services as governance
from releases.models import GatewayCheck, Stage, UnauthorizedChange
from replay.models import Backend
from tests.releases.factories import observe, roll_out
from tests.support.processes import free_port

GOOD = {"requests": 1200, "ttft_p95_ms": 640, "error_rate_pct": 0.2, "json_valid_pct": 99.5}


def as_litellm_reports(config: dict[str, Any], max_model_len: int = 4096) -> list[dict[str, Any]]:
    """What /model/info answers for a config LiteLLM 1.108.7 loaded (read from the real
    proxy in `test_the_ledger_checks_a_real_proxy`): the key dropped, flags of LiteLLM's
    own added, and model_info filled in from the backend where the file set nothing."""
    reported = []
    for entry in config["model_list"]:
        params = {k: v for k, v in entry["litellm_params"].items() if k != "api_key"}
        params |= {"use_in_pass_through": False, "use_litellm_proxy": False}
        info = {
            "max_input_tokens": max_model_len,
            "max_output_tokens": max_model_len,
            "max_tokens": max_model_len,
            "litellm_provider": "openai",
            "rpm": None,
            "tpm": None,
            **entry["model_info"],
        }
        reported.append(
            {"model_name": entry["model_name"], "litellm_params": params, "model_info": info}
        )
    return reported


def _route(slug: str, weights: dict[int, int], policy: dict | None = None) -> litellm.ServiceRoute:
    return litellm.ServiceRoute(
        slug,
        [
            litellm.Deployment(b, f"http://10.0.0.{b}:8000/v1", "served", None, w)
            for b, w in weights.items()
        ],
        policy,
    )


# -- the comparison, pure -------------------------------------------------------------


def test_what_litellm_fills_in_itself_is_not_a_difference():
    config = litellm.render_config(
        [
            _route("kb-assistant", {1: 7500, 2: 2500}, {"limits": {"max_input_tokens": 8192}}),
            _route("kb-long", {3: 10000}),  # no limit: LiteLLM reports the backend's
        ]
    )
    running = as_litellm_reports(config)
    for entry in running:
        entry["litellm_params"]["timeout"] = None  # a key LiteLLM lists as unset

    assert compare(config, running, ["kb-assistant", "kb-long"]) == {
        "kb-assistant": [],
        "kb-long": [],
    }


def test_a_different_weight_limit_or_model_is_found_on_its_deployment():
    policy = {"limits": {"max_input_tokens": 8192, "timeout_s": 60}, "retries": {"num_retries": 2}}
    config = litellm.render_config([_route("kb-assistant", {1: 9000, 2: 1000}, policy)])
    running = as_litellm_reports(config)
    running[0]["litellm_params"] |= {"weight": 7000, "timeout": 60.0, "rpm": 50}
    running[1]["model_info"]["max_input_tokens"] = 32768
    running[1]["litellm_params"]["num_retries"] = 0

    assert compare(config, running, ["kb-assistant"])["kb-assistant"] == [
        {"deployment": "kb-assistant-backend-1", "what": "weight", "ledger": 9000, "gateway": 7000},
        {"deployment": "kb-assistant-backend-1", "what": "rpm", "ledger": None, "gateway": 50},
        {"deployment": "kb-assistant-backend-2", "what": "num_retries", "ledger": 2, "gateway": 0},
        {
            "deployment": "kb-assistant-backend-2",
            "what": "max_input_tokens",
            "ledger": 8192,
            "gateway": 32768,
        },
    ]


def test_a_missing_or_extra_deployment_is_found_and_other_models_are_not_compared():
    config = litellm.render_config([_route("kb-assistant", {1: 9000, 2: 1000})])
    running = as_litellm_reports(config)
    dropped = running.pop(1)
    extra = {**dropped, "model_info": {**dropped["model_info"], "id": "kb-assistant-backend-9"}}
    stranger = {**dropped, "model_name": "someone-elses", "model_info": {"id": "x"}}
    running += [extra, stranger]

    found = compare(config, running, ["kb-assistant", "kb-unrouted"])

    assert found == {
        "kb-assistant": [
            {
                "deployment": "kb-assistant-backend-2",
                "what": "deployment",
                "ledger": 1000,
                "gateway": None,
            },
            {
                "deployment": "kb-assistant-backend-9",
                "what": "deployment",
                "ledger": None,
                "gateway": 1000,
            },
        ],
        "kb-unrouted": [],
    }
    assert not_routed(running, ["kb-assistant"]) == ["someone-elses"]


# -- recording ------------------------------------------------------------------------


@pytest.fixture
def checking(settings):
    """The check on, findings at once (no grace), the gateway on a port nobody serves."""
    settings.GATEWAY_URL = f"http://127.0.0.1:{free_port()}"
    settings.GATEWAY_API_KEY = "sk-test"
    settings.GATEWAY_DRIFT_GRACE_SECONDS = 0
    return settings


def _rendered() -> dict[str, Any]:
    return litellm.render_config(gateway().routes)


def _reports_with(**weights: int) -> list[dict[str, Any]]:
    """What the gateway reports: the rendered config, with these deployments' weights."""
    running = as_litellm_reports(_rendered())
    for entry in running:
        if entry["model_info"]["id"] in weights:
            entry["litellm_params"]["weight"] = weights[entry["model_info"]["id"]]
    return running


def _open_gateway_findings() -> list[UnauthorizedChange]:
    return list(
        UnauthorizedChange.objects.filter(
            kind=UnauthorizedChange.Kind.GATEWAY, reconciled_at__isnull=True
        )
    )


def _events(action: str) -> list[Event]:
    return list(Event.objects.filter(action=action).order_by("sequence"))


@pytest.mark.django_db
def test_in_sync_records_the_state_and_opens_nothing(world, checking):
    outcome = services.record_check(as_litellm_reports(_rendered()))

    assert outcome.state == "in_sync"
    row = GatewayCheck.objects.get(service=world.service)
    assert (row.state, row.found) == ("in_sync", [])
    assert _open_gateway_findings() == []
    assert [e.payload_data["state"] for e in _events("gateway.check_in_sync")] == ["in_sync"]


@pytest.mark.django_db
def test_a_drift_opens_one_gateway_finding_however_often_it_is_checked(world, checking):
    live = litellm.deployment_id("kb-assistant", world.live_backend.pk)
    services.record_check(as_litellm_reports(_rendered()))

    first = services.record_check(_reports_with(**{live: 3000}))
    second = services.record_check(_reports_with(**{live: 3000}))

    assert (first.state, first.drifted, len(first.opened)) == ("drifted", ["kb-assistant"], 1)
    assert (second.state, second.opened) == ("drifted", [])
    [finding] = _open_gateway_findings()
    assert finding.service == world.service
    assert finding.expected_revision == world.live
    assert finding.found == [
        {"deployment": live, "what": "weight", "ledger": 10000, "gateway": 3000}
    ]
    assert len(_events("service.unauthorized_change")) == 1
    # One Event for the outcome that changed (in sync, then drifted), none for the same again.
    assert [
        e.action for e in Event.objects.filter(action__startswith="gateway.").order_by("sequence")
    ] == [
        "gateway.check_in_sync",
        "gateway.check_drifted",
    ]
    assert GatewayCheck.objects.get(service=world.service).state == "drifted"


@pytest.mark.django_db
def test_a_drift_within_the_grace_is_shown_but_not_yet_a_finding(world, checking):
    checking.GATEWAY_DRIFT_GRACE_SECONDS = 300
    live = litellm.deployment_id("kb-assistant", world.live_backend.pk)
    start = dt.datetime(2026, 12, 6, 12, 0, tzinfo=dt.UTC)

    with time_machine.travel(start, tick=False):
        services.record_check(_reports_with(**{live: 3000}))
    assert GatewayCheck.objects.get(service=world.service).state == "drifted"
    assert _open_gateway_findings() == []

    with time_machine.travel(start + dt.timedelta(seconds=300), tick=False):
        outcome = services.record_check(_reports_with(**{live: 3000}))
    assert len(outcome.opened) == 1
    assert outcome.opened[0].detected_at == start  # since the difference was first seen


@pytest.mark.django_db
def test_a_note_reconciles_it_and_a_drift_still_there_is_found_again(world, checking, sre):
    live = litellm.deployment_id("kb-assistant", world.live_backend.pk)
    services.record_check(_reports_with(**{live: 3000}))
    [finding] = _open_gateway_findings()

    governance.reconcile_change(
        finding, actor=sre, note="Restarted the proxy on the rendered file."
    )
    assert _open_gateway_findings() == []
    services.record_check(as_litellm_reports(_rendered()))
    assert _open_gateway_findings() == []  # put back: in sync, nothing to find

    services.record_check(_reports_with(**{live: 2000}))
    assert len(_open_gateway_findings()) == 1


@pytest.mark.django_db
def test_a_rollback_reconciles_an_open_gateway_finding(world, checking, sre):
    from django.db import transaction

    from releases.governance.services.drift import reconcile_open_changes

    live = litellm.deployment_id("kb-assistant", world.live_backend.pk)
    services.record_check(_reports_with(**{live: 3000}))

    with transaction.atomic():
        assert reconcile_open_changes(world.service, actor=sre, how="rollback #1") == 1
    assert _open_gateway_findings() == []


class _Answer(http.server.BaseHTTPRequestHandler):
    status, body = 200, b"{}"

    def do_GET(self):
        self.send_response(self.status)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def answering(status: int, body: bytes) -> Iterator[str]:
    handler = type("Handler", (_Answer,), {"status": status, "body": body})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("status", "body", "says"),
    [
        (None, b"", "ConnectError"),  # nothing listens
        (404, b'{"detail": "Not Found"}', "answered HTTP 404"),
        (200, b"<html>proxy error</html>", "did not answer the JSON of /model/info"),
        (200, b'{"data": {"kb-assistant": 1}}', "did not answer a list of deployments"),
        # GATEWAY_MAX_RESPONSE_MB is 1 here: a body past it is not read to its end.
        (200, b'{"data": [' + b'{"x": 1},' * 200_000 + b"{}]}", "answered more than 1 MB"),
    ],
)
def test_an_unreadable_gateway_is_unknown_never_in_sync(
    world, checking, client, sre, status, body, says
):
    checking.GATEWAY_MAX_RESPONSE_MB = 1
    services.record_check(as_litellm_reports(_rendered()))  # it was in sync
    with contextlib.ExitStack() as stack:
        if status is not None:
            checking.GATEWAY_URL = stack.enter_context(answering(status, body))
        outcome = services.check_gateway()

    assert outcome.state == "unknown"
    assert says in outcome.reason
    row = GatewayCheck.objects.get(service=world.service)
    assert row.state == "unknown" and says in row.reason
    assert _open_gateway_findings() == []
    assert len(_events("gateway.check_unknown")) == 1

    client.force_login(sre)
    page = client.get(reverse("releases:incident", args=["kb-assistant"])).content.decode()
    assert "gateway unknown" in page
    assert "gateway in sync" not in page


@pytest.mark.django_db
def test_a_gateway_outside_the_allowed_hosts_is_not_asked(world, checking):
    checking.GATEWAY_URL = "http://192.0.2.10:4000"

    outcome = services.check_gateway()

    assert outcome.state == "unknown"
    assert "not in REPLAY_ALLOWED_HOSTS" in outcome.reason


@pytest.mark.django_db
def test_no_gateway_url_checks_nothing(world, settings):
    settings.GATEWAY_URL = ""

    assert services.check_gateway() is None
    assert not GatewayCheck.objects.exists()


# -- the real proxy -------------------------------------------------------------------


def _serve_from(backend: Backend, fake) -> None:
    Backend.objects.filter(pk=backend.pk).update(base_url=fake.base, model_name=fake.served_model)


@pytest.mark.django_db
def test_the_ledger_checks_a_real_proxy(
    world, release, owner, signers, sre, fake_backends, litellm_gateway, checking, client
):
    """In sync on the config the ledger rendered; a promotion the deployer has not applied
    yet is a drift of the weights, shown on the incident screen, found once."""
    live_fake, candidate_fake = fake_backends
    _serve_from(world.live_backend, live_fake)
    _serve_from(world.candidate_backend, candidate_fake)
    roll_out(release, owner, signers)  # stage 1 carries 5 %
    litellm_gateway.use(litellm.render_yaml(_rendered()))
    checking.GATEWAY_URL = litellm_gateway.base_url
    checking.GATEWAY_API_KEY = litellm_gateway.master_key

    assert services.check_gateway().state == "in_sync"

    observe(release, sre, GOOD)
    stage = Stage.objects.get(release=release, number=1)
    with time_machine.travel(stage.started_at + dt.timedelta(minutes=61)):
        governance.promote_release(release, actor=sre)  # stage 2 carries 25 %
    drifted = services.check_gateway()
    again = services.check_gateway()

    live = litellm.deployment_id("kb-assistant", world.live_backend.pk)
    candidate = litellm.deployment_id("kb-assistant", world.candidate_backend.pk)
    assert (drifted.state, drifted.drifted, len(drifted.opened)) == ("drifted", ["kb-assistant"], 1)
    assert drifted.opened[0].found == [
        {"deployment": live, "what": "weight", "ledger": 7500, "gateway": 9500},
        {"deployment": candidate, "what": "weight", "ledger": 2500, "gateway": 500},
    ]
    assert (again.state, again.opened) == ("drifted", [])
    assert len(_open_gateway_findings()) == 1

    client.force_login(sre)
    page = client.get(reverse("releases:incident", args=["kb-assistant"])).content.decode()
    assert (
        f"the gateway serves kb-assistant with weight 9500 on deployment {live}; "
        "the ledger says 7500"
    ) in " ".join(page.split())
    assert "gateway drifted" in page


# -- the button -----------------------------------------------------------------------


@pytest.mark.django_db
def test_the_button_checks_now_and_goes_back_to_the_page_it_came_from(world, checking, client, sre):
    live = litellm.deployment_id("kb-assistant", world.live_backend.pk)
    body = json.dumps({"data": _reports_with(**{live: 3000})}).encode()
    client.force_login(sre)
    url = reverse("releases:gateway_check", args=["kb-assistant"])

    with answering(200, body) as gateway_url:
        checking.GATEWAY_URL = gateway_url
        from_incident = client.post(url, {"back": "incident"})
        from_service = client.post(url, follow=True)

    assert from_incident.status_code == 302
    assert from_incident["Location"] == "/services/kb-assistant/incident/#gateway-check"
    assert from_service.redirect_chain == [("/services/kb-assistant/#gateway-check", 302)]
    page = " ".join(from_service.content.decode().split())
    assert "The gateway does not route kb-assistant as the ledger says." in page
    assert (
        f"the gateway serves kb-assistant with weight 3000 on deployment {live}; "
        "the ledger says 10000"
    ) in page
    assert 'data-gateway="drifted"' in page
    [finding] = _open_gateway_findings()
    # Who asked is on the Events of what the check found.
    assert Event.objects.get(action="service.unauthorized_change").actor == sre
    assert Event.objects.get(action="gateway.check_drifted").actor == sre
    assert finding.kind == "gateway"


@pytest.mark.django_db
def test_the_button_refuses_a_get_and_people_without_the_rollback_permission(
    world, checking, client, outsider
):
    url = reverse("releases:gateway_check", args=["kb-assistant"])
    client.force_login(outsider)

    assert client.get(url).status_code == 405
    assert client.post(url).status_code == 403
    assert not GatewayCheck.objects.exists()


def test_check_deploy_warns_of_a_gateway_url_the_check_may_not_reach(settings):
    from releases.checks import gateway_is_an_allowed_host

    settings.GATEWAY_URL = "http://192.0.2.10:4000"
    [warning] = gateway_is_an_allowed_host()
    assert warning.id == "releases.W002"
    assert "192.0.2.10 is not in REPLAY_ALLOWED_HOSTS" in warning.msg

    settings.GATEWAY_URL = "http://127.0.0.1:4000"
    assert gateway_is_an_allowed_host() == []
    settings.GATEWAY_URL = ""
    assert gateway_is_an_allowed_host() == []
