"""A small ledger for tests that walk the whole API: one of each thing, with the nulls
real rows have (made by the system, never run, not yet finished), and two API
tokens — an administrator and a model owner of the team that owns it all."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone
from rest_framework.authtoken.models import Token

from ledger import services
from ledger.models import Event, Service
from releases.audit.records import AuditFilters
from releases.audit.services import exports, webhooks
from releases.governance import services as release_services
from releases.guards import guard_specs, judge_observation
from releases.models import (
    Delivery,
    Drill,
    Observation,
    Release,
    Review,
    RollbackEvent,
    Stage,
)
from releases.reviews.services.periodic_reviews import sweep_reviews
from replay import services as replay_services
from replay.models import Probe, Run
from tests.factories import UserFactory
from tests.ledger.factories import (
    LicenseFactory,
    RevisionFactory,
    ServiceFactory,
    TeamFactory,
)
from tests.replay.factories import BackendFactory, ResultFactory, RunFactory

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"

# Fixed keys, so a schema loaded before any row exists can already carry the header.
TOKENS = {"admin": "a" * 40, "owner": "0" * 40}
REPORT = Path(__file__).parents[1] / "fixtures" / "loadtest" / "vllm" / "vllm_c2_n20_detailed.json"
SAMPLES = (
    '{"key": "capital-fr", "category": "short_qa", "messages": [{"role": "user", '
    '"content": "Capital of France?"}], "checks": [{"type": "contains", "value": "Paris"}]}\n'
)


def seed_api_data() -> dict[str, object]:
    admin = UserFactory(username="admin", is_superuser=True, is_staff=True)
    owner = UserFactory(username="owner", roles=["model_owner"])
    for user in (admin, owner):
        Token.objects.create(user=user, key=TOKENS[user.username])
    team = TeamFactory(slug="kb-team", name="Knowledge base team", members=[owner])
    LicenseFactory()
    service = ServiceFactory(slug="kb-assistant", team=team, tier="production")
    ServiceFactory(slug="sql-agent", team=team)  # no live revision: live_revision is null
    revision = RevisionFactory(service=service)  # created by the system: created_by is null
    services.declare_capability(revision, actor=None, kind="context_length", value=8192)
    services.set_live_revision(service, revision, actor=None)
    # v1 is the name the revision carried (no document); v2 a recorded document.
    services.create_gateway_policy(
        service, actor=None, document={"limits": {"max_input_tokens": 8192, "timeout_s": 60}}
    )
    report, _ = services.import_loadtest_report(
        revision,
        actor=None,
        workload="short",
        file=SimpleUploadedFile(REPORT.name, REPORT.read_bytes()),
        filename=REPORT.name,
        # The file measured gemma-3-270m on llama.cpp: the response then holds a mismatch.
        accept_mismatch="the schema test needs a report with a recorded mismatch",
    )
    sample_set, _ = replay_services.import_sample_set(actor=None, name="kb-smoke", jsonl=SAMPLES)
    backend = BackendFactory(name="kb-backend", revision=revision)
    Probe.objects.create(
        backend=backend, fingerprint=revision.fingerprint, started_at=timezone.now()
    )
    RunFactory(sample_set=sample_set, backend=backend)  # queued: never started
    finished = RunFactory(
        sample_set=sample_set,
        backend=backend,
        state=Run.State.FINISHED,
        verdict=Run.Verdict.PASSED,
        started_at=timezone.now() - dt.timedelta(minutes=2),
        finished_at=timezone.now(),
    )
    ResultFactory(run=finished, sample=sample_set.samples.get(), ttft_ms=None, tpot_ms=None)
    # A scraped day as llama.cpp's metrics give it: no request count, no percentiles.
    run_summary, _ = services.record_run_summary(
        service,
        actor=None,
        date=timezone.now().date() - dt.timedelta(days=1),
        source="scrape",
        ttft_p95_ms=None,
    )
    # The gateway's day with a breakdown: a row the gateway could not attribute, without
    # latencies (nulls), beside one that has them.
    services.record_run_summary(
        service,
        actor=None,
        date=timezone.now().date() - dt.timedelta(days=1),
        breakdown=[
            {"tenant": "unattributed", "task_type": "unattributed", "requests": 40},
            {
                "tenant": "unattributed",
                "task_type": "unattributed",
                "backend": "kb-backend",
                "requests": 60,
                "error_counts": {"503": 1},
                "latency": {"ttft_p50_ms": 120.0, "ttft_p95_ms": 400.0},
            },
        ],
    )
    # A price recorded by the system, with no note: its recorder is null.
    price_sheet = services.record_price_sheet(
        actor=None,
        gpu_model="H100-80GB",
        price_per_gpu_hour="2.4500",
        currency="USD",
        effective_from=timezone.now().date(),
    )
    # A draft release of a candidate: no sign-off, no rollback target, no planned start yet.
    candidate = RevisionFactory(service=service)
    release = release_services.create_release(
        actor=owner,
        service=service,
        to_revision=candidate,
        change_kind="model_upgrade",
        summary="A candidate",
    )
    # Rows as a rollout and a rollback leave them, with their nulls: a stage nobody started
    # by hand, an observation the system posted, a rollback nobody recorded or finished.
    now = timezone.now()
    Release.objects.filter(pk=release.pk).update(
        state="rolling_out", submitted_at=now, approved_at=now, rollout_started_at=now
    )
    stage = Stage.objects.create(
        release=release,
        number=1,
        traffic_pct=5,
        observation_minutes=60,
        guards=guard_specs({"ttft_p95_ms": 800}),
        state="held",
        state_reason="the latest observation is inconclusive: a person decides",
        started_at=now,
    )
    verdict, results = judge_observation(
        stage.guards, candidate={"requests": 12}, baseline={"ttft_p95_ms": 640}
    )
    Observation.objects.create(
        stage=stage,
        window_start=now - dt.timedelta(minutes=10),
        window_end=now,
        candidate={"requests": 12},
        baseline={"ttft_p95_ms": 640},
        verdict=verdict,
        guard_results=results,
        created_at=now,
    )
    RollbackEvent.objects.create(
        service=service,
        to_revision=revision,
        reason="the schema test needs a rollback",
        started_at=now,
        state="awaiting_confirmation",
    )
    # An export still queued (no file, no digest, no chain head yet), and a webhook
    # subscription with one delivery not yet attempted (no response, no latency).
    export = exports.request_export(actor=admin, format="bundle", filters=AuditFilters())
    subscription = webhooks.create_subscription(
        actor=admin,
        name="Change board",
        url="http://127.0.0.1:9/hooks",
        event_types=["release.submitted"],
    )
    Delivery.objects.create(
        subscription=subscription,
        event=Event.objects.order_by("-sequence").first(),
        event_type="release.submitted",
        message_id="msg_seed",
    )
    # A review the sweep raised (the service's cadence is due), nobody to assign it to: no
    # platform SRE exists here, so its assignee is null, and nothing answered yet.
    Service.objects.filter(pk=service.pk).update(
        created_at=timezone.now() - dt.timedelta(days=service.review_cadence_days + 1)
    )
    sweep_reviews(service_ids=[service.pk])
    review = Review.objects.get(service=service)
    # A drill the system planned, never run: no window, no revision, no results.
    drill = Drill.objects.create(
        name="Month-end close",
        mix=[{"task_type": "chat", "sample_set": 1, "weight": 1.0}],
        arrival={"type": "constant", "rate": 5.0, "duration_s": 60},
        bounds={"chat": {"ttft_p95_ms": 800.0, "e2e_p95_ms": 4000.0}},
        seed=7,
        signers=["platform_sre", "business_owner"],
    )
    drill.services.set([service])
    # A trace with one model call, answered by kb-backend (its address and model).
    from ledger.traces.otlp import Extracted, SpanFacts
    from ledger.traces.services import record_spans

    record_spans(
        Extracted(
            spans=[
                SpanFacts(
                    trace_id=TRACE_ID,
                    span_id="00f067aa0ba902b7",
                    parent_span_id="",
                    name="chat",
                    started_at=timezone.now(),
                    duration_ms=840.0,
                    operation="chat",
                    request_model=backend.model_name,
                    server_address="127.0.0.1",
                    server_port=9,
                    service_slug="kb-assistant",
                )
            ]
        )
    )
    return {
        "admin": admin,
        "owner": owner,
        "revision": revision,
        "report": report,
        "run_summary": run_summary,
        "price_sheet": price_sheet,
        "release": release,
        "export": export,
        "subscription": subscription,
        "review": review,
        "drill": drill,
    }


def served_schema() -> dict:
    """What /api/schema/ serves (test_api_fuzz checks it is), built without a request:
    the view needs an authenticated caller, hence the database, which test
    collection may not touch."""
    import json

    from drf_spectacular.generators import SchemaGenerator
    from drf_spectacular.renderers import OpenApiJsonRenderer

    document = SchemaGenerator().get_schema(request=None, public=True)
    return json.loads(OpenApiJsonRenderer().render(document))
