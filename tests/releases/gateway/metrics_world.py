"""The service the gateway-metrics tests record days of: kb-assistant with tenants
support and sales, task types chat and rag, and the backends the scrapes' deployments 7
and 8 stand for."""

from __future__ import annotations

import re

from ledger import services as ledger_services
from ledger.models import Service, TaskType
from releases.gateway.litellm import deployment_id
from replay.models import Backend
from tests.ledger.factories import RevisionFactory, ServiceFactory
from tests.replay.factories import BackendFactory


def metrics_service(team) -> Service:
    service = ServiceFactory(slug="kb-assistant", team=team, tenants=["support", "sales"])
    service.task_types.set(
        [TaskType.objects.get_or_create(slug=s, name=s)[0] for s in ("chat", "rag")]
    )
    return service


def metrics_backends(service: Service) -> tuple[Backend, Backend]:
    """The live revision's backend (deployment 7 of the scrapes) and another revision's (8)."""
    live = RevisionFactory(service=service)
    ledger_services.set_live_revision(service, live, actor=None, reason="test")
    return (
        BackendFactory(name="kb-assistant-live", revision=live),
        BackendFactory(name="kb-assistant-canary", revision=RevisionFactory(service=service)),
    )


def as_ledger_names(text: str, backends) -> str:
    """The scrape's deployments 7 and 8 as this database's backends, in one pass: backend
    7 may be this database's 8."""
    ids = {
        f'"{deployment_id("kb-assistant", number)}"': f'"{deployment_id("kb-assistant", b.pk)}"'
        for number, b in zip((7, 8), backends, strict=True)
    }
    return re.sub("|".join(map(re.escape, ids)), lambda found: ids[found.group(0)], text)
