"""Benchmark: rendering the whole gateway (every live service's LiteLLM config) at
`seed_demo --scale 2000`, and recording it after a change of routing.

The fleet services of `seed_demo --scale` have live revisions but no backends, so the
gateway would route none of them. Once, in bulk rows, this gives each fleet service's
live revision an enabled backend and every fourth service a release rolling out at its
first stage (10 %) to its newest revision, which gets a backend of its own: about 2,000
routes, a quarter of them split between two sides. Then, in this process:

- `gateway()`, `render_config()` and `render_yaml()` (what `GET /api/gateway/litellm/`
  does), timed apart and together: median and worst over `--repeat` runs after a
  warm-up, and the SQL queries of one run, for the first 20 routed services and for
  all of them, side by side;
- the same rendering of 2,000 routes made up in memory, each with the full policy
  document of issue 29 (limits, tenants, fallbacks, retries), which the seeded fleet's
  unknown policy versions do not have: the renderer's cost when every field is set;
- `record_config_changes` (the `record_gateway_config` task) for one service and for
  every fleet service at once, inside a transaction rolled back: its queries and time.

Target: the whole gateway under 500 ms, and the same number of queries at 20 services
as at 2,000. Exits 1 when it misses either.

    DATABASE_URL=postgres://root@127.0.0.1:5432/ledger_bench \\
        .venv/bin/python bench/gateway_render.py
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import sys
import time
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET_MS = 500.0
POLICY = {
    "limits": {
        "max_input_tokens": 8192,
        "max_output_tokens": 1024,
        "timeout_s": 60,
        "stream_timeout_s": 30,
        "max_parallel_requests": 64,
    },
    "tenants": [
        {"name": "support", "rpm": 600, "tpm": 200000, "max_parallel_requests": 16},
        {"name": "sales", "rpm": 300, "tpm": 100000},
    ],
    "fallbacks": [{"on": "context_window", "to_service": "kb-long"}],
    "retries": {"num_retries": 2, "allowed_fails": 3, "cooldown_s": 30},
    "egress": {"external_fallback_allowed": False},
}


def _setup_django() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("STATIC_MANIFEST", "false")
    import django

    django.setup()


def _route_the_fleet() -> None:
    """Bulk rows, once: a backend per fleet live revision; every fourth fleet service a
    release rolling out at 10 % to its newest revision, with a backend of its own."""
    from django.contrib.auth import get_user_model
    from django.db import transaction
    from django.utils import timezone

    from ledger.models import Revision, Service
    from releases.models import Release, Stage
    from replay.models import Backend

    fleet = list(
        Service.objects.filter(slug__startswith="fleet-", live_revision__isnull=False)
        .order_by("slug")
        .values_list("pk", "slug", "live_revision_id")
    )
    have = set(Backend.objects.filter(name__endswith="-gw-live").values_list("name", flat=True))
    wanted = [row for row in fleet if f"{row[1]}-gw-live" not in have]
    if not wanted:
        return
    print(f"routing {len(wanted)} fleet services (backends, rollouts) …")
    newest: dict[int, int] = {}
    for service_id, revision_id in Revision.objects.order_by("service_id", "-number").values_list(
        "service_id", "pk"
    ):
        newest.setdefault(service_id, revision_id)
    filer = get_user_model().objects.get(username="owner")
    now = timezone.now()
    backends, releases = [], []
    for n, (service_id, slug, live_id) in enumerate(wanted):
        backends.append(_backend(f"{slug}-gw-live", live_id, n))
        candidate = newest[service_id]
        if n % 4 == 0 and candidate != live_id:
            backends.append(_backend(f"{slug}-gw-canary", candidate, n))
            releases.append(
                Release(
                    service_id=service_id,
                    from_revision_id=live_id,
                    to_revision_id=candidate,
                    change_kind="model_upgrade",
                    summary="gateway bench rollout",
                    state=Release.State.ROLLING_OUT,
                    filed_by=filer,
                    submitted_at=now,
                    rollout_started_at=now,
                )
            )
    with transaction.atomic():
        Backend.objects.bulk_create(backends, batch_size=2000)
        created = Release.objects.bulk_create(releases, batch_size=2000)
        Stage.objects.bulk_create(
            [
                stage
                for release in created
                for stage in (
                    Stage(
                        release=release,
                        number=1,
                        traffic_pct=Decimal(10),
                        observation_minutes=30,
                        state=Stage.State.OBSERVING,
                        started_at=now - dt.timedelta(minutes=5),
                    ),
                    Stage(
                        release=release, number=2, traffic_pct=Decimal(100), observation_minutes=30
                    ),
                )
            ],
            batch_size=2000,
        )


def _backend(name: str, revision_id: int, n: int):
    from replay.models import Backend

    return Backend(
        name=name,
        revision_id=revision_id,
        base_url=f"http://10.{n // 250 % 250}.{n % 250}.{2 if name.endswith('canary') else 1}:8000",
        model_name="served-model",
    )


def _time(fn, repeat: int) -> tuple[float, float, int]:
    """Median and worst milliseconds over `repeat` runs after a warm-up; queries of one."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    fn()
    with CaptureQueriesContext(connection) as captured:
        fn()
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times), max(times), len(captured)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=int, default=2000, help="fleet services wanted (2000)")
    parser.add_argument("--repeat", type=int, default=15, help="timed runs of each (15)")
    args = parser.parse_args()

    _setup_django()
    from django.core.management import call_command
    from django.db import connection, transaction

    from ledger.models import Service
    from releases.gateway import litellm
    from releases.gateway.queries import gateway
    from releases.gateway.services.config_record import record_config_changes

    print(f"database: {connection.vendor} {connection.settings_dict['NAME']}")
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    print(f"machine: {os.cpu_count()} CPUs, load average {load}; {args.repeat} runs each")
    if Service.objects.filter(slug__startswith="fleet-").count() < args.scale:
        print(f"seeding the fleet to {args.scale} services (minutes; see bench/README.md) …")
        call_command("seed_demo", scale=args.scale)
    _route_the_fleet()

    everything = gateway()
    slugs = [route.slug for route in everything.routes]
    split = sum(1 for r in everything.routes if len({d.weight for d in r.deployments}) > 1)
    print(
        f"{len(slugs)} routed services ({split} rolling out), {len(everything.unrouted)} unrouted; "
        f"config {len(litellm.render_yaml(litellm.render_config(everything.routes))):,} bytes"
    )

    ok = True
    rows = []
    for label, wanted in (("20 services", slugs[:20]), (f"{len(slugs)} services", None)):
        routes = gateway(wanted).routes
        config = litellm.render_config(routes)
        read = _time(lambda wanted=wanted: gateway(wanted), args.repeat)
        render = _time(lambda routes=routes: litellm.render_config(routes), args.repeat)
        dump = _time(lambda config=config: litellm.render_yaml(config), args.repeat)
        whole = _time(
            lambda wanted=wanted: litellm.config_sha256(
                litellm.render_yaml(litellm.render_config(gateway(wanted).routes))
            ),
            args.repeat,
        )
        rows.append((label, read, render, dump, whole))

    print()
    print(f"{'':24}{rows[0][0]:>24}{rows[1][0]:>24}")
    names = ["gateway() (queries)", "render_config", "render_yaml", "all three + sha256"]
    for index, name in enumerate(names, start=1):
        cells = [
            f"{row[index][0]:7.1f} ms (max {row[index][1]:6.1f})"
            + (f" {row[index][2]}q" if index in (1, 4) else "   ")
            for row in rows
        ]
        print(f"{name:24}{cells[0]:>24}{cells[1]:>24}")
    queries_small, queries_all = rows[0][4][2], rows[1][4][2]
    whole_ms = rows[1][4][0]
    if whole_ms >= TARGET_MS:
        print(f"MISSED: the whole gateway took {whole_ms:.0f} ms (target < {TARGET_MS:.0f} ms)")
        ok = False
    if queries_all != queries_small:
        print(f"MISSED: {queries_small} queries at 20 services, {queries_all} at {len(slugs)}")
        ok = False

    made_up = [
        litellm.ServiceRoute(
            f"svc-{n:04d}",
            [
                litellm.Deployment(2 * n, f"http://10.0.{n % 250}.1:8000/v1", "m", None, 9_000),
                litellm.Deployment(2 * n + 1, f"http://10.0.{n % 250}.2:8000/v1", "m", None, 1_000),
            ],
            POLICY,
        )
        for n in range(len(slugs))
    ]
    full = _time(
        lambda: litellm.config_sha256(litellm.render_yaml(litellm.render_config(made_up))),
        args.repeat,
    )
    print(
        f"\n{len(made_up)} made-up routes, two backends each, the full policy on each: "
        f"render_config + render_yaml + sha256 {full[0]:.1f} ms (max {full[1]:.1f})"
    )

    fleet_ids = list(Service.objects.filter(slug__in=slugs).values_list("pk", flat=True))
    for label, ids in (("1 service", fleet_ids[:1]), (f"{len(fleet_ids)} services", fleet_ids)):
        times, counts = [], []
        for _ in range(3):
            with transaction.atomic():
                from django.test.utils import CaptureQueriesContext

                with CaptureQueriesContext(connection) as captured:
                    started = time.perf_counter()
                    recorded = record_config_changes((pk, 0) for pk in ids)
                    times.append((time.perf_counter() - started) * 1000)
                counts.append((len(captured), len(recorded)))
                transaction.set_rollback(True)
        print(
            f"record_gateway_config for {label}: {statistics.median(times):.1f} ms "
            f"(max {max(times):.1f}), {counts[0][0]} queries, {counts[0][1]} Events "
            "(rolled back)"
        )

    print("\nOK" if ok else "\nMISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
