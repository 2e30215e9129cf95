"""Demo replay data: the starter sample sets and a backend for each live demo service.

Through the domain verbs, idempotent: an unchanged sample set is not versioned
again, a backend that exists is left alone.
"""

from __future__ import annotations

from ledger.models import Service
from replay import outbound
from replay import services as replay_services
from replay.models import Backend
from replay.starters import starter_files, starter_name

# Nothing listens here in the demo. The demo's runs are recorded as a worker records
# them; then the backends are disabled (`unmonitor_demo_backends`): not monitored,
# rather than failing every probe and every verification against a dead port.
DEMO_BACKEND_URL = "http://127.0.0.1:8081"


def seed_replay(service_slugs: list[str]) -> tuple[int, int]:
    """The starter sample sets and a backend for each live demo service; returns what was new.

    The backends are made only where REPLAY_ALLOWED_HOSTS lets replay reach this
    machine (the development default); elsewhere they would be refused.
    """
    new_sets = 0
    for path in starter_files():
        _, created = replay_services.import_sample_set(
            actor=None,
            name=starter_name(path),
            jsonl=path.read_text(),
            description=f"Starter set shipped with the ledger ({path.stem.replace('_', ' ')}).",
        )
        new_sets += created
    new_backends = 0
    if outbound.base_url_problem(DEMO_BACKEND_URL):
        return new_sets, new_backends
    live_services = Service.objects.filter(slug__in=service_slugs, live_revision__isnull=False)
    for service in live_services.select_related("live_revision__runtime"):
        name = f"{service.slug}-live"
        if Backend.objects.filter(name=name).exists():
            continue
        engine = service.live_revision.runtime.engine
        replay_services.create_backend(
            actor=None,
            name=name,
            revision=service.live_revision,
            base_url=DEMO_BACKEND_URL,
            model_name=service.slug,
            engine=engine,
            concurrency_limit=4,
        )
        new_backends += 1
    return new_sets, new_backends


def unmonitor_demo_backends() -> int:
    """Disable the demo backends still enabled, once their runs are recorded: health then
    reads *not monitored*, nothing probes or replays a port nobody serves, and a rollback
    in the demo awaits the SRE's confirmation instead of an unknown verification. Point
    one at a real server and enable it on its page to verify for real. Returns how many."""
    disabled = 0
    for backend in Backend.objects.filter(base_url=DEMO_BACKEND_URL, enabled=True):
        disabled += replay_services.update_backend(backend, actor=None, enabled=False)
    return disabled
