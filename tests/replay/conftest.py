"""The fake OpenAI server and helpers to replay against it (no database needed)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from replay.client import BackendConfig, ChatRequest, ReplayResult, Timeouts, replay_one
from tests.support.fake_openai import FakeOpenAI

CAPTURES = Path(__file__).resolve().parents[1] / "fixtures" / "backends" / "llama-cpp"


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


def backend_for(server: FakeOpenAI, **overrides: Any) -> BackendConfig:
    timeouts = overrides.pop("timeouts", Timeouts(connect=2, first_token=5, idle=5, total=10))
    return BackendConfig(
        base_url=server.base_url, model=server.config.model, timeouts=timeouts, **overrides
    )


def ask(
    server: FakeOpenAI, directive: str = "", *, backend: BackendConfig | None = None, **request: Any
) -> ReplayResult:
    """One streamed request whose last user message carries a fake: directive."""
    content = f"Tell me something.\nfake: {directive}" if directive else "Tell me something."
    chat = ChatRequest(messages=[{"role": "user", "content": content}], **request)
    return asyncio.run(replay_one(backend or backend_for(server), chat))
