"""GET /metrics: who may scrape it, and that what it reports moves with what happens.

The web process here has no PROMETHEUS_MULTIPROC_DIR: one registry, shared by the
test client's requests. tests/foundation/test_metrics_processes.py scrapes gunicorn
and real Celery workers in multiprocess mode.
"""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from ledger import services
from ledger.checkpoints import verify_ledger
from lib import metrics
from replay.models import Run
from tests.replay.factories import RunFactory
from tests.support.metrics import family_names, sample_value

TOKEN = "metrics-token-for-the-test-0123456789"


def scrape(client, **headers) -> str:
    response = client.get("/metrics", **headers)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=")
    return response.content.decode()


def test_metrics_answer_a_loopback_client_in_the_exposition_format(client, db):
    text = scrape(client)  # the test client's REMOTE_ADDR is 127.0.0.1

    assert {
        "ledger_http_requests",
        "ledger_http_request_duration_seconds",
        "ledger_celery_tasks",
        "ledger_chain_appends",
        "ledger_verifications",
        "ledger_replay_runs",
        "ledger_work_items",
    } <= family_names(text)


@pytest.mark.parametrize(
    ("remote_addr", "headers", "status"),
    [
        ("203.0.113.7", {}, 403),
        ("203.0.113.7", {"HTTP_AUTHORIZATION": "Bearer wrong-token"}, 403),
        ("203.0.113.7", {"HTTP_AUTHORIZATION": f"Token {TOKEN}"}, 403),
        ("203.0.113.7", {"HTTP_AUTHORIZATION": f"Bearer {TOKEN}"}, 200),
        ("::1", {}, 200),
        # Through a proxy on this machine: loopback says nothing of the client.
        ("127.0.0.1", {"HTTP_X_FORWARDED_FOR": "203.0.113.7"}, 403),
        (
            "127.0.0.1",
            {"HTTP_X_FORWARDED_FOR": "203.0.113.7", "HTTP_AUTHORIZATION": f"Bearer {TOKEN}"},
            200,
        ),
    ],
)
def test_others_than_loopback_need_the_metrics_token(
    client, db, settings, remote_addr, headers, status
):
    settings.METRICS_TOKEN = TOKEN

    response = client.get("/metrics", REMOTE_ADDR=remote_addr, **headers)

    assert response.status_code == status
    if status == 403:
        assert b"ledger_" not in response.content


# Each header a proxy on this machine may add instead of X-Forwarded-For (nginx with
# `proxy_set_header X-Real-IP`, a proxy speaking RFC 7239, Via from a cache, ...).
PROXY_HEADERS = {
    "HTTP_FORWARDED": "for=203.0.113.7;proto=https",
    "HTTP_X_FORWARDED_FOR": "203.0.113.7",
    "HTTP_X_REAL_IP": "203.0.113.7",
    "HTTP_X_FORWARDED_HOST": "ledger.example.com",
    "HTTP_X_FORWARDED_PROTO": "https",
    "HTTP_X_FORWARDED_PORT": "443",
    "HTTP_VIA": "1.1 nginx",
}


@pytest.mark.parametrize("header", PROXY_HEADERS)
def test_a_loopback_request_that_came_through_a_proxy_needs_the_token(client, db, settings, header):
    settings.METRICS_TOKEN = TOKEN
    proxied = {header: PROXY_HEADERS[header]}

    refused = client.get("/metrics", REMOTE_ADDR="127.0.0.1", **proxied)
    with_token = client.get(
        "/metrics", REMOTE_ADDR="127.0.0.1", HTTP_AUTHORIZATION=f"Bearer {TOKEN}", **proxied
    )

    assert refused.status_code == 403
    assert b"ledger_" not in refused.content
    assert with_token.status_code == 200


