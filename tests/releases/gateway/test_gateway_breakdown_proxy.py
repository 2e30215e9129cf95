"""From a real LiteLLM proxy's /metrics to a day's breakdown rows: the whole config the
ledger renders (GATEWAY_PROMETHEUS_METRICS on) turns the callers' ledger metadata into
labels, the daily scrape (`scrape_gateway`, the beat task's verb) opens the window
before the traffic and closes it after, and each recorded row holds as many requests
as the backend says that tenant and task type sent it."""

from __future__ import annotations

import datetime as dt
import time

import pytest
from django.utils import timezone

from ledger.metrics_import import parse_exposition
from ledger.models import RunBreakdown, RunSummary, TaskType
from ledger.models.run_evidence import UNATTRIBUTED
from releases.gateway.metrics import TOTAL_REQUESTS
from releases.gateway.queries import gateway, whole_config_text
from releases.gateway.services.gateway_day import scrape_gateway
from replay.models import Backend

pytestmark = pytest.mark.django_db

# A hang guard, not a timing budget: the proxy logs a request's metrics after answering it.
METRICS_GUARD_S = 120.0


@pytest.fixture(autouse=True)
def _gateway_metrics(settings, litellm_gateway):
    settings.GATEWAY_PROMETHEUS_METRICS = True
    settings.GATEWAY_METRICS_REQUIRE_AUTH = True
    settings.GATEWAY_API_KEY = litellm_gateway.master_key


def _yesterday_at(hour: int) -> dt.datetime:
    midnight = timezone.now().astimezone(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return midnight - dt.timedelta(days=1) + dt.timedelta(hours=hour)


def _scrape(proxy, name: str):
    with proxy.client() as client:
        answer = client.get("/metrics/")
    assert answer.status_code == 200, answer.text
    return parse_exposition(answer.text, source=name)


def _counted(scrape, slug: str) -> float:
    return sum(
        value
        for labels, value in scrape.counters.get(TOTAL_REQUESTS, {}).items()
        if dict(labels).get("requested_model") == slug
    )


def _scrape_once_counted(proxy, slug: str, expected: float, name: str):
    """The scrape once the proxy has counted `expected` requests of `slug`: it records a
    request's metrics after its answer, so the count is awaited, never a pause."""
    deadline = time.monotonic() + METRICS_GUARD_S
    while True:
        scrape = _scrape(proxy, name)
        if _counted(scrape, slug) >= expected:
            return scrape
        assert time.monotonic() < deadline, f"the proxy counted {_counted(scrape, slug)}"
        time.sleep(0.2)


def _send(
    proxy, slug: str, n: int, metadata: dict | None, *, stream: bool = False, content="hello"
) -> list[int]:
    body: dict = {
        "model": slug,
        "messages": [{"role": "user", "content": content}],
        "max_tokens": 4,
        "stream": stream,
    }
    if metadata is not None:
        body["metadata"] = metadata
    codes = []
    with proxy.client() as client:
        for _ in range(n):
            answer = client.post("/v1/chat/completions", json=body)
            answer.read()
            codes.append(answer.status_code)
    return codes


def test_the_gateways_metrics_record_each_tenants_requests_as_the_backend_received_them(
    world, fake_backends, litellm_gateway, settings
):
    service = world.service
    service.task_types.set(
        [TaskType.objects.get_or_create(slug=s, name=s)[0] for s in ("chat", "rag")]
    )
    fake = fake_backends[0]
    Backend.objects.filter(pk=world.live_backend.pk).update(
        base_url=fake.base, model_name=fake.served_model
    )
    litellm_gateway.use(whole_config_text(gateway([service.slug]).routes))
    fake.reset()  # LiteLLM asks each deployment for /v1/models as it starts
    slug = service.slug
    settings.GATEWAY_URL = litellm_gateway.base_url  # the proxy's port is its latest start's
    opened = scrape_gateway(now=_yesterday_at(0))
    already = _counted(_scrape(litellm_gateway, "before"), slug)

    received = {}
    codes = _send(litellm_gateway, slug, 5, {"ledger_tenant": "support", "ledger_task_type": "rag"})
    received["support", "rag"] = fake.received()
    codes += _send(
        litellm_gateway,
        slug,
        3,
        {"ledger_tenant": "sales", "ledger_task_type": "chat"},
        stream=True,
    )
    received["sales", "chat"] = fake.received() - received["support", "rag"]
    codes += _send(litellm_gateway, slug, 2, None)
    received[UNATTRIBUTED, UNATTRIBUTED] = fake.received() - sum(received.values())
    # Last, as a backend's 429s may cool its deployment down. LiteLLM's failure hook does
    # not read the metadata labels: a failed request is the gateway's, not the caller's.
    limited = _send(
        litellm_gateway,
        slug,
        2,
        {"ledger_tenant": "support", "ledger_task_type": "chat"},
        content="fake: fault=http_error status=429",
    )
    attempts = fake.received() - sum(received.values())
    _scrape_once_counted(litellm_gateway, slug, already + 12, "after")

    closed = scrape_gateway()

    assert codes == [200] * 10
    assert received == {
        ("support", "rag"): 5,
        ("sales", "chat"): 3,
        (UNATTRIBUTED, UNATTRIBUTED): 2,
    }
    # The policy retries twice: the backend saw each limited request three times, the
    # gateway's count (and the row's) once.
    retries = service.live_revision.gateway_policy.document["retries"]["num_retries"]
    assert (limited, attempts) == ([429, 429], 2 * (1 + retries))
    assert (opened.status, closed.status, closed.refused) == ("opened", "recorded", {})
    assert closed.recorded == {slug: "recorded"}
    summary = RunSummary.objects.get(service=service, date=_yesterday_at(0).date())
    assert summary.source == "gateway"
    rows = {
        (row.tenant, row.task_type): row for row in RunBreakdown.objects.filter(summary=summary)
    }
    assert {key: row.requests for key, row in rows.items()} == {
        ("support", "rag"): 5,
        ("sales", "chat"): 3,
        (UNATTRIBUTED, UNATTRIBUTED): 2 + 2,
    }
    unattributed = rows[UNATTRIBUTED, UNATTRIBUTED]
    assert unattributed.error_counts == {"429": 2}
    assert (unattributed.errors_4xx, unattributed.rate_limit_hits) == (2, 2)
    assert {row.backend for row in rows.values()} == {world.live_backend.name}
    assert summary.requests == 12
    assert summary.error_counts == {"429": 2}
    assert summary.rate_limit_hits == 2
    assert all(row.output_tokens > 0 and row.input_tokens > 0 for row in rows.values())
    assert summary.output_tokens == sum(row.output_tokens for row in rows.values())
    # Time to first token is measured on streamed requests only (LiteLLM's own rule).
    assert rows["sales", "chat"].ttft_p95_ms is not None
    assert rows["support", "rag"].ttft_p95_ms is None
    assert summary.ttft_p95_ms is not None
    assert summary.e2e_p95_ms is not None
