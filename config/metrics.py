"""GET /metrics: the ledger's own metrics for Prometheus (lib/metrics.py).

No login: Prometheus sends no session. It answers loopback clients (a sidecar, an
SSH tunnel, the machine's own agent) and others that present METRICS_TOKEN as a
bearer token; everyone else gets 403. A request that came through a proxy (it
carries Forwarded, Via, X-Real-IP or any X-Forwarded-* header) needs the token even
from loopback: behind a proxy on the same machine every client would look like
loopback. METRICS_LOOPBACK_WITHOUT_TOKEN=false asks the token of loopback too.
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
        request.META,
        settings.METRICS_TOKEN,
        loopback_without_token=settings.METRICS_LOOPBACK_WITHOUT_TOKEN,
    ):
        return HttpResponse(
            metrics.FORBIDDEN_TEXT, status=403, content_type="text/plain; charset=utf-8"
        )
    return HttpResponse(metrics.exposition(with_gauges=True), content_type=CONTENT_TYPE_LATEST)
