"""A backend's engine is the runtime's enum: the migration renames `other`."""

from __future__ import annotations

import importlib

from django.apps import apps

from ledger.engines import Engine
from replay.models import Backend
from tests.replay.factories import BackendFactory

migration = importlib.import_module("replay.migrations.0006_backend_engine_is_the_ledgers")


def test_other_becomes_openai_compatible_and_back(db):
    generic = BackendFactory()
    vllm = BackendFactory(engine=Engine.VLLM)
    Backend.objects.filter(pk=generic.pk).update(engine="other")

    migration.forward(apps, None)
    assert Backend.objects.get(pk=generic.pk).engine == Engine.OPENAI_COMPATIBLE
    assert Backend.objects.get(pk=vllm.pk).engine == Engine.VLLM

    migration.backward(apps, None)
    assert Backend.objects.get(pk=generic.pk).engine == "other"
    assert Backend.objects.get(pk=vllm.pk).engine == Engine.VLLM


def test_a_backend_names_its_engine_as_a_runtime_does(db):
    backend = BackendFactory(engine=Engine.OPENAI_COMPATIBLE)
    assert backend.get_engine_display() == "Other OpenAI-compatible server"
    assert Backend._meta.get_field("engine").choices == Engine.choices
