"""Scraping backends' Prometheus endpoints into daily run evidence.

Each scrape goes through replay.outbound's guarded client (the allow-list at
every connect, no redirects, no proxies). A backend keeps one scrape: the
first of the current day (UTC). The first scrape of the next day closes that
window: the ledger records the day from the two (`record_scraped_day`, source
"scrape"), and the new scrape opens the next. A scrape later the same day
changes nothing (the day's opening scrape stays), and a window longer than a
day (the task did not run for a while) records nothing: its counts would
belong to several days.

Only a backend serving its service's live revision records the service's day;
when several do, the first by name does (the others' scrapes are kept all the
same). Engines without known metric names (Ollama, LMDeploy, …) are skipped.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass

import httpx
from asgiref.sync import async_to_sync
from django.db import transaction
from django.utils import timezone

from ledger import services as ledger_services
from ledger.metrics_import import ENGINES, ExpositionError, engine_for, parse_exposition
from ledger.models import RunSummary
from replay.client import api_root
from replay.models import Backend, MetricsScrape
from replay.outbound import DestinationPolicy, guarded_client
from replay.services.backends import CredentialMissing, backend_config

logger = logging.getLogger(__name__)

# A vLLM endpoint with several models and LoRA adapters answers a few hundred kB.
MAX_METRICS_BYTES = 8 * 1024 * 1024
# The engines whose metric names ledger.metrics_import knows.
SCRAPED_ENGINES = tuple(ENGINES)


class ScrapeFailed(Exception):
    """The endpoint could not be read; the message never holds the credential."""


@dataclass
class ScrapeOutcome:
    backend: str
    status: str  # opened | kept | recorded | gap | not_live | failed
    date: dt.date | None = None
    summary: RunSummary | None = None
    detail: str = ""

    def to_json(self) -> dict[str, object]:
        return {
            "backend": self.backend,
            "status": self.status,
            "date": self.date.isoformat() if self.date else None,
            "summary": self.summary.pk if self.summary else None,
            "detail": self.detail,
        }


async def fetch_metrics(
    base_url: str,
    *,
    credential: str | None = None,
    timeout: float = 10.0,
    destinations: DestinationPolicy | None = None,
) -> str:
    """``GET /metrics`` at the server root, as text, at most MAX_METRICS_BYTES."""
    url = f"{api_root(base_url)}/metrics"
    headers = {"Authorization": f"Bearer {credential}"} if credential else {}
    async with guarded_client(timeout=timeout, policy=destinations) as client:
        try:
            async with client.stream("GET", url, headers=headers) as response:
                if response.status_code != 200:
                    raise ScrapeFailed(f"GET {url} answered HTTP {response.status_code}")
                body = bytearray()
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > MAX_METRICS_BYTES:
                        raise ScrapeFailed(f"GET {url}: more than {MAX_METRICS_BYTES:,} bytes")
        except httpx.HTTPError as error:
            message = f"GET {url}: {type(error).__name__}: {error}"
            raise ScrapeFailed(
                message.replace(credential, "[redacted]") if credential else message
            ) from None
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ScrapeFailed(f"GET {url}: the answer is not UTF-8 text ({error.reason})") from None


def _records_for_service(backend: Backend) -> bool:
    """The first enabled backend (by name) of the service's live revision records its day."""
    service = backend.revision.service
    if service.live_revision_id != backend.revision_id:
        return False
    first = (
        Backend.objects.filter(revision_id=backend.revision_id, enabled=True)
        .order_by("name")
        .values_list("pk", flat=True)
        .first()
    )
    return first == backend.pk


def scrape_backend(backend: Backend, *, now: dt.datetime | None = None) -> ScrapeOutcome:
    """Scrape one backend now; record the day its stored scrape opened when this one closes it."""
    backend = Backend.objects.select_related("revision__service").get(pk=backend.pk)
    now = now or timezone.now()
    try:
        engine = engine_for(backend.engine)
        config = backend_config(backend)
        text = async_to_sync(fetch_metrics)(
            config.base_url, credential=config.credential, timeout=backend.connect_timeout_s + 10
        )
        source = f"{backend.name} /metrics at {now.astimezone(dt.UTC):%Y-%m-%dT%H:%M:%SZ}"
        after = parse_exposition(text, source=source)
    except (KeyError, CredentialMissing, ScrapeFailed, ExpositionError) as error:
        message = error.args[0] if isinstance(error, KeyError) else str(error)
        logger.warning("metrics scrape of %s failed: %s", backend.name, message)
        return ScrapeOutcome(backend.name, "failed", detail=message)

    today = now.astimezone(dt.UTC).date()
    with transaction.atomic():
        previous = MetricsScrape.objects.select_for_update().filter(backend=backend).first()
        opened = previous.taken_at.astimezone(dt.UTC).date() if previous else None
        if previous is not None and opened is not None and opened >= today:
            return ScrapeOutcome(backend.name, "kept", opened, detail="the day's window is open")
        outcome = ScrapeOutcome(backend.name, "opened", today)
        if previous is not None and opened is not None:
            if today - opened > dt.timedelta(days=1):
                outcome = ScrapeOutcome(
                    backend.name,
                    "gap",
                    opened,
                    detail=f"the stored scrape is from {opened}: its window spans several days",
                )
            elif not _records_for_service(backend):
                outcome = ScrapeOutcome(backend.name, "not_live", opened)
            else:
                before = parse_exposition(previous.text, source=f"{backend.name} stored scrape")
                summary, _ = ledger_services.record_scraped_day(
                    backend.revision.service,
                    actor=None,
                    date=opened,
                    engine=engine,
                    before=before,
                    after=after,
                    revision=backend.revision,
                    window={
                        "backend": backend.name,
                        "start": previous.taken_at.astimezone(dt.UTC).isoformat(),
                        "end": now.astimezone(dt.UTC).isoformat(),
                    },
                )
                outcome = ScrapeOutcome(backend.name, "recorded", opened, summary)
        MetricsScrape.objects.update_or_create(
            backend=backend, defaults={"taken_at": now, "engine": backend.engine, "text": text}
        )
    return outcome
