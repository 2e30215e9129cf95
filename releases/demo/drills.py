"""Demo drills: last month-end's close rehearsed on kb-assistant and dataagent-sql and
concluded, and the next one planned.

Nothing listens on the demo backends, so the concluded drill's run is the demo's story,
not a measurement: one record per arrival of its real plan (the same seeded schedule
`run_drill` would send), with latencies that grow once a service's share of the ramp
passes what it holds; dataagent-sql's SQL slows and sheds past 30 requests/s, so sql
misses its bounds in the last stage and the knee is the stage before. The records are
judged by the drills' own judge and recorded through the verbs, as a run's would be.
Idempotent: nothing is added when a demo drill exists.
"""

from __future__ import annotations

import datetime as dt
import random

from django.contrib.auth import get_user_model
from django.utils import timezone

from releases.drills.judge import judge
from releases.drills.run import parts_of
from releases.drills.services import conclude_drill, plan_drill, record_drill_results
from releases.models import Drill
from replay.openloop.shards import build_plan
from replay.openloop.summary import RequestRecord

CLOSE = "Month-end close"
MIX = [
    {"task_type": "chat", "sample_set": "starter-short-qa", "weight": 45},
    {"task_type": "rag", "sample_set": "starter-long-context", "weight": 25},
    {"task_type": "sql", "sample_set": "starter-structured-json", "weight": 20},
    {"task_type": "tool-use", "sample_set": "starter-tool-call", "weight": 10},
]
BOUNDS = {
    "chat": {"ttft_p95_ms": 800, "e2e_p95_ms": 6000},
    "rag": {"ttft_p95_ms": 1500, "e2e_p95_ms": 12000},
    "sql": {"ttft_p95_ms": 1200, "e2e_p95_ms": 8000},
    "tool-use": {"ttft_p95_ms": 1500, "e2e_p95_ms": 9000},
}
RAMP = {
    "type": "ramp",
    "stages": [
        {"duration_s": 60, "rate": 10},
        {"duration_s": 120, "rate": 30},
        {"duration_s": 90, "rate": 40},
    ],
}
# (first token at no load in ms, output tokens, ms a token, the drill rate it holds)
STORY = {
    "chat": (180, 120, 18, 36),
    "rag": (520, 220, 20, 36),
    "sql": (380, 90, 22, 30),
    "tool-use": (420, 60, 22, 30),
}


def _month_ends(today: dt.date) -> tuple[dt.datetime, dt.datetime]:
    """06:00 UTC on the last day of last month and of this month."""
    first = today.replace(day=1)
    following = (first + dt.timedelta(days=32)).replace(day=1)

    def at_six(day: dt.date) -> dt.datetime:
        return dt.datetime.combine(day, dt.time(6), tzinfo=dt.UTC)

    return at_six(first - dt.timedelta(days=1)), at_six(following - dt.timedelta(days=1))


def _story_records(drill: Drill) -> list[RequestRecord]:
    """The run the demo tells, one record per arrival of the drill's own plan."""
    rng = random.Random(drill.seed)  # noqa: S311 - demo noise, not security
    records = []
    for part in parts_of(drill, enabled_only=False):
        plan = build_plan(part.spec)
        rates = [stage.rate for stage in plan.profile.stages]
        for arrival in plan.arrivals():
            base, tokens, per_token, holds = STORY[arrival.task_type]
            rate = rates[arrival.stage] / part.share  # the drill's, not the part's share
            over = max(0.0, rate - holds) / holds
            ttft = base * (1 + 6 * over) * rng.lognormvariate(0, 0.2)
            shed = arrival.task_type == "sql" and over > 0 and rng.random() < 0.03
            e2e = ttft + tokens * per_token * rng.lognormvariate(0, 0.1)
            lateness = rng.uniform(0.2, 1.8)
            records.append(
                RequestRecord(
                    index=arrival.index,
                    planned_ms=arrival.offset_s * 1000,
                    started_ms=arrival.offset_s * 1000 + lateness,
                    task_type=arrival.task_type,
                    stage=arrival.stage,
                    sample=arrival.sample_key,
                    start="on_time",
                    outcome="http_503" if shed else "ok",
                    ttft_ms=None if shed else round(ttft, 1),
                    e2e_ms=None if shed else round(e2e, 1),
                    tpot_ms=None if shed else round(per_token, 1),
                    request_id=f"demo-{drill.seed}-{arrival.index}",
                )
            )
    return records


def seed_drills() -> int:
    """The two demo drills; returns how many were added."""
    if Drill.objects.filter(name__startswith=CLOSE).exists():
        return 0
    users = {
        u.username: u for u in get_user_model().objects.filter(username__in=["sre", "business"])
    }
    sre, business = users.get("sre"), users.get("business")
    if sre is None or business is None:
        return 0
    today = timezone.now().date()
    last, following = _month_ends(today)
    common = {
        "services": ["kb-assistant", "dataagent-sql"],
        "mix": MIX,
        "arrival": RAMP,
        "bounds": BOUNDS,
        "in_flight_ceiling": 800,
    }
    done = plan_drill(
        {
            **common,
            "name": f"{CLOSE}, {last:%B %Y}",
            "business_event": "Finance closes the books: reports, reconciliations, questions",
            "window": {
                "starts_at": last.isoformat(),
                "ends_at": (last + dt.timedelta(hours=14)).isoformat(),
            },
            "capacity": {
                "extra_replicas": 2,
                "pool": "h100-burst",
                "prewarm_pools": ["h100-burst"],
                "owner": "sre",
                "reclaim_by": (last + dt.timedelta(hours=20)).isoformat(),
            },
            "seed": 20261130,
        },
        actor=sre,
    )
    results = judge(_story_records(done), done.arrival, done.bounds, {})
    results.update(
        workers=2,
        worker_names=["demo-worker-1", "demo-worker-2"],
        shards=2,
        missing_shards={},
        reruns=0,
        seed=done.seed,
        demo=True,
    )
    done = record_drill_results(done, results, actor=sre)
    conclude_drill(
        done,
        {
            "protected": ["chat", "rag", "tool-use"],
            "degraded": ["sql"],
            "failure_message_seen": True,
            "reclaimed_at": (last + dt.timedelta(hours=16)).isoformat(),
            "reclaimed_by": "sre",
            "throttles": "field-service at 60 requests a minute on kb-assistant during the close",
        },
        actor=business,
    )
    plan_drill(
        {
            **common,
            "name": f"{CLOSE}, {following:%B %Y}",
            "business_event": "Finance closes the books",
            "window": {
                "starts_at": following.isoformat(),
                "ends_at": (following + dt.timedelta(hours=14)).isoformat(),
            },
            "capacity": {
                "extra_replicas": 3,
                "pool": "h100-burst",
                "owner": "sre",
                "reclaim_by": (following + dt.timedelta(hours=20)).isoformat(),
            },
            "seed": 20261231,
        },
        actor=sre,
    )
    return 2