def test_the_loopback_exemption_can_be_turned_off(client, db, settings):
    # A proxy on this machine that adds no forwarding header at all looks like loopback.
    settings.METRICS_TOKEN = TOKEN
    settings.METRICS_LOOPBACK_WITHOUT_TOKEN = False

    refused = client.get("/metrics", REMOTE_ADDR="127.0.0.1")
    with_token = client.get("/metrics", REMOTE_ADDR="::1", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")

    assert refused.status_code == 403
    assert b"ledger_" not in refused.content
    assert with_token.status_code == 200


def test_without_a_token_configured_no_bearer_is_accepted(client, db, settings):
    settings.METRICS_TOKEN = ""

    response = client.get("/metrics", REMOTE_ADDR="203.0.113.7", HTTP_AUTHORIZATION="Bearer ")

    assert response.status_code == 403


def test_metrics_refuse_a_post(client, db):
    assert client.post("/metrics").status_code == 405


def test_requests_are_counted_per_view_name_and_status(client, owner):
    before = scrape(client)
    client.force_login(owner)
    client.get("/accounts/login/")  # a signed-in user is redirected home: 302
    client.get("/services/")
    client.get("/services/")
    client.get("/no-such-page/")
    after = scrape(client)

    def moved(name: str, **labels: str) -> float:
        return sample_value(after, name, **labels) - sample_value(before, name, **labels)

    assert moved("ledger_http_requests_total", view="login", method="GET", status="302") == 1
    assert (
        moved(
            "ledger_http_requests_total", view="releases:service_list", method="GET", status="200"
        )
        == 2
    )
    assert moved("ledger_http_requests_total", view=metrics.UNRESOLVED_VIEW, status="404") == 1
    assert (
        moved(
            "ledger_http_request_duration_seconds_count", view="releases:service_list", status="200"
        )
        == 2
    )
    # The path a client asked for never becomes a label.
    assert "no-such-page" not in after


def test_an_odd_method_is_one_label_value(client, db):
    before = scrape(client)
    client.generic("BREW", "/healthz")
    after = scrape(client)

    assert (
        sample_value(after, "ledger_http_requests_total", method="other")
        - sample_value(before, "ledger_http_requests_total", method="other")
        == 1
    )
    assert "BREW" not in after


def test_chain_appends_are_counted_when_committed(client, db, django_capture_on_commit_callbacks):
    before = scrape(client)
    with django_capture_on_commit_callbacks(execute=True):
        services.create_team(actor=None, slug="metrics-team", name="Metrics team")
    after = scrape(client)

    assert (
        sample_value(after, "ledger_chain_appends_total", action="team.created")
        - sample_value(before, "ledger_chain_appends_total", action="team.created")
        == 1
    )


def test_an_append_rolled_back_is_not_counted(client, db, django_capture_on_commit_callbacks):
    before = scrape(client)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        services.create_team(actor=None, slug="rolled-back", name="Rolled back")
    after = scrape(client)

    assert callbacks  # the count waits for a commit that, here, never comes
    assert sample_value(after, "ledger_chain_appends_total", action="team.created") == sample_value(
        before, "ledger_chain_appends_total", action="team.created"
    )


def test_verify_ledger_results_are_counted(client, db):
    before = scrape(client)
    report = verify_ledger()
    after = scrape(client)

    assert report.ok
    assert (
        sample_value(after, "ledger_verifications_total", result="ok")
        - sample_value(before, "ledger_verifications_total", result="ok")
        == 1
    )
    assert sample_value(after, "ledger_last_verification_timestamp_seconds", result="ok") >= (
        timezone.now().timestamp() - 60
    )


def test_work_gauges_count_replay_runs_from_the_database(client, db, settings):
    settings.REPLAY_STALE_AFTER_SECONDS = 120
    now = timezone.now()
    RunFactory(state=Run.State.QUEUED)
    RunFactory(state=Run.State.RUNNING, heartbeat_at=now)
    RunFactory(state=Run.State.RUNNING, heartbeat_at=now - dt.timedelta(minutes=10))
    RunFactory(state=Run.State.INTERRUPTED)
    RunFactory(state=Run.State.FINISHED, verdict=Run.Verdict.PASSED)

    text = scrape(client)

    assert sample_value(text, "ledger_work_items", kind="replay_run", state="open") == 4
    assert sample_value(text, "ledger_work_items", kind="replay_run", state="overdue") == 2
    assert sample_value(text, "ledger_work_items_errors", kind="replay_run") == 0


def test_a_gauge_source_that_fails_is_reported_and_the_rest_still_answer(client, db):
    def broken() -> dict[str, int]:
        raise RuntimeError("no table yet")

    metrics.register_gauges("broken_kind", broken)
    try:
        text = scrape(client)
    finally:
        metrics._gauge_sources.pop("broken_kind")

    assert sample_value(text, "ledger_work_items_errors", kind="broken_kind") == 1
    assert sample_value(text, "ledger_work_items_errors", kind="replay_run") == 0


def test_live_revisions_without_current_evidence_are_breached(client, db):
    from tests.ledger.factories import RevisionFactory
    from tests.replay.helpers import go_live

    go_live(RevisionFactory())

    text = scrape(client)

    assert (
        sample_value(text, "ledger_work_items", kind="live_revision_evidence", state="breached")
        == 1
    )
