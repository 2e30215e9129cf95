"""Explain a request: a trace's model calls against what the ledger approved to serve
at that instant — live, a gray stage, an unapproved revision, an unknown backend —
on the page and the API."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from ledger.models import ModelCallSpan
from ledger.traces.otlp import Extracted, SpanFacts
from ledger.traces.services import record_spans
from releases.explain.queries import explain_trace
from tests.ledger.factories import RevisionFactory
from tests.releases.factories import roll_out
from tests.replay.factories import BackendFactory

pytestmark = pytest.mark.django_db
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
LIVE_URL, CANARY_URL = "http://kb-live.internal:8000", "http://kb-canary.internal:8000"


@pytest.fixture
def addressed(world):
    type(world.live_backend).objects.filter(pk=world.live_backend.pk).update(base_url=LIVE_URL)
    type(world.live_backend).objects.filter(pk=world.candidate_backend.pk).update(
        base_url=CANARY_URL
    )
    return world


def call(span_id: str, host: str, *, model: str = "gemma-3-270m", **facts) -> SpanFacts:
    return SpanFacts(
        trace_id=TRACE,
        span_id=span_id,
        parent_span_id="",
        name=f"chat {model}",
        started_at=facts.pop("started_at", timezone.now()),
        duration_ms=900.0,
        operation="chat",
        request_model=model,
        response_model=model,
        server_address=host,
        server_port=8000,
        **facts,
    )


def store(*calls: SpanFacts) -> None:
    recorded = record_spans(Extracted(spans=list(calls)))
    assert recorded.stored == len(calls) and not recorded.rejected


def test_a_call_to_the_live_backend_is_the_live_revision(addressed, client, owner):
    store(
        call(
            "00000000000000a1",
            "kb-live.internal",
            service_slug="kb-assistant",
            tenant="support",
            retry_count=2,
            degradation="shorter-context",
            gateway_policy_version=addressed.live.gateway_policy.label,
        )
    )
    [explained] = explain_trace(TRACE)
    assert explained.approved_as == "live" and explained.revision == addressed.live
    assert explained.findings == []
    assert explained.happened == ["degraded: shorter-context", "retried 2 times"]
    assert any(link.label.startswith("replay of") for link in explained.evidence)

    client.force_login(owner)
    body = client.get(f"/api/explain/{TRACE.upper()}/").json()
    [answer] = body["calls"]
    assert answer["approved_as"] == "live" and answer["service"] == "kb-assistant"
    assert answer["revision"] == {
        "id": addressed.live.pk,
        "label": addressed.live.label,
        "fingerprint": addressed.live.fingerprint,
    }
    assert answer["live_revision"] == addressed.live.label and answer["stage"] is None
    page = client.get("/explain/", {"trace_id": TRACE}).content.decode()
    assert "the live revision" in page and "retried 2 times" in page


def test_a_call_to_the_canary_during_a_stage_is_the_candidate_at_its_share(
    addressed, release, owner, signers, client
):
    rolling = roll_out(release, owner, signers)
    store(call("00000000000000b2", "kb-canary.internal", started_at=timezone.now()))

    [explained] = explain_trace(TRACE)
    assert explained.approved_as == "stage" and explained.revision == addressed.candidate
    assert explained.share.traffic_pct == 5.0 and explained.release == rolling

    client.force_login(owner)
    [answer] = client.get(f"/api/explain/{TRACE}/").json()["calls"]
    assert answer["stage"] == {"release": rolling.pk, "stage": 1, "traffic_pct": 5.0}
    assert answer["release"] == rolling.pk
    assert "a gray stage at 5 %" in client.get("/explain/", {"trace_id": TRACE}).content.decode()


def test_a_revision_never_approved_then_is_an_unauthorized_change_candidate(
    addressed, client, owner
):
    rogue = RevisionFactory(service=addressed.service)
    BackendFactory(name="kb-rogue", revision=rogue, base_url="http://kb-rogue.internal:8000")
    # Before the stage: the canary's revision was not serving yet either.
    store(
        call("00000000000000c3", "kb-rogue.internal"),
        call(
            "00000000000000c4",
            "kb-canary.internal",
            started_at=timezone.now() + dt.timedelta(seconds=1),
        ),
    )
    rogue_call, canary_call = explain_trace(TRACE)
    for explained, revision in ((rogue_call, rogue), (canary_call, addressed.candidate)):
        assert explained.approved_as == "unapproved"
        assert explained.findings[-1].endswith("an unauthorized change candidate")
        assert f"kb-assistant {revision.label} answered" in explained.findings[-1]

    client.force_login(owner)
    page = client.get("/explain/", {"trace_id": TRACE}).content.decode()
    assert page.count("not approved to serve") == 2


def test_an_unknown_backend_and_a_policy_the_ledger_did_not_approve_are_said(addressed):
    from releases.models import UnauthorizedChange

    drift = UnauthorizedChange.objects.create(
        service=addressed.service,
        expected_revision=addressed.live,
        found=[{"what": "engine_version", "registered": "0.6.3", "reported": "0.7.0"}],
        detected_at=timezone.now() - dt.timedelta(minutes=5),
    )
    UnauthorizedChange.objects.create(  # reconciled before the calls: not in force
        service=addressed.service,
        expected_revision=addressed.live,
        found=[],
        detected_at=timezone.now() - dt.timedelta(hours=2),
        reconciled_at=timezone.now() - dt.timedelta(hours=1),
        reconciliation="restarted",
    )
    store(
        call("00000000000000d5", "somewhere.else", service_slug="kb-assistant"),
        call(
            "00000000000000d6",
            "kb-live.internal",
            gateway_policy_version="v999",
            started_at=timezone.now() + dt.timedelta(seconds=1),
        ),
    )
    unknown, drifted = explain_trace(TRACE)
    assert unknown.approved_as == "unknown" and unknown.service == addressed.service
    assert "no registered backend answers at somewhere.else:8000" in unknown.findings[0]
    assert unknown.live.revision == addressed.live  # what the ledger approved, still said
    assert (
        [u.pk for u in unknown.unauthorized] == [u.pk for u in drifted.unauthorized] == [drift.pk]
    )
    assert drifted.approved_as == "live"
    assert drifted.findings == [
        f"the gateway applied policy v999; the ledger approved "
        f"{addressed.live.gateway_policy.label} for {addressed.live.label}"
    ]


def test_bad_and_unknown_trace_ids(client, owner):
    client.force_login(owner)
    response = client.get("/api/explain/not-a-trace/")
    assert (
        response.status_code == 400 and "expected 32 hex digits" in response.json()["trace_id"][0]
    )
    assert client.get(f"/api/explain/{'0' * 32}/").status_code == 400
    assert client.get(f"/api/explain/{TRACE}/").status_code == 404
    page = client.get("/explain/", {"trace_id": "4bf92f35-77b3"})
    assert page.status_code == 400 and "expected 32 hex digits" in page.content.decode()
    assert client.get("/explain/", {"trace_id": "x\x00y"}).status_code == 400
    assert client.get("/explain/", {"trace_id": TRACE}).status_code == 404
    assert client.get("/explain/").status_code == 200
    assert not ModelCallSpan.objects.exists()


def test_the_incident_screen_takes_a_trace_id(world, client, sre):
    client.force_login(sre)
    page = client.get("/services/kb-assistant/incident/").content.decode()
    assert 'action="/explain/"' in page and 'name="trace_id"' in page
    # The search box of every page takes one too.
    found = client.get("/search/", {"q": f" {TRACE.upper()} "})
    assert found.status_code == 302 and found["Location"] == f"/explain/?trace_id={TRACE}"


def test_explaining_needs_a_sign_in(client):
    assert client.get(f"/api/explain/{TRACE}/").status_code in (401, 403)
    assert client.get("/explain/").status_code == 302


def test_the_queries_do_not_grow_with_the_calls_of_a_trace(addressed):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def queries_for(trace: str, calls: int) -> int:
        record_spans(
            Extracted(
                spans=[
                    SpanFacts(
                        **{**vars(call(f"{n + 1:016x}", "kb-live.internal")), "trace_id": trace}
                    )
                    for n in range(calls)
                ]
            )
        )
        with CaptureQueriesContext(connection) as captured:
            explained = explain_trace(trace)
        assert len(explained) == calls and {c.approved_as for c in explained} == {"live"}
        return len(captured)

    assert queries_for("1" * 32, 2) == queries_for("2" * 32, 20)


def test_a_release_cites_trace_ids_in_its_comments_and_close_note(release, owner, client):
    from django.template.loader import render_to_string

    from releases.governance.services.comments import add_comment

    digest = "ab" * 32  # a sha256 is not a trace id
    add_comment(
        release,
        actor=owner,
        body=f"Slow answer reported: {TRACE.upper()}; image {digest}; <b>not bold</b>",
    )
    client.force_login(owner)
    page = client.get(f"/releases/{release.pk}/").content.decode()
    assert page.count(f'href="/explain/?trace_id={TRACE}"') == 1
    assert "&lt;b&gt;not bold&lt;/b&gt;" in page
    assert f"trace_id={digest[:32]}" not in page
    # The close note is shown with the same part (the rollout panel, the change record).
    note = render_to_string("releases/_cited_traces.html", {"text": f"see {TRACE}, {TRACE}"})
    assert note.count(f'href="/explain/?trace_id={TRACE}"') == 1
