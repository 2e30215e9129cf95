"""Demo evidence and replay data, so the pages `make run` opens are not empty.

Everything goes through the domain verbs and each is idempotent: a report is
found again by its sha256, an unchanged sample set is not versioned again, a
backend that exists is left alone.
"""

from __future__ import annotations

from pathlib import Path

from ledger.models import Revision, Service
from ledger.services import import_loadtest_report

LOADTEST_DIR = Path(__file__).resolve().parent / "loadtest"
# (service, revision number or None for the live one, workload, file)
DEMO_REPORTS = [
    ("kb-assistant", None, "short", "vllm_c2_n20_detailed.json"),
    ("kb-assistant", None, "high_concurrency", "guidellm_rate_sweep.json"),
]


def seed_evidence() -> int:
    """Attach the demo load-test reports; returns how many were new."""
    created_count = 0
    for slug, number, workload, filename in DEMO_REPORTS:
        service = Service.objects.filter(slug=slug).select_related("live_revision").first()
        if service is None:
            continue
        revision = (
            service.live_revision
            if number is None
            else Revision.objects.filter(service=service, number=number).first()
        )
        if revision is None:
            continue
        with (LOADTEST_DIR / filename).open("rb") as raw:
            _, created = import_loadtest_report(
                revision, actor=None, workload=workload, file=raw, filename=filename
            )
        created_count += created
    return created_count


def seed_replay(service_slugs: list[str]) -> tuple[int, int]:
    """The starter sample sets and a backend for each live demo service; returns what was new."""
    from replay import services as replay_services
    from replay.management.commands.import_sample_set import starter_files, starter_name
    from replay.models import Backend

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
            # Nothing listens here in the demo: probes and runs show what an
            # unreachable backend looks like until you point it at a real one.
            base_url="http://127.0.0.1:8081",
            model_name=service.slug,
            engine=engine if engine in Backend.Engine.values else Backend.Engine.OTHER,
            concurrency_limit=4,
        )
        new_backends += 1
    return new_sets, new_backends
