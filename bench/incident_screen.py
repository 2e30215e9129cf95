"""Benchmark: the SRE's incident screen, its API and "what was serving at T", then the
incident API served by gunicorn to 64 concurrent clients.

With `seed_demo --scale 2000` plus 20,000 releases (bulk rows over the fleet, as
`releases_pages.py` seeds them), one fleet service is given what makes its screen
busiest, through the verbs: a release rolling out at its second stage with
observations, a plan in force, an open unauthorized change, a rollback waiting for
confirmation and a runbook of its own. Then, through Django's test Client (the
whole middleware and view stack, no network; settings as deployed:
`releases_pages.serve_as_deployed`), for the page (logged in as the demo
SRE), the API (a token) and `serving/?at=`: median, p95 and worst time over
`--requests` requests after a warm-up, and the SQL queries of one request.

Targets: the incident screen and its API under 30 ms median with at most 17 queries
(the API: 12, and since issue 29 five more for what the gateway should be doing, the
rendered config's four reads and the backends' names; the page adds the session, its
user and the reader's permissions);
`serving/?at=` under 20 ms; gunicorn (`--workers` processes) serving the incident API
to `--clients` concurrent clients on loopback for `--seconds` answers every request
with 200. Each client is its own caller with its own token (`bench-client-NN`): one
token shared by all would meet the API's per-user throttle (600 a minute), which is
the product refusing one caller's flood, not the server failing under load.

    DATABASE_URL=postgres://root@127.0.0.1:5432/ledger_bench \\
        .venv/bin/python bench/incident_screen.py
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import releases_pages  # noqa: E402  (the sibling benchmark's seeding)

SCREEN_MS = 30
SERVING_MS = 20
API_QUERIES = 17


def _busy_service():
    """A fleet service with a rollout in flight, a plan, a finding, a rollback to confirm
    and a runbook — what the screen reads at its busiest (made once, through the verbs)."""
    from django.contrib.auth import get_user_model
    from django.db import transaction
    from django.db.models import Count

    from ledger import services as ledger_services
    from ledger.models import Service
    from releases.governance import services
    from releases.governance.services.rollout import begin_stages
    from releases.models import Release, Stage
    from replay.models import Backend, Probe

    existing = Stage.objects.filter(
        release__state="rolling_out", release__summary="bench: busy incident screen"
    ).first()
    if existing is not None:
        return existing.release.service
    people = get_user_model().objects.in_bulk(["owner", "sre", "admin"], field_name="username")
    service = (
        Service.objects.filter(slug__startswith="fleet-", live_revision__isnull=False)
        .annotate(revisions_count=Count("revisions"))
        .filter(revisions_count__gte=3)
        .order_by("slug")
        .first()
    )
    assert service is not None, "no fleet service with three revisions: seed the fleet first"
    live = service.live_revision
    candidate = ledger_services.new_revision_from(live, actor=None, gateway_policy_version="bench")
    stages = [
        {"traffic_pct": 10, "observation_minutes": 1, "guards": {"ttft_p95_ms": 900}},
        {"traffic_pct": 50, "observation_minutes": 60, "guards": {"ttft_p95_ms": 900}},
        {"traffic_pct": 100, "observation_minutes": 60},
    ]
    release = services.create_release(
        actor=None,
        filed_by=people["owner"],
        service=service,
        to_revision=candidate,
        change_kind=Release.ChangeKind.ROUTING,
        summary="bench: busy incident screen",
        gray_stages=stages,
        rollback_kind="model",
        rollback_expected_minutes=8,
        rollback_triggers=["p95 TTFT above 900 ms"],
        path=Release.Path.EMERGENCY,
        emergency_reason="bench",
    )
    # The gates are not what this measures: the release is put in flight as rows, then
    # driven by the verbs.
    now = dt.datetime.now(dt.UTC)
    Release.objects.filter(pk=release.pk).update(
        state="rolling_out", submitted_at=now, approved_at=now, rollout_started_at=now
    )
    release.refresh_from_db()
    with transaction.atomic():
        begin_stages(release, actor=None, now=now)
    end = dt.datetime.now(dt.UTC)
    for _ in range(3):
        services.record_observation(
            release,
            actor=None,
            window_start=end - dt.timedelta(minutes=5),
            window_end=end,
            candidate={"requests": 900, "ttft_p95_ms": 500},
            baseline={"ttft_p95_ms": 480},
        )
    services.promote_release(release, actor=None)
    backend = Backend.objects.create(
        name=f"{service.slug}-bench-live",
        revision=live,
        base_url="http://10.0.0.1:8000",
        model_name=service.slug,
    )
    Probe.objects.create(
        backend=backend,
        fingerprint=live.fingerprint,
        started_at=end,
        reachable=True,
        drift=[{"what": "engine_version", "registered": "0.6.3", "reported": "0.7.0"}],
    )
    services.record_unauthorized_changes()
    services.set_playbook(
        service,
        actor=None,
        mode="slow_first_token",
        diagnosis="Gateway\nEngine",
        recovery="Roll back",
    )
    return service


def _time(client, path: str, requests: int) -> tuple[list[float], list[float], int, int]:
    """Wall and CPU times, the queries of one request, its status."""
    return releases_pages._measure(client, path, requests, {})


def _report(label: str, measured: tuple, target_ms: float, max_queries: int = 99) -> bool:
    times, cpu, queries, status = measured
    if status != 200:
        print(f"{label:<34} answered {status}, not timed")
        return False
    cuts = statistics.quantiles(times, n=20, method="inclusive")
    median, p95 = statistics.median(times) * 1000, cuts[18] * 1000
    load = os.getloadavg()[0]
    print(
        f"{label:<34} median {median:6.1f} ms  p95 {p95:6.1f} ms  max {max(times) * 1000:6.1f} ms"
        f"  (CPU {statistics.median(cpu) * 1000:5.1f} ms)  {queries:3d} queries  load {load:.1f}"
        f"  (target < {target_ms} ms)"
    )
    return median < target_ms and queries <= max_queries


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _client_tokens(clients: int) -> list[str]:
    """One signed-in caller and token per concurrent client (made once, then reused)."""
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    tokens = []
    for number in range(clients):
        user, _ = get_user_model().objects.get_or_create(username=f"bench-client-{number:02d}")
        tokens.append(Token.objects.get_or_create(user=user)[0].key)
    return tokens


async def _hammer(url: str, tokens: list[str], seconds: float) -> tuple[int, dict, list]:
    import httpx

    codes: dict[object, int] = {}
    latencies: list[float] = []
    deadline = time.monotonic() + seconds
    limits = httpx.Limits(max_connections=len(tokens), max_keepalive_connections=len(tokens))
    async with httpx.AsyncClient(timeout=30, limits=limits) as client:

        async def one(token: str) -> None:
            headers = {"Authorization": f"Token {token}"}
            while time.monotonic() < deadline:
                started = time.perf_counter()
                try:
                    response = await client.get(url, headers=headers)
                    key: object = response.status_code
                except httpx.HTTPError as error:
                    key = type(error).__name__
                latencies.append(time.perf_counter() - started)
                codes[key] = codes.get(key, 0) + 1

        await asyncio.gather(*(one(token) for token in tokens))
    return sum(codes.values()), codes, latencies


def _gunicorn(slug: str, tokens: list[str], args) -> bool:
    port = _free_port()
    # As deployed: DEBUG off (it keeps a log of every query), so a key of its own;
    # static files from the finders, as the benchmark does not run collectstatic.
    env = {
        **os.environ,
        "DEBUG": "false",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "STATIC_MANIFEST": "false",
        "LOG_LEVEL": "WARNING",
    }
    env.setdefault("ALLOWED_HOSTS", "127.0.0.1,localhost")
    process = subprocess.Popen(
        [
            str(ROOT / ".venv/bin/gunicorn"),
            "config.wsgi",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            str(args.workers),
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = f"http://127.0.0.1:{port}/api/services/{slug}/incident/"
        import httpx

        for _ in range(600):  # wait for the workers to answer (bounded: a hang, not load)
            try:
                if httpx.get(url, headers={"Authorization": f"Token {tokens[0]}"}).status_code:
                    break
            except httpx.HTTPError:
                time.sleep(0.5)
        total, codes, latencies = asyncio.run(_hammer(url, tokens, args.seconds))
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
    cuts = statistics.quantiles(latencies, n=100, method="inclusive")
    print(
        f"gunicorn, {args.workers} workers, {args.clients} clients, {args.seconds:.0f} s: "
        f"{total} requests ({total / args.seconds:.0f}/s), answers {codes}, "
        f"p50 {statistics.median(latencies) * 1000:.0f} ms, p99 {cuts[98] * 1000:.0f} ms"
    )
    return set(codes) == {200}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=int, default=2000, help="fleet services wanted (2000)")
    parser.add_argument("--releases", type=int, default=20_000, help="releases wanted (20,000)")
    parser.add_argument("--requests", type=int, default=50, help="timed requests a page (50)")
    parser.add_argument("--clients", type=int, default=64, help="concurrent clients (64)")
    parser.add_argument("--seconds", type=float, default=30, help="load duration (30)")
    parser.add_argument("--workers", type=int, default=4, help="gunicorn workers (4)")
    args = parser.parse_args()

    os.environ.setdefault("LOG_LEVEL", "WARNING")
    releases_pages._setup_django()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from rest_framework.authtoken.models import Token

    from ledger.models import Event, Service
    from releases.models import Release

    releases_pages.serve_as_deployed()
    print(f"database: {connection.vendor} {connection.settings_dict['NAME']}")
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    print(f"machine: {os.cpu_count()} CPUs, load average {load}; {args.requests} requests each")
    fleet = Service.objects.filter(slug__startswith="fleet-").count()
    if fleet < args.scale:
        print(f"{fleet} fleet services; seeding up to {args.scale} (seed_demo --scale) …")
        call_command("seed_demo", scale=args.scale, quiet_logins=True)
    releases_pages._seed_releases(args.releases)
    service = _busy_service()
    print(
        f"data: {Service.objects.count()} services, {Release.objects.count()} releases, "
        f"{Event.objects.count()} events; measured: {service.slug}"
    )
    sre = get_user_model().objects.get(username="sre")
    token, _ = Token.objects.get_or_create(user=sre)
    page = Client()
    page.force_login(sre)
    api = Client(headers={"Authorization": f"Token {token.key}"})
    at = dt.datetime.now(dt.UTC).isoformat()
    ok = True
    incident = f"/services/{service.slug}/incident/"
    ok &= _report("incident screen (page)", _time(page, incident, args.requests), SCREEN_MS)
    ok &= _report(
        "incident API", _time(api, "/api" + incident, args.requests), SCREEN_MS, API_QUERIES
    )
    serving = f"/api/services/{service.slug}/serving/?at={at.replace('+', '%2B')}"
    ok &= _report("serving/?at=", _time(api, serving, args.requests), SERVING_MS)
    tokens = _client_tokens(args.clients)
    connection.close()
    ok &= _gunicorn(service.slug, tokens, args)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
