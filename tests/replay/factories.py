"""Replay factories for test setup. Domain behaviour is tested through replay.services."""

from __future__ import annotations

import factory
from django.utils import timezone

from ledger.engines import Engine
from replay.models import Backend, Probe, Result, Run, Sample, SampleSet
from tests.ledger.factories import RevisionFactory


class BackendFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Backend

    name = factory.Sequence(lambda n: f"backend-{n}")
    revision = factory.SubFactory(RevisionFactory)
    base_url = "http://127.0.0.1:9"
    model_name = "gemma-3-270m"
    engine = Engine.VLLM
    concurrency_limit = 4


class SampleSetFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = SampleSet

    name = factory.Sequence(lambda n: f"set-{n}")
    version = 1


class SampleFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Sample

    sample_set = factory.SubFactory(SampleSetFactory)
    key = factory.Sequence(lambda n: f"sample-{n}")
    category = Sample.Category.SHORT_QA
    messages = factory.LazyFunction(lambda: [{"role": "user", "content": "What is 2 + 2?"}])
    params = factory.LazyFunction(lambda: {"max_tokens": 16})
    checks = factory.LazyFunction(lambda: [{"type": "contains", "value": "4"}])


class RunFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Run

    sample_set = factory.SubFactory(SampleSetFactory)
    backend = factory.SubFactory(BackendFactory)
    revision = factory.SelfAttribute("backend.revision")
    fingerprint = factory.SelfAttribute("revision.fingerprint")


class ResultFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Result

    run = factory.SubFactory(RunFactory)
    sample = factory.SubFactory(SampleFactory, sample_set=factory.SelfAttribute("..run.sample_set"))
    outcome = Result.Outcome.PASSED
    # What was sent follows from the sample, as the worker writes it.
    mode = factory.LazyAttribute(
        lambda o: (
            Result.Mode.SKIPPED
            if o.outcome == Result.Outcome.SKIPPED
            else Result.Mode.MODEL_TURN
            if o.sample.replay_mode == Result.Mode.MODEL_TURN
            else Result.Mode.RERUN
        )
    )
    ttft_ms = 120.0
    tpot_ms = 12.0
    e2e_ms = 500.0
    output_tokens = 32


class ProbeFactory(factory.django.DjangoModelFactory):
    """A probe as `replay.services.probe_backend` records it."""

    class Meta:
        model = Probe

    backend = factory.SubFactory(BackendFactory)
    fingerprint = factory.LazyAttribute(lambda p: p.backend.revision.fingerprint)
    started_at = factory.LazyFunction(timezone.now)
    finished_at = factory.LazyAttribute(lambda p: p.started_at)
    reachable = True
