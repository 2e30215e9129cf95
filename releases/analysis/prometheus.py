"""Prometheus' HTTP API, as the analysis asks it: instant queries (`/api/v1/query`) at one
evaluation time, sent together, each answer kept with its sha256.

The connection goes through replay's outbound guard (`replay.outbound.guarded_client`:
REPLAY_ALLOWED_HOSTS at every connection, no redirects, no proxies), with
PROMETHEUS_BEARER_TOKEN when set. A refused or failed connection, a timeout, an answer
other than 200 with Prometheus' JSON, a `status` other than success or a result that
is not an instant vector is `PrometheusUnreadable` with the reason: the tick records an
error observation, never a pass.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
from dataclasses import dataclass
from typing import Any

import httpx
import orjson
from django.conf import settings

from replay.outbound import DestinationPolicy, guarded_client

QUERY_PATH = "/api/v1/query"
# An instant vector of a few thousand series is well under this; more is refused.
MAX_ANSWER_BYTES = 32 * 1024 * 1024
# Queries in flight at once: Prometheus evaluates them in parallel up to its own limit.
CONCURRENCY = 8


class PrometheusUnreadable(Exception):
    pass


@dataclass(frozen=True)
class Answer:
    promql: str
    samples: list[dict[str, Any]]
    sha256: str  # of the raw answer


def policy() -> DestinationPolicy:
    return DestinationPolicy(
        settings.REPLAY_ALLOWED_HOSTS, setting="REPLAY_ALLOWED_HOSTS", purpose="the analysis"
    )


def _headers() -> dict[str, str]:
    token = settings.PROMETHEUS_BEARER_TOKEN
    return {"Authorization": f"Bearer {token}"} if token else {}


async def _one(
    client: httpx.AsyncClient, gate: asyncio.Semaphore, base: str, promql: str, at: dt.datetime
) -> Answer:
    url = base + QUERY_PATH
    async with gate:
        try:
            response = await client.post(
                url,
                data={"query": promql, "time": f"{at.timestamp():.3f}"},
                headers=_headers(),
            )
        except httpx.HTTPError as error:
            raise PrometheusUnreadable(f"{url}: {type(error).__name__}: {error}"[:500]) from error
    content = response.content
    if len(content) > MAX_ANSWER_BYTES:
        raise PrometheusUnreadable(f"{url} answered more than {MAX_ANSWER_BYTES} bytes")
    try:
        body = orjson.loads(content)
    except orjson.JSONDecodeError as error:
        raise PrometheusUnreadable(
            f"{url} answered HTTP {response.status_code} without Prometheus' JSON"
        ) from error
    if not isinstance(body, dict) or body.get("status") != "success":
        reason = body.get("error", "") if isinstance(body, dict) else ""
        raise PrometheusUnreadable(
            f"Prometheus refused {promql!r} (HTTP {response.status_code}): {reason}"[:500]
        )
    data = body.get("data")
    if not isinstance(data, dict) or data.get("resultType") != "vector":
        raise PrometheusUnreadable(f"Prometheus did not answer an instant vector for {promql!r}")
    samples = data.get("result")
    if not isinstance(samples, list) or not all(
        isinstance(s, dict) and isinstance(s.get("value"), list) and len(s["value"]) == 2
        for s in samples
    ):
        raise PrometheusUnreadable(
            f"Prometheus answered samples of an unknown shape for {promql!r}"
        )
    return Answer(promql, samples, hashlib.sha256(content).hexdigest())


async def _all(
    base: str, queries: list[str], at: dt.datetime
) -> list[Answer | PrometheusUnreadable]:
    gate = asyncio.Semaphore(CONCURRENCY)
    timeout = httpx.Timeout(settings.PROMETHEUS_TIMEOUT_SECONDS)
    async with guarded_client(timeout=timeout, policy=policy()) as client:
        results = await asyncio.gather(
            *(_one(client, gate, base, promql, at) for promql in queries), return_exceptions=True
        )
    answers: list[Answer | PrometheusUnreadable] = []
    for result in results:
        if isinstance(result, Answer | PrometheusUnreadable):
            answers.append(result)
        elif isinstance(result, Exception):  # the guard's refusal, and the unexpected
            answers.append(PrometheusUnreadable(f"{type(result).__name__}: {result}"[:500]))
        else:
            raise result
    return answers


def query_all(queries: list[str], *, at: dt.datetime) -> dict[str, Answer | PrometheusUnreadable]:
    """Each query's answer evaluated at `at`, or why it could not be read."""
    if not queries:
        return {}
    base = settings.PROMETHEUS_URL
    if not base:
        unset = PrometheusUnreadable("PROMETHEUS_URL is not set: the analysis cannot measure")
        return dict.fromkeys(queries, unset)
    unique = list(dict.fromkeys(queries))
    return dict(zip(unique, asyncio.run(_all(base, unique, at)), strict=True))
