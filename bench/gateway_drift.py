"""Benchmark: is the gateway doing it? The drift check of `seed_demo --scale 2000`'s live
services against one gateway's `/model/info`.

The gateway's answer is served from a loopback HTTP server: the config the ledger renders,
reported as LiteLLM 1.108.7 reports it (the key dropped, its flags added, `model_info`
padded with the ~190 keys its cost map adds to each deployment, about 6 KB a deployment,
so the body is the size a real proxy's is). Each fleet service gets one backend of its
own on its live revision first (named `bench-gw-<slug>`, kept: a rerun reuses them).

Measures, on the database DATABASE_URL names, each run inside a transaction rolled back
at the end (the database keeps only the backends):

1. the check in sync at 200 and at 2,000 services (the second run of each: the rows are
   there, as every beat after the first): wall time and queries, which must not grow;
2. the same gateway with 1 % of the deployments' weights changed: the findings opened, and
   the next check (nothing new to open);
3. the gateway unreachable (a closed port): unknown for every service.

Target: the check of 2,000 services in under 10 s, the same queries at 200 and 2,000.
Exits 1 when it misses. Seed first (bench/README.md):

    DATABASE_URL=postgres://root@127.0.0.1:5432/ledger_bench \\
        .venv/bin/python bench/gateway_drift.py
"""

from __future__ import annotations

import argparse
import http.server
import os
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TARGET_S = 10.0
# What LiteLLM's /model/info adds to each deployment's model_info beyond the file's.
COST_MAP_KEYS = 190


class Rollback(Exception):
    pass


def _setup_django() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()


def _ensure_backends() -> int:
    """One enabled backend per live fleet service (bulk; none when they are there)."""
    from ledger.models import Service
    from replay.models import Backend

    have = set(Backend.objects.filter(name__startswith="bench-gw-").values_list("name", flat=True))
    new = [
        Backend(
            name=f"bench-gw-{slug}",
            revision_id=revision,
            base_url=f"http://10.0.0.{index % 250 + 1}:8000",
            model_name=f"{slug}-served",
        )
        for index, (slug, revision) in enumerate(
            Service.objects.filter(slug__startswith="fleet-", live_revision__isnull=False)
            .order_by("slug")
            .values_list("slug", "live_revision_id")
        )
        if f"bench-gw-{slug}" not in have
    ]
    Backend.objects.bulk_create(new, batch_size=1000)
    return len(new)


def _as_litellm_reports(config: dict[str, Any]) -> list[dict[str, Any]]:
    padding = {f"cost_map_key_{i}": None for i in range(COST_MAP_KEYS)}
    reported = []
    for entry in config["model_list"]:
        params = {k: v for k, v in entry["litellm_params"].items() if k != "api_key"}
        params |= {"use_in_pass_through": False, "use_litellm_proxy": False}
        info = {"max_input_tokens": 4096, "max_output_tokens": 4096, **padding}
        reported.append(
            {
                "model_name": entry["model_name"],
                "litellm_params": params,
                "model_info": info | entry["model_info"],
            }
        )
    return reported


class _Gateway:
    """`GET /model/info` answering `body` on loopback."""

    def __init__(self) -> None:
        self.body = b'{"data": []}'
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(outer.body)))
                self.end_headers()
                self.wfile.write(outer.body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def serve(self, running: list[dict[str, Any]]) -> None:
        import orjson

        self.body = orjson.dumps({"data": running})


def _check(label: str) -> tuple[float, int, Any]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from releases.gateway.services.checks import check_gateway

    with CaptureQueriesContext(connection) as captured:
        started, started_cpu = time.perf_counter(), time.process_time()
        outcome = check_gateway()
        wall, cpu = time.perf_counter() - started, time.process_time() - started_cpu
    print(
        f"  {label:<44} {wall:6.2f} s (CPU {cpu:5.2f} s), {len(captured):3d} queries: "
        f"{outcome.state}, {outcome.services} services, {len(outcome.drifted)} drifted, "
        f"{len(outcome.opened)} findings opened"
    )
    return wall, len(captured), outcome


def _at_scale(services: int, gateway: _Gateway) -> tuple[float, int]:
    """The in-sync check with only the first `services` fleet services live."""
    from django.db import transaction

    from ledger.models import Service
    from releases.gateway.litellm import render_config
    from releases.gateway.queries import gateway as rendered_gateway

    try:
        with transaction.atomic():
            keep = list(
                Service.objects.filter(slug__startswith="fleet-")
                .order_by("slug")
                .values_list("pk", flat=True)[:services]
            )
            Service.objects.exclude(pk__in=keep).update(live_revision=None)
            gateway.serve(_as_litellm_reports(render_config(rendered_gateway().routes)))
            print(f"{services} services, {len(gateway.body) / 1e6:.1f} MB of /model/info:")
            _check("first check (rows created)")
            wall, queries, _outcome = _check("in sync (as every beat after the first)")
            raise Rollback
    except Rollback:
        pass
    return wall, queries


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", type=int, default=2000)
    args = parser.parse_args()
    _setup_django()
    from django.conf import settings
    from django.db import transaction

    from ledger.models import Service
    from releases.gateway.litellm import render_config
    from releases.gateway.queries import gateway as rendered_gateway

    fleet = Service.objects.filter(slug__startswith="fleet-", live_revision__isnull=False).count()
    if fleet < args.scale:
        print(f"{fleet} live fleet services; seed first: manage.py seed_demo --scale {args.scale}")
        return 1
    print(f"backends added: {_ensure_backends()}")
    gateway = _Gateway()
    settings.GATEWAY_URL = gateway.url
    settings.GATEWAY_API_KEY = "sk-bench"
    settings.GATEWAY_DRIFT_GRACE_SECONDS = 0

    _small_wall, small_queries = _at_scale(args.scale // 10, gateway)
    wall, queries = _at_scale(args.scale, gateway)

    try:
        with transaction.atomic():
            Service.objects.filter(live_revision__isnull=False).exclude(
                slug__startswith="fleet-"
            ).update(live_revision=None)
            running = _as_litellm_reports(render_config(rendered_gateway().routes))
            for entry in running[:: max(len(running) // (args.scale // 100), 1)]:
                entry["litellm_params"]["weight"] = 5000
            gateway.serve(running)
            print(f"{args.scale} services, 1 % of the weights changed:")
            _check("first check")
            drift_wall, drift_queries, _outcome = _check("drifted (as every beat after the first)")
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", 0))
                closed = sock.getsockname()[1]
            settings.GATEWAY_URL = f"http://127.0.0.1:{closed}"
            print(f"{args.scale} services, the gateway unreachable:")
            _check("unknown")
            raise Rollback
    except Rollback:
        pass

    ok = wall < TARGET_S and drift_wall < TARGET_S and queries == small_queries
    print(
        f"\nin sync: {wall:.2f} s at {args.scale} services, {queries} queries "
        f"({small_queries} at {args.scale // 10}); drifted: {drift_wall:.2f} s, "
        f"{drift_queries} queries. Target < {TARGET_S:.0f} s, constant queries: "
        + ("met" if ok else "MISSED")
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
