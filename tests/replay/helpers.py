"""Building blocks for the replay tests.

For the domain tests: a backend on the fake server, sample sets, a run executed in
this process. For the page, API, admin and browser tests: a backend of a team's
service and a finished run whose summary, comparison and verdict the domain computed.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from django.utils import timezone

from ledger import services as ledger_services
from ledger.engines import Engine
from replay import services
from replay.models import Backend, Result, Run, SampleSet
from replay.services.verdicts import compare_runs, decide, summarize_run
from tests.ledger.factories import RevisionFactory
from tests.replay.factories import (
    BackendFactory,
    ResultFactory,
    RunFactory,
    SampleFactory,
    SampleSetFactory,
)
from tests.support.fake_openai import FakeOpenAI

SECRET = "sk-live-0123456789abcdef"
ANSWER_SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "integer"}},
    "required": ["answer"],
}


def backend_on(server: FakeOpenAI, revision=None, **fields: Any) -> Backend:
    """A backend serving ``revision`` (a new one by default) from the fake server."""
    values: dict[str, Any] = {
        "name": f"fake-{server.port}",
        "revision": revision or RevisionFactory(),
        "base_url": server.base_url,
        "model_name": server.config.model,
        "engine": Engine.VLLM,
        "concurrency_limit": 4,
        "connect_timeout_s": 2,
        "first_token_timeout_s": 5,
        "idle_timeout_s": 5,
        "total_timeout_s": 20,
    }
    values.update(fields)
    return services.create_backend(actor=None, **values)


def sample(key: str, content: str = "What is 2 + 2?", **fields: Any) -> dict[str, Any]:
    """A sample spec; ``content`` may end with a ``fake:`` directive line for the server."""
    spec: dict[str, Any] = {
        "key": key,
        "category": "short_qa",
        "messages": [{"role": "user", "content": content}],
        "params": {"max_tokens": 32},
    }
    spec.update(fields)
    return spec


def make_set(name: str, samples: list[dict[str, Any]], **kwargs: Any) -> SampleSet:
    text = "".join(json.dumps(spec) + "\n" for spec in samples)
    sample_set, _ = services.import_sample_set(actor=None, name=name, jsonl=text, **kwargs)
    return sample_set


def go_live(revision) -> None:
    ledger_services.set_live_revision(revision.service, revision, actor=None, reason="test")


def replay_now(backend: Backend, sample_set: SampleSet, **kwargs: Any):
    """Queue and execute a run in this process, as `manage.py replay` does."""
    run = services.start_run(
        actor=None, backend=backend, sample_set=sample_set, enqueue=False, **kwargs
    )
    return services.execute_run(run.pk)


# ---------------------------------------------------------------- rows for pages


def make_backend(team, name="kb-vllm", **fields) -> Backend:
    """A backend serving the live revision of a service of `team`."""
    revision = RevisionFactory(service__team=team, service__slug=f"svc-{name}")
    ledger_services.set_live_revision(revision.service, revision, actor=None)
    revision.refresh_from_db()
    fields.setdefault("credential_env", "LEDGER_BACKEND_KEY_KB")
    return BackendFactory(name=name, revision=revision, **fields)


def finish(run: Run, *, baseline: Run | None = None, at: dt.datetime | None = None) -> Run:
    """Finish a run the way the worker does: summary, comparison and verdict by the domain."""
    run.refresh_from_db()
    at = at or timezone.now()
    run.state = Run.State.FINISHED
    run.started_at = at - dt.timedelta(minutes=3)
    run.finished_at = at
    run.summary = summarize_run(run)
    run.baseline = baseline
    run.comparison = compare_runs(baseline, run) if baseline else {}
    verdict, reasons = decide(run.summary, run.comparison)
    run.summary["verdict_reasons"] = reasons
    run.verdict = verdict
    run.save()
    return run


def schema_failure() -> list[dict]:
    """What the checks store for a JSON Schema violation at $.answer."""
    return [
        {
            "name": "json_schema",
            "passed": False,
            "expected": "JSON valid against the schema",
            "got": "$.answer: 'four' is not of type 'integer'",
            "detail": 'output: {"answer": "four"}',
        }
    ]


def run_with_results(backend: Backend, *, ttft=120.0, failing=1, passing=3, **run_fields) -> Run:
    """A run of a fresh set: `passing` short Q&A samples that passed and `failing`
    structured-JSON samples whose JSON Schema check failed."""
    sample_set = run_fields.pop("sample_set", None) or SampleSetFactory()
    run = RunFactory(backend=backend, sample_set=sample_set, **run_fields)
    for n in range(passing):
        sample = _sample(sample_set, f"qa-{n}")
        ResultFactory(run=run, sample=sample, ttft_ms=ttft + n, tpot_ms=12.0 + n)
    for n in range(failing):
        sample = _sample(
            sample_set,
            f"json-{n}",
            category="structured_json",
            checks=[{"type": "json_schema", "schema": ANSWER_SCHEMA}],
        )
        ResultFactory(
            run=run,
            sample=sample,
            outcome=Result.Outcome.FAILED,
            error_code="check_failed",
            error_detail="failed checks: json_schema",
            failed_checks=schema_failure(),
            output='{"answer": "four"}',
            output_length=18,
            ttft_ms=ttft,
        )
    return run


def _sample(sample_set, key, **fields):
    """The set's sample of that key: runs of one set share its samples."""
    return sample_set.samples.filter(key=key).first() or SampleFactory(
        sample_set=sample_set, key=key, **fields
    )
