"""Probing a backend: declared capabilities verified or failed, drift found and recorded."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied

from ledger import services as ledger_services
from ledger.models import Capability, Event
from replay import queries, services
from replay.models import Probe
from tests.replay.helpers import backend_on, go_live
from tests.support.fake_openai import FakeOpenAI, ServerConfig, free_port

pytestmark = pytest.mark.django_db

SECRET = "sk-probe-secret-9876543210"


@pytest.fixture
def server():
    """A vLLM-like server reporting exactly what the factories register."""
    config = ServerConfig(model="qwen2.5-7b-instruct", max_model_len=32768, version="0.6.3")
    with FakeOpenAI(config) as fake:
        yield fake


def _declare(revision, **capabilities) -> dict[str, Capability]:
    return {
        kind: ledger_services.declare_capability(revision, actor=None, kind=kind, value=value)
        for kind, value in capabilities.items()
    }


def test_declared_capabilities_are_verified_bound_to_the_fingerprint(server):
    backend = backend_on(server)
    revision = backend.revision
    _declare(
        revision,
        structured_output=["json_schema"],
        tool_calling=True,
        streaming="sse",
        context_length=8192,
        max_concurrency=64,
    )

    probe = services.probe_backend(backend, actor=None)

    statuses = dict(revision.capabilities.values_list("kind", "status"))
    assert statuses == {
        "structured_output": "verified",
        "tool_calling": "verified",
        "streaming": "verified",
        "context_length": "verified",
        "max_concurrency": "declared",  # no request can verify it
    }
    verified = revision.capabilities.filter(status="verified")
    assert {c.verified_fingerprint for c in verified} == {revision.fingerprint}
    structured = revision.capabilities.get(kind="structured_output")
    assert structured.evidence["checks"] == [
        {
            "name": "json_schema",
            "passed": True,
            "expected": "JSON valid against the schema",
            "got": "valid JSON",
        }
    ]
    assert structured.evidence["backend"] == backend.name
    context = revision.capabilities.get(kind="context_length").evidence
    # About 85% of the declared length (the fake counts one token per word).
    assert 5000 < context["prompt_tokens"] < 8192
    assert probe.reachable and probe.drift == []
    assert probe.max_context == 32768 and probe.engine_version == "0.6.3"
    assert probe.capability_results["max_concurrency"]["status"] == "not_probed"
    assert Event.objects.filter(action="capability.verified").count() == 4
    tools = [r.body.get("tools") for r in server.chat_requests if r.body.get("tools")]
    assert tools[0][0]["function"]["name"] == "lookup_order"


def test_a_capability_the_backend_cannot_honour_fails_with_what_was_seen(server):
    server.configure(max_model_len=4096)
    backend = backend_on(server)
    _declare(backend.revision, context_length=32768, structured_output=["json_schema"])
    server.configure(scenario=server.config.scenario.__class__(output="invalid_json"))

    services.probe_backend(backend, actor=None)

    context = backend.revision.capabilities.get(kind="context_length")
    assert context.status == "failed" and context.verified_fingerprint == ""
    assert context.evidence["outcome"] == "http_400"
    assert "maximum context length is 4096" in context.evidence["error_detail"]
    structured = backend.revision.capabilities.get(kind="structured_output")
    assert structured.status == "failed"
    assert structured.evidence["checks"][0]["got"].startswith("not JSON")
    assert Event.objects.filter(action="capability.failed").count() == 2


def test_drift_when_the_server_reports_another_model_with_an_event(
    server, django_assert_num_queries
):
    backend = backend_on(server)
    go_live(backend.revision)
    server.configure(model="qwen2.5-7b-instruct-awq")

    probe = services.probe_backend(backend, actor=None)

    assert probe.drift == [
        {
            "what": "served_model",
            "registered": "qwen2.5-7b-instruct",
            "reported": "qwen2.5-7b-instruct-awq",
        }
    ]
    event = Event.objects.get(action="replay.drift_detected")
    assert (event.subject_type, event.subject_id) == ("replay.backend", str(backend.pk))
    assert event.service_id == backend.revision.service_id
    assert event.payload_data["drift"] == probe.drift
    service = backend.revision.service
    service.refresh_from_db()
    with django_assert_num_queries(2):  # backends with their latest probe id; those probes
        flags = queries.drift_flags(service)
    assert [(f["backend"], f["live"], f["drift"]) for f in flags] == [
        (backend.name, True, probe.drift)
    ]


def test_drift_when_the_server_reports_another_context_length_or_engine_version(server):
    backend = backend_on(server)
    server.configure(max_model_len=16384, version="0.7.2")

    probe = services.probe_backend(backend, actor=None)

    assert probe.drift == [
        {"what": "max_context", "registered": 32768, "reported": 16384},
        {"what": "engine_version", "registered": "0.6.3", "reported": "0.7.2"},
    ]
    assert Event.objects.filter(action="replay.drift_detected").count() == 1


def test_drift_is_an_event_when_it_appears_changes_or_clears_not_on_every_probe(server):
    backend = backend_on(server)
    server.configure(max_model_len=16384)
    services.probe_backend(backend, actor=None)
    services.probe_backend(backend, actor=None)
    assert Event.objects.filter(action="replay.drift_detected").count() == 1

    server.configure(max_model_len=32768)
    services.probe_backend(backend, actor=None)

    assert Event.objects.filter(action="replay.drift_cleared").count() == 1
    assert queries.drift_flags(backend.revision.service) == []
    assert Probe.objects.filter(backend=backend).count() == 3


def test_the_periodic_sweep_records_a_capability_only_when_its_status_changes(server):
    backend = backend_on(server)
    _declare(backend.revision, streaming="sse")
    services.probe_backend(backend, actor=None, record_unchanged=False)
    events = Event.objects.count()

    services.probe_backend(backend, actor=None, record_unchanged=False)
    assert Event.objects.count() == events

    server.configure(scenario=server.config.scenario.__class__(fault="cut", cut_after=1))
    services.probe_backend(backend, actor=None, record_unchanged=False)
    assert backend.revision.capabilities.get().status == "failed"
    assert Event.objects.filter(action="capability.failed").count() == 1


def test_an_unreachable_backend_is_recorded_without_the_credential(db, monkeypatch):
    monkeypatch.setenv("LEDGER_BACKEND_KEY_KB_PROBE", SECRET)
    with FakeOpenAI() as placeholder:
        backend = backend_on(placeholder, credential_env="LEDGER_BACKEND_KEY_KB_PROBE")
    services.update_backend(backend, actor=None, base_url=f"http://127.0.0.1:{free_port()}")

    probe = services.probe_backend(backend, actor=None)

    assert probe.reachable is False
    assert probe.error.startswith("GET http://127.0.0.1:")
    assert SECRET not in probe.error
    assert not Event.objects.filter(action__startswith="replay.drift").exists()


def test_the_probe_sends_the_credential_named_by_the_backend(server, monkeypatch):
    monkeypatch.setenv("LEDGER_BACKEND_KEY_KB_PROBE", SECRET)
    server.configure(api_key=SECRET)
    backend = backend_on(server, credential_env="LEDGER_BACKEND_KEY_KB_PROBE")
    _declare(backend.revision, streaming="sse")

    probe = services.probe_backend(backend, actor=None)

    assert probe.reachable and probe.drift == []
    assert backend.revision.capabilities.get().status == "verified"
    assert all(r.headers["authorization"] == f"Bearer {SECRET}" for r in server.requests)
    assert SECRET not in str(Probe.objects.values().get())


def test_only_the_owning_team_and_platform_sres_may_probe(server, outsider, sre):
    backend = backend_on(server)

    with pytest.raises(PermissionDenied):
        services.probe_backend(backend, actor=outsider)
    probe = services.probe_backend(backend, actor=sre)

    assert probe.reachable
