"""Explain a request: each model call of a trace joined to what the ledger approved to
serve at that instant.

For each stored span of the trace (`ledger.ModelCallSpan`, oldest first):

- **what served it**: the registered backend answering at the span's `server.address`
  (and port, when the span says) for its model (`gen_ai.response.model`, else the
  requested one), and so its revision; the service is the gateway's `ledger.service`
  when it said, else the backend's;
- **what the ledger approved then**, from the event chain (`ledger.queries.serving_at`
  and `shares_at`): the live revision and any gray share. The call is *live* or a
  *stage* (the release, its stage and traffic share) when the revision that served it
  is one of them; *unapproved* — a loud finding, an unauthorized change candidate — when
  a registered backend served a revision the ledger had not put live or in a stage
  then; *unknown* when no registered backend answers at that address for that model;
- the gateway policy in force (the revision's, against the version the gateway said it
  applied), and whether the call failed, hit a limit, was degraded, retried or cut short;
- rollbacks open at that instant, and the revision's evidence (its newest load-test
  reports and replay runs), each with its link.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from django.db.models import Q
from django.urls import reverse

from ledger.models import LoadTestReport, ModelCallSpan, Revision, Service
from ledger.queries import ServingInterval, ServingShare, serving_at, shares_at
from releases.models import Release, RollbackEvent
from replay.models import Backend, Run

TRACE_ID = re.compile(r"^[0-9a-f]{32}$")
_LIMIT_WORDS = ("429", "rate_limit", "ratelimit", "quota", "too many requests")


class TraceIdInvalid(ValueError):
    pass


def clean_trace_id(value: object) -> str:
    """A trace id as stored (32 lower-case hex digits), or TraceIdInvalid saying so."""
    text = value.strip().lower() if isinstance(value, str) else ""
    if not TRACE_ID.match(text) or set(text) == {"0"}:
        raise TraceIdInvalid(
            f"{str(value)[:80]!r} is not a trace id: expected 32 hex digits, not all zero "
            "(as W3C traceparent and OTLP write it)."
        )
    return text


@dataclass
class Link:
    label: str
    url: str


@dataclass
class CallExplained:
    span: ModelCallSpan
    service: Service | None
    backend: Backend | None
    revision: Revision | None  # the revision the trace shows serving (its backend's)
    approved_as: str  # "live" | "stage" | "unapproved" | "unknown"
    live: ServingInterval | None
    share: ServingShare | None
    release: Release | None
    policy_in_force: str  # the revision's gateway policy label, "" without one
    findings: list[str] = field(default_factory=list)  # loud: mismatches
    happened: list[str] = field(default_factory=list)  # failed, limited, degraded, retried
    rollbacks: list[RollbackEvent] = field(default_factory=list)
    evidence: list[Link] = field(default_factory=list)


def _address(url: str) -> tuple[str, int | None]:
    parts = urlsplit(url)
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    return (parts.hostname or "").lower(), port


def _backend_for(span: ModelCallSpan, backends: list[Backend]) -> Backend | None:
    host = span.server_address.lower()
    model = span.response_model or span.request_model
    for backend in backends:
        address, port = _address(backend.base_url)
        if address != host or (span.server_port is not None and port != span.server_port):
            continue
        if not model or backend.model_name == model:
            return backend
    return None


def _happened(span: ModelCallSpan) -> list[str]:
    said = []
    error = span.error_type.lower()
    if error:
        limited = any(word in error for word in _LIMIT_WORDS)
        said.append(
            f"over a limit ({span.error_type})" if limited else f"failed ({span.error_type})"
        )
    if span.degradation:
        said.append(f"degraded: {span.degradation}")
    if span.retry_count:
        said.append(f"retried {span.retry_count} time{'s' if span.retry_count != 1 else ''}")
    if "length" in span.finish_reasons:
        said.append("cut short at the token limit (finish reason: length)")
    return said


def _evidence(revision: Revision) -> list[Link]:
    service = revision.service.slug
    links = [
        Link(
            f"{report.get_workload_display()} load test ({report.tool}, "
            f"{report.measured_at:%Y-%m-%d})",
            reverse("ledger:loadtest_detail", args=[service, revision.number, report.pk]),
        )
        for report in LoadTestReport.objects.filter(revision=revision).order_by("-measured_at")[:3]
    ]
    runs = (
        Run.objects.filter(backend__revision=revision, finished_at__isnull=False)
        .select_related("sample_set")
        .order_by("-finished_at")[:3]
    )
    links += [
        Link(
            f"replay of {run.sample_set} ({run.verdict or run.state}, {run.finished_at:%Y-%m-%d})",
            reverse("replay:run_detail", args=[run.pk]),
        )
        for run in runs
        if run.finished_at is not None
    ]
    return links


def explain_trace(trace_id: str) -> list[CallExplained]:
    """Every model call of the trace, oldest first; [] when none was received."""
    spans = list(ModelCallSpan.objects.filter(trace_id=trace_id).order_by("started_at"))
    if not spans:
        return []
    hosts = {span.server_address.lower() for span in spans if span.server_address}
    backends = [
        backend
        for backend in Backend.objects.select_related(
            "revision__service", "revision__gateway_policy"
        ).filter(Q(*[Q(base_url__icontains=host) for host in hosts], _connector=Q.OR))
        if hosts
    ]
    slugs = {span.service_slug for span in spans if span.service_slug}
    services = {s.slug: s for s in Service.objects.filter(slug__in=slugs)} if slugs else {}
    return [_explain(span, _backend_for(span, backends), services) for span in spans]


def _explain(
    span: ModelCallSpan, backend: Backend | None, services: dict[str, Service]
) -> CallExplained:
    at: dt.datetime = span.started_at
    revision = backend.revision if backend is not None else None
    service = services.get(span.service_slug) or (revision.service if revision else None)
    call = CallExplained(
        span=span,
        service=service,
        backend=backend,
        revision=revision,
        approved_as="unknown",
        live=None,
        share=None,
        release=None,
        policy_in_force="",
        happened=_happened(span),
    )
    if span.service_slug and span.service_slug not in services:
        call.findings.append(
            f"the gateway named service {span.service_slug!r}, which the ledger does not know"
        )
    if service is None:
        return call
    if revision is not None and revision.service_id != service.pk:
        call.findings.append(
            f"the gateway said {service.slug}, but the backend that answered "
            f"({backend.name if backend else '?'}) serves {revision.service.slug} {revision.label}"
        )
    call.live = serving_at(service, at)
    shares = shares_at(service, at)
    if revision is None:
        call.findings.append(
            f"no registered backend answers at {span.server_address or '(no address)'}"
            f"{f':{span.server_port}' if span.server_port else ''} for "
            f"{span.response_model or span.request_model or '(no model)'}: the ledger cannot "
            "say which revision served this call"
        )
    elif call.live is not None and call.live.revision_id == revision.pk:
        call.approved_as = "live"
    elif share := next((s for s in shares if s.revision_id == revision.pk), None):
        call.approved_as, call.share = "stage", share
    else:
        call.approved_as = "unapproved"
        live = call.live.revision.label if call.live and call.live.revision else "nothing"
        call.findings.append(
            f"{service.slug} {revision.label} answered at {at:%Y-%m-%d %H:%M:%S} UTC, but the "
            f"ledger had {live} live"
            + (f" and {', '.join(s.revision_label for s in shares)} in a stage" if shares else "")
            + " then: an unauthorized change candidate"
        )
    release_id = (call.share.cause if call.share else (call.live.cause if call.live else {})).get(
        "release"
    )
    if isinstance(release_id, int):
        call.release = Release.objects.filter(pk=release_id).first()
    if revision is not None:
        policy = revision.gateway_policy
        call.policy_in_force = policy.label if policy is not None else ""
        said = span.gateway_policy_version
        if said and call.policy_in_force and said != call.policy_in_force:
            call.findings.append(
                f"the gateway applied policy {said}; the ledger approved {call.policy_in_force} "
                f"for {revision.label}"
            )
        call.evidence = _evidence(revision)
    call.rollbacks = list(
        RollbackEvent.objects.filter(service=service, started_at__lte=at)
        .filter(Q(finished_at__isnull=True) | Q(finished_at__gte=at))
        .order_by("started_at")
    )
    return call
