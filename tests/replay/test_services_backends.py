"""Backends through the domain: events, permissions, and a credential that is only ever a name."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from ledger.models import Event
from replay import permissions, services
from replay.models import Backend
from tests.ledger.factories import RevisionFactory

pytestmark = pytest.mark.django_db


def _fields(**overrides):
    return {
        "name": "kb-assistant-vllm",
        "revision": RevisionFactory(),
        "base_url": "http://10.0.0.5:8000",
        "model_name": "kb-qwen2.5-7b-awq",
        "credential_env": "LEDGER_BACKEND_KEY_KB_ASSISTANT",
        **overrides,
    }


def test_create_backend_records_an_event_on_its_service():
    backend = services.create_backend(actor=None, **_fields())

    event = Event.objects.get(action="replay.backend_created")
    assert event.service_id == backend.revision.service_id
    assert event.payload_data["after"]["credential_env"] == "LEDGER_BACKEND_KEY_KB_ASSISTANT"
    assert event.payload_data["after"]["revision"] == backend.revision_id


@pytest.mark.parametrize("name", ["credential", "api_key", "token"])
def test_a_key_itself_is_refused_with_advice(name):
    with pytest.raises(ValidationError) as raised:
        services.create_backend(actor=None, **_fields(**{name: "sk-abc123"}))

    assert "credential_env" in raised.value.message_dict[name][0]
    assert not Backend.objects.exists()


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("credential_env", "sk-abc123", "Give the NAME of an environment variable"),
        ("base_url", "http://admin:hunter2@10.0.0.5:8000", "must not carry a user or password"),
        ("base_url", "http://10.0.0.5:8000/?api_key=x", "without a query string"),
        ("base_url", "not a url", "Enter a valid URL"),
        ("concurrency_limit", 0, "greater than or equal to 1"),
    ],
)
def test_bad_fields_are_refused_naming_the_field(field, value, message):
    with pytest.raises(ValidationError) as raised:
        services.create_backend(actor=None, **_fields(**{field: value}))

    assert message in " ".join(raised.value.message_dict[field])


def test_update_backend_records_what_changed_and_nothing_when_unchanged():
    backend = services.create_backend(actor=None, **_fields())

    assert services.update_backend(backend, actor=None, concurrency_limit=16, enabled=True) is True
    assert services.update_backend(backend, actor=None, concurrency_limit=16) is False

    [event] = Event.objects.filter(action="replay.backend_updated")
    assert event.payload_data == {
        "before": {"concurrency_limit": 8},
        "after": {"concurrency_limit": 16},
    }


def test_only_the_owning_team_and_platform_sres_manage_a_backend(owner, sre, outsider):
    revision = RevisionFactory()

    with pytest.raises(PermissionDenied):
        services.create_backend(actor=outsider, **_fields(revision=revision))
    with pytest.raises(PermissionDenied):
        services.create_backend(actor=owner, **_fields(revision=revision))
    revision.service.team.members.add(owner)
    backend = services.create_backend(actor=owner, **_fields(revision=revision))
    services.update_backend(backend, actor=sre, enabled=False)

    assert permissions.can_manage_backend(owner, revision) is True
    assert permissions.can_manage_backend(sre, revision) is True
    assert permissions.can_manage_backend(outsider, revision) is False


def test_backend_config_reads_the_key_from_the_environment_or_a_file(monkeypatch, tmp_path):
    backend = services.create_backend(actor=None, **_fields())
    monkeypatch.setenv("LEDGER_BACKEND_KEY_KB_ASSISTANT", "sk-from-env")
    assert services.backend_config(backend).credential == "sk-from-env"

    monkeypatch.delenv("LEDGER_BACKEND_KEY_KB_ASSISTANT")
    secret = tmp_path / "key"
    secret.write_text("sk-from-file\n")
    monkeypatch.setenv("LEDGER_BACKEND_KEY_KB_ASSISTANT_FILE", str(secret))
    config = services.backend_config(backend, concurrency=99)
    assert config.credential == "sk-from-file"
    assert config.concurrency == backend.concurrency_limit  # never above the backend's limit
    assert "sk-from-file" not in repr(config)

    monkeypatch.delenv("LEDGER_BACKEND_KEY_KB_ASSISTANT_FILE")
    with pytest.raises(services.CredentialMissing) as raised:
        services.backend_config(backend)
    assert "LEDGER_BACKEND_KEY_KB_ASSISTANT" in str(raised.value)
