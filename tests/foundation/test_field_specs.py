"""What a person states about a runtime, a service or a backend is listed once, on the
model; the form, the API, the verbs and the declarative file read that list."""

from __future__ import annotations

from ledger.declarative import schema
from ledger.forms.registry import RuntimeForm, ServiceForm
from ledger.models import Runtime, Service
from ledger.serializers.registry import RuntimeSerializer, ServiceSerializer
from replay import declarative
from replay.forms import BackendForm
from replay.models import Backend
from replay.serializers.backends import BackendSerializer
from replay.services import backends


def test_forms_and_the_api_take_the_stated_fields_in_their_order():
    assert list(RuntimeForm._meta.fields) == list(Runtime.STATED_FIELDS)
    assert list(ServiceForm._meta.fields) == list(Service.STATED_FIELDS)
    assert list(BackendForm._meta.fields) == list(Backend.STATED_FIELDS)
    for serializer, model in (
        (RuntimeSerializer, Runtime),
        (ServiceSerializer, Service),
        (BackendSerializer, Backend),
    ):
        fields = list(serializer.Meta.fields)
        assert fields[: len(model.STATED_FIELDS)] == list(model.STATED_FIELDS)
    assert backends.FIELDS == Backend.STATED_FIELDS


def test_the_declarative_file_states_the_same_fields():
    # A file names a runtime and a backend by `name`, a service by `slug`, its SLOs under
    # `slos` without the prefix, and a backend's service and revision by slug and number.
    assert set(Runtime.STATED_FIELDS) == set(schema.RUNTIME.keys)
    slos = {f"slo_{key}" for key in schema.SLOS.keys}
    # Its live revision, gateway policy versions and revisions are the service's history,
    # not what it states.
    stated = set(schema.SERVICE.keys) - {"slos", "live_revision", "gateway_policies", "revisions"}
    assert set(Service.STATED_FIELDS) == stated | slos
    assert set(Backend.STATED_FIELDS) <= set(declarative.BACKEND.keys)
