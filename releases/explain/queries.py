"""Explain a request: each model call of a trace joined to what the ledger approved to
serve at that instant.

For each stored span of the trace (`ledger.ModelCallSpan`, oldest first):

- **what served it**: the registered backend answering at the span's `server.address`
  (and port, when the span says) for its model (`gen_ai.response.model`, else the
  requested one), and so its revision; the service is the gateway's `ledger.service`
  when it said, else the backend's;
- **what the ledger approved then**, from the event chain (each service's
  `serving_history` and `share_history`, read once): the live revision and any gray
  share at the call's instant. The call is *live* or a
  *stage* (the release, its stage and traffic share) when the revision that served it
  is one of them; *unapproved* — a loud finding, an unauthorized change candidate — when
  a registered backend served a revision the ledger had not put live or in a stage
  then; *unknown* when no registered backend answers at that address for that model;
- the gateway policy in force (the revision's, against the version the gateway said it
  applied), and whether the call failed, hit a limit, was degraded, retried or cut short;
- rollbacks and unauthorized changes (the probes' drift records) open at that instant,
  and the revision's evidence (its newest load-test
  reports and replay runs), each with its link.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from django.db.models import Q
from django.urls import reverse

from ledger.models import LoadTestReport, ModelCallSpan, Revision, Service
from ledger.queries import ServingInterval, ServingShare, serving_history, share_history
from ledger.traces.otlp import TRACE_ID, is_limit_error
from releases.models import Release, RollbackEvent, UnauthorizedChange
from replay.models import Backend, Run


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
    # Unauthorized changes (probes' drift records) open at that instant: an incident.
    unauthorized: list[UnauthorizedChange] = field(default_factory=list)
    evidence: list[Link] = field(default_factory=list)
    release_id: int | None = None


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
    if span.error_type:
        said.append(
            f"over a limit ({span.error_type})"
            if is_limit_error(span.error_type)
            else f"failed ({span.error_type})"
        )
    if span.degradation:
        said.append(f"degraded: {span.degradation}")
    if span.retry_count:
        said.append(f"retried {span.retry_count} time{'s' if span.retry_count != 1 else ''}")
    if "length" in span.finish_reasons:
        said.append("cut short at the token limit (finish reason: length)")
    return said


@dataclass
class _ServiceContext:
    """What one service's calls are judged against, read once for every call of it."""

    history: list[ServingInterval]  # newest first
    shares: list[ServingShare]
    rollbacks: list[RollbackEvent]
    unauthorized: list[UnauthorizedChange]

    def live_at(self, at: dt.datetime) -> ServingInterval | None:
        return next(
            (i for i in self.history if i.since <= at and (i.until is None or at < i.until)),
            None,
        )

    def shares_at(self, at: dt.datetime) -> list[ServingShare]:
        return [s for s in self.shares if s.since <= at and (s.until is None or at < s.until)]


# Every share a service's rollouts opened is read at once; a service has far fewer.
_SHARES_READ = 10_000


def _contexts(services: list[Service], spans: list[ModelCallSpan]) -> dict[int, _ServiceContext]:
    first = min(span.started_at for span in spans)
    last = max(span.started_at for span in spans)
    rollbacks = _open_during(RollbackEvent, "started_at", "finished_at", services, first, last)
    unauthorized = _open_during(
        UnauthorizedChange, "detected_at", "reconciled_at", services, first, last
    )
    return {
        service.pk: _ServiceContext(
            history=serving_history(service),
            shares=share_history(service, limit=_SHARES_READ),
            rollbacks=rollbacks[service.pk],
            unauthorized=unauthorized[service.pk],
        )
        for service in services
    }


def _open_during(
    model: Any, opened: str, closed: str, services: list[Service], first: Any, last: Any
) -> dict[int, list[Any]]:
    """Per service, its records (rollbacks, unauthorized changes) open at some instant
    between `first` and `last`: opened by `last`, not closed before `first`."""
    found: dict[int, list[Any]] = {s.pk: [] for s in services}
    for row in (
        model.objects.filter(service__in=services, **{f"{opened}__lte": last})
        .filter(Q(**{f"{closed}__isnull": True}) | Q(**{f"{closed}__gte": first}))
        .order_by(opened)
    ):
        found[row.service_id].append(row)
    return found


def _open_at(rows: list[Any], opened: str, closed: str, at: dt.datetime) -> list[Any]:
    return [
        row
        for row in rows
        if getattr(row, opened) <= at
        and (getattr(row, closed) is None or getattr(row, closed) >= at)
    ]


