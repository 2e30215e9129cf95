"""The fake engine's own metrics, named and bucketed as vLLM exposes them, and synthetic traffic.

vLLM (``vllm/v1/metrics/loggers.py``, ``PrometheusStatLogger``) labels every series
``model_name`` and ``engine`` and counts finished requests by ``finished_reason``. The
buckets below are vLLM's own, so a PromQL query written against the fake (a
``histogram_quantile`` over ``rate(..._bucket[..])``) has the resolution it would have
against a real engine.

``Traffic`` makes the server record requests it never received: ``rps`` a second, each
with the given TTFT and inter-token latency, a deterministic jitter of ``jitter_pct``
around them (so a percentile is not one value) and ``error_pct`` of them finished as
``abort``. A test steers an engine's latency as Prometheus sees it without sending it
load. Each server owns its registry: two fakes in one process do not share series.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# vllm/v1/metrics/loggers.py: histogram_time_to_first_token.
TTFT_BUCKETS = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
    1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
# vllm/v1/metrics/loggers.py: histogram_inter_token_latency (as time_per_output_token).
ITL_BUCKETS = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75,
    1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
)  # fmt: skip
# vllm/v1/metrics/loggers.py: request_latency_buckets (e2e, queue, prefill, decode).
E2E_BUCKETS = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0,
    40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip
# vLLM's FinishReason values as the counter's label reads them.
FINISHED_REASONS = ("stop", "length", "abort")
TICK_S = 0.05  # how often the traffic generator catches up with its schedule


@dataclass(frozen=True)
class Traffic:
    """What ``POST /_fake/traffic`` sets: synthetic requests the engine records as its own."""

    rps: float = 0.0
    ttft_ms: float = 0.0
    itl_ms: float = 0.0
    error_pct: float = 0.0
    tokens: int = 8  # output tokens of each request: tokens - 1 inter-token gaps
    jitter_pct: float = 10.0  # each latency varies by up to this much, deterministically

    def __post_init__(self) -> None:
        for name in ("rps", "ttft_ms", "itl_ms", "jitter_pct"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{name}: {value!r} is not a number >= 0")
        if not isinstance(self.error_pct, int | float) or not 0 <= self.error_pct <= 100:
            raise ValueError(f"error_pct: {self.error_pct!r} is not between 0 and 100")
        if not isinstance(self.tokens, int) or isinstance(self.tokens, bool) or self.tokens < 1:
            raise ValueError(f"tokens: {self.tokens!r} is not an integer >= 1")
        if self.jitter_pct >= 100:
            raise ValueError(f"jitter_pct: {self.jitter_pct!r} must stay below 100")

    @classmethod
    def from_json(cls, body: Any, current: Traffic) -> Traffic:
        """The traffic a control request asks for: unnamed fields keep their values."""
        if not isinstance(body, dict):
            raise ValueError("the body is not a JSON object")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(body) - known)
        if unknown:
            raise ValueError(f"unknown field(s) {unknown}: expected some of {sorted(known)}")
        return dataclasses.replace(current, **body)


def jitter(index: int, pct: float) -> float:
    """The factor the ``index``-th synthetic request's latencies are scaled by.

    It walks 21 evenly spaced steps across [1 - pct/100, 1 + pct/100] in an order that
    mixes low and high (8 and 21 share no factor): every window of 21 requests holds
    each step once, so the spread is the same in any rate window.
    """
    step = (index * 8) % 21 - 10  # -10 .. 10
    return 1 + pct / 100 * step / 10


class EngineMetrics:
    """One fake engine's series in a registry of its own."""

    def __init__(self, model: str) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        labels = ("model_name", "engine")
        self.ttft = Histogram(
            "vllm:time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
            labels,
            buckets=TTFT_BUCKETS,
            registry=self.registry,
        )
        self.itl = Histogram(
            "vllm:inter_token_latency_seconds",
            "Histogram of inter-token latency in seconds.",
            labels,
            buckets=ITL_BUCKETS,
            registry=self.registry,
        )
        self.e2e = Histogram(
            "vllm:e2e_request_latency_seconds",
            "Histogram of e2e request latency in seconds.",
            labels,
            buckets=E2E_BUCKETS,
            registry=self.registry,
        )
        self.success = Counter(
            "vllm:request_success",
            "Count of successfully processed requests.",
            (*labels, "finished_reason"),
            registry=self.registry,
        )
        self.model = model

    @property
    def model(self) -> str:
        return self._model

    @model.setter
    def model(self, model: str) -> None:
        # vLLM creates its labelled series at start: they are scraped, at 0, before any request.
        self._model = model
        for histogram in (self.ttft, self.itl, self.e2e):
            histogram.labels(model, "0")
        for reason in FINISHED_REASONS:
            self.success.labels(model, "0", reason)

    def observe(
        self,
        *,
        ttft_s: float | None,
        gaps_s: list[float],
        e2e_s: float,
        finished_reason: str,
        model: str | None = None,
    ) -> None:
        """One finished request: its first token (if any), each gap after it, its end."""
        labels = (model or self.model, "0")
        if ttft_s is not None:
            self.ttft.labels(*labels).observe(ttft_s)
        itl = self.itl.labels(*labels)
        for gap in gaps_s:
            itl.observe(gap)
        self.e2e.labels(*labels).observe(e2e_s)
        self.success.labels(*labels, finished_reason).inc()

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class TrafficGenerator:
    """Records ``Traffic`` into ``EngineMetrics`` on the event loop it is started on.

    The schedule is absolute: after ``t`` seconds at ``rps`` it has recorded
    ``floor(rps * t)`` requests, however late the loop woke up. A change of traffic
    starts a new schedule from that moment.
    """

    def __init__(self, metrics: EngineMetrics) -> None:
        self.metrics = metrics
        self.traffic = Traffic()
        self.recorded = 0  # synthetic requests recorded since the server started
        self.aborted = 0
        self._since = 0.0
        self._done = 0  # requests of the current schedule already recorded
        self._task: asyncio.Task | None = None

    def set(self, traffic: Traffic) -> asyncio.Task | None:
        """Switch to ``traffic`` now; returns a task the caller should keep track of."""
        loop = asyncio.get_running_loop()
        self._catch_up(loop.time())  # the old schedule up to now, at the old latency
        self.traffic = traffic
        self._since = loop.time()
        self._done = 0
        if traffic.rps > 0 and (self._task is None or self._task.done()):
            self._task = asyncio.ensure_future(self._run())
            return self._task
        return None

    def state(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self.traffic), "recorded": self.recorded}

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while self.traffic.rps > 0:
            self._catch_up(loop.time())
            await asyncio.sleep(TICK_S)

    def _catch_up(self, now: float) -> None:
        traffic = self.traffic
        if traffic.rps <= 0:
            return
        due = math.floor(traffic.rps * (now - self._since))
        while self._done < due:
            self._record_one(traffic)
            self._done += 1

    def _record_one(self, traffic: Traffic) -> None:
        index = self.recorded
        factor = jitter(index, traffic.jitter_pct)
        ttft = traffic.ttft_ms / 1000 * factor
        gaps = [traffic.itl_ms / 1000 * jitter(index + i + 1, traffic.jitter_pct)
                for i in range(traffic.tokens - 1)]  # fmt: skip
        # error_pct of every 100 requests, spread evenly: request n aborts when the
        # running share of aborts would otherwise fall behind error_pct.
        aborted = math.floor((index + 1) * traffic.error_pct / 100) > math.floor(
            index * traffic.error_pct / 100
        )
        if aborted:
            # Failed before its first token: no TTFT, no inter-token gap.
            self.metrics.observe(ttft_s=None, gaps_s=[], e2e_s=ttft, finished_reason="abort")
            self.aborted += 1
        else:
            self.metrics.observe(
                ttft_s=ttft, gaps_s=gaps, e2e_s=ttft + sum(gaps), finished_reason="stop"
            )
        self.recorded += 1
