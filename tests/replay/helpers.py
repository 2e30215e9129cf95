"""Building blocks for the replay domain tests: a backend on the fake server, sample sets."""

from __future__ import annotations

import json
from typing import Any

from ledger import services as ledger_services
from replay import services
from replay.models import Backend, SampleSet
from tests.ledger.factories import RevisionFactory
from tests.support.fake_openai import FakeOpenAI


def backend_on(server: FakeOpenAI, revision=None, **fields: Any) -> Backend:
    """A backend serving ``revision`` (a new one by default) from the fake server."""
    values: dict[str, Any] = {
        "name": f"fake-{server.port}",
        "revision": revision or RevisionFactory(),
        "base_url": server.base_url,
        "model_name": server.config.model,
        "engine": Backend.Engine.VLLM,
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