def _evidence(revisions: list[Revision]) -> dict[int, list[Link]]:
    """Each revision's newest three load-test reports and finished replay runs, linked."""
    links: dict[int, list[Link]] = {revision.pk: [] for revision in revisions}
    by_id = {revision.pk: revision for revision in revisions}
    for report in LoadTestReport.objects.filter(revision__in=revisions).order_by("-measured_at"):
        revision = by_id[report.revision_id]
        if sum(1 for link in links[revision.pk] if "load test" in link.label) < 3:
            links[revision.pk].append(
                Link(
                    f"{report.get_workload_display()} load test ({report.tool}, "
                    f"{report.measured_at:%Y-%m-%d})",
                    reverse(
                        "ledger:loadtest_detail",
                        args=[revision.service.slug, revision.number, report.pk],
                    ),
                )
            )
    runs: dict[int, int] = {}
    for run in (
        Run.objects.filter(backend__revision__in=revisions, finished_at__isnull=False)
        .select_related("sample_set", "backend")
        .order_by("-finished_at")
    ):
        revision_id = run.backend.revision_id
        if runs.get(revision_id, 0) < 3 and run.finished_at is not None:
            runs[revision_id] = runs.get(revision_id, 0) + 1
            links[revision_id].append(
                Link(
                    f"replay of {run.sample_set} ({run.verdict or run.state}, "
                    f"{run.finished_at:%Y-%m-%d})",
                    reverse("replay:run_detail", args=[run.pk]),
                )
            )
    return links


def explain_trace(trace_id: str) -> list[CallExplained]:
    """Every model call of the trace, oldest first; [] when none was received.

    A constant number of queries for any number of calls: the spans, the backends at
    their addresses, the services the gateway named, then per service its serving
    history, its shares and its rollbacks, and for all at once the releases in force
    and the revisions' evidence."""
    spans = list(ModelCallSpan.objects.filter(trace_id=trace_id).order_by("started_at"))
    if not spans:
        return []
    hosts = {span.server_address.lower() for span in spans if span.server_address}
    backends = (
        list(
            Backend.objects.select_related("revision__service", "revision__gateway_policy").filter(
                Q(*[Q(base_url__icontains=host) for host in hosts], _connector=Q.OR)
            )
        )
        if hosts
        else []
    )
    slugs = {span.service_slug for span in spans if span.service_slug}
    named = {s.slug: s for s in Service.objects.filter(slug__in=slugs)} if slugs else {}
    matched = [(span, _backend_for(span, backends)) for span in spans]
    services = {s.pk: s for s in named.values()}
    for _span, backend in matched:
        if backend is not None:
            services.setdefault(backend.revision.service_id, backend.revision.service)
    contexts = _contexts(list(services.values()), spans)
    calls = [_explain(span, backend, named, contexts) for span, backend in matched]
    release_ids = {call.release_id for call in calls if call.release_id is not None}
    releases = Release.objects.in_bulk(release_ids) if release_ids else {}
    revisions = {call.revision.pk: call.revision for call in calls if call.revision is not None}
    evidence = _evidence(list(revisions.values())) if revisions else {}
    for call in calls:
        call.release = releases.get(call.release_id) if call.release_id is not None else None
        if call.revision is not None:
            call.evidence = evidence.get(call.revision.pk, [])
    return calls


def _explain(
    span: ModelCallSpan,
    backend: Backend | None,
    named: dict[str, Service],
    contexts: dict[int, _ServiceContext],
) -> CallExplained:
    at: dt.datetime = span.started_at
    revision = backend.revision if backend is not None else None
    service = named.get(span.service_slug) or (revision.service if revision else None)
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
    if span.service_slug and span.service_slug not in named:
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
    context = contexts[service.pk]
    call.live = context.live_at(at)
    shares = context.shares_at(at)
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
    cause = call.share.cause if call.share else (call.live.cause if call.live else {})
    if isinstance(cause.get("release"), int):
        call.release_id = cause["release"]
    if revision is not None:
        policy = revision.gateway_policy
        call.policy_in_force = policy.label if policy is not None else ""
        said = span.gateway_policy_version
        if said and call.policy_in_force and said != call.policy_in_force:
            call.findings.append(
                f"the gateway applied policy {said}; the ledger approved {call.policy_in_force} "
                f"for {revision.label}"
            )
    call.rollbacks = _open_at(context.rollbacks, "started_at", "finished_at", at)
    call.unauthorized = _open_at(context.unauthorized, "detected_at", "reconciled_at", at)
    return call
