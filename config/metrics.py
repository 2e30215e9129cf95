"""GET /metrics: the ledger's own metrics for Prometheus (lib/metrics.py).

No login: Prometheus sends no session. It answers loopback clients (a sidecar, an
SSH tunnel, the machine's own agent) and others that present METRICS_TOKEN as a
bearer token; everyone else gets 403. A request that came through a proxy (it
carries X-Forwarded-For) needs the token even from loopback: behind a proxy on the
same machine every client would look like loopback.
"""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from lib import metrics


@never_cache
@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    if not metrics.may_scrape(
        request.META.get("REMOTE_ADDR"),
        request.headers.get("Authorization"),
        settings.METRICS_TOKEN,
        forwarded="x-forwarded-for" in request.headers,
    ):
        return HttpResponse(
            "Metrics answer loopback clients, or Authorization: Bearer <METRICS_TOKEN>.\n",
            status=403,
            content_type="text/plain; charset=utf-8",
        )
    return HttpResponse(metrics.exposition(with_gauges=True), content_type=CONTENT_TYPE_LATEST)
