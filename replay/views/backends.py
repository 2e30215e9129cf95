"""Backends: the list, the backend page with its probe, schedules, trends and runs, the forms."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import OuterRef, Subquery
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext
from django.views.decorators.http import require_GET, require_http_methods
from django.views.decorators.vary import vary_on_headers

from lib.actors import AuthenticatedHttpRequest
from lib.charts import figure_spec
from lib.http import post_only
from lib.pages import apply_errors, changed_values, paginate, render_form, render_list
from replay import charts, queries, services
from replay.filters import BackendListFilter
from replay.forms import BackendForm, RunStartForm
from replay.models import Backend, Probe, Run, Schedule
from replay.permissions import can_manage_backend, can_register_backends, manageable_revisions
from replay.views._common import backend_for
from replay.views.schedules import schedule_rows

RECENT_RUNS = 10
TREND_RUNS = 30


@require_GET
@login_required
@vary_on_headers("HX-Request")
def backend_list(request: AuthenticatedHttpRequest) -> HttpResponse:
    latest_probe = Probe.objects.filter(backend=OuterRef("pk")).order_by("-started_at")
    latest_run = Run.objects.filter(backend=OuterRef("pk")).order_by("-created_at")
    queryset = (
        Backend.objects.select_related("revision__service")
        .annotate(
            probe_at=Subquery(latest_probe.values("started_at")[:1]),
            probe_reachable=Subquery(latest_probe.values("reachable")[:1]),
            probe_drift=Subquery(latest_probe.values("drift")[:1]),
            run_id=Subquery(latest_run.values("pk")[:1]),
            run_state=Subquery(latest_run.values("state")[:1]),
            run_verdict=Subquery(latest_run.values("verdict")[:1]),
            run_at=Subquery(latest_run.values("created_at")[:1]),
        )
        .order_by("name")
    )
    backends = BackendListFilter(request.GET or None, queryset=queryset, request=request)
    context = {
        "filter": backends,
        "page": paginate(request, backends.qs),
        "filtered": any(request.GET.get(name) for name in backends.filters),
        "can_create": can_register_backends(request.user),
    }
    return render_list(request, "replay/backend_list.html", context)


def capability_checks(probe: Probe | None) -> list[dict[str, str]]:
    """Each declared capability the probe looked at: its status and, in a line, what was seen."""
    if probe is None or not isinstance(probe.capability_results, dict):
        return []
    rows = []
    for kind, result in sorted(probe.capability_results.items()):
        if not isinstance(result, dict):
            continue
        failed = [c for c in result.get("checks") or [] if not c.get("passed", True)]
        if result.get("why"):
            detail = result["why"]
        elif failed:
            detail = "; ".join(f"expected {c.get('expected')}, got {c.get('got')}" for c in failed)
        elif result.get("error_detail"):
            detail = f"{result.get('outcome')}: {result['error_detail']}"
        else:
            parts = [result.get("probe", "")]
            if result.get("ttft_ms") is not None:
                parts.append(f"TTFT {result['ttft_ms']} ms")
            detail = " · ".join(p for p in parts if p)
        rows.append(
            {
                "kind": kind.replace("_", " "),
                "status": str(result.get("status", "")).replace("_", " "),
                "detail": detail,
            }
        )
    return rows


@require_GET
@login_required
def backend_detail(request: AuthenticatedHttpRequest, name: str) -> HttpResponse:
    backend = backend_for(request, name)
    trend = queries.backend_trend(backend, limit=TREND_RUNS)
    figure = charts.trend_figure(
        trend,
        title=ngettext(
            "%(name)s: last %(count)d finished runs",
            "%(name)s: last %(count)d finished runs",
            len(trend),
        )
        % {"name": backend.name, "count": len(trend)},
    )
    schedules = list(
        Schedule.objects.filter(backend=backend)
        .select_related("periodic_task__crontab")
        .order_by("sample_set_name", "purpose")
    )
    can_run = can_manage_backend(request.user, backend.revision)
    probe = backend.probes.order_by("-started_at").first()
    context = {
        "backend": backend,
        "revision": backend.revision,
        "service": backend.revision.service,
        "probe": probe,
        "capability_checks": capability_checks(probe),
        "schedules": schedule_rows(schedules, now=timezone.now()),
        "trend_chart": figure_spec(figure) if queries.trend_has_measurements(trend) else None,
        "trend_rows": charts.trend_rows(trend),
        "runs": list(
            backend.runs.select_related("sample_set", "revision__service").order_by("-created_at")[
                :RECENT_RUNS
            ]
        ),
        "can_run": can_run,
        "run_form": RunStartForm() if can_run else None,
    }
    return render(request, "replay/backend_detail.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def backend_create(request: AuthenticatedHttpRequest) -> HttpResponse:
    if not can_register_backends(request.user):
        raise PermissionDenied(
            _("Only model owners of a team and platform SREs can register backends.")
        )
    form = BackendForm(
        request.POST if request.method == "POST" else None,
        revisions=manageable_revisions(request.user),
    )
    if request.method == "POST" and form.is_valid():
        try:
            backend = services.create_backend(actor=request.user, **form.cleaned_data)
        except ValidationError as error:
            apply_errors(form, error)
        else:
            messages.success(request, _("Registered backend %(name)s.") % {"name": backend.name})
            return redirect("replay:backend_detail", name=backend.name)
    return render_form(
        request,
        form,
        title=_("Register a backend"),
        intro=_(
            "An OpenAI-compatible endpoint serving a revision. The API key is never stored "
            "here: name the environment variable that holds it on the workers."
        ),
        submit=_("Register backend"),
        cancel_url=reverse("replay:backend_list"),
    )


@login_required
@require_http_methods(["GET", "POST"])
def backend_edit(request: AuthenticatedHttpRequest, name: str) -> HttpResponse:
    backend = backend_for(request, name, write=True)
    form = BackendForm(
        request.POST if request.method == "POST" else None,
        instance=backend,
        revisions=manageable_revisions(request.user),
    )
    if request.method == "POST" and form.is_valid():
        # The form has written the typed values onto `backend`; the verb needs the stored row.
        stored = backend_for(request, name)
        try:
            changed = services.update_backend(stored, actor=request.user, **changed_values(form))
        except ValidationError as error:
            apply_errors(form, error)
        else:
            messages.success(request, _("Saved.") if changed else _("Nothing changed."))
            return redirect("replay:backend_detail", name=name)
    return render_form(
        request,
        form,
        title=_("Edit backend %(name)s") % {"name": name},
        submit=_("Save backend"),
        cancel_url=reverse("replay:backend_detail", args=[name]),
    )


@post_only(
    gettext_lazy("queues a replay of a sample set against this backend (Run now)"),
    page="replay:backend_detail",
)
@login_required
def backend_run(request: AuthenticatedHttpRequest, name: str) -> HttpResponse:
    """'Run now': queue a replay of the chosen set against this backend."""
    backend = backend_for(request, name, write=True)
    form = RunStartForm(request.POST)
    if not form.is_valid():
        for field, errors in form.errors.items():
            messages.error(
                request,
                _("Run not started: %(field)s: %(error)s")
                % {"field": field.replace("_", " "), "error": errors[0]},
            )
        return redirect("replay:backend_detail", name=name)
    try:
        run = services.start_run(
            actor=request.user,
            backend=backend,
            sample_set=form.cleaned_data["sample_set"],
            trigger=Run.Trigger.MANUAL,
            concurrency=form.cleaned_data["concurrency"],
        )
    except ValidationError as error:
        for message in error.messages:
            messages.error(request, _("Run not started: %(message)s") % {"message": message})
        return redirect("replay:backend_detail", name=name)
    messages.success(
        request,
        _("Queued run %(pk)s of %(sample_set)s on %(backend)s.")
        % {"pk": run.pk, "sample_set": run.sample_set, "backend": backend.name},
    )
    return redirect("replay:run_detail", pk=run.pk)


@post_only(
    gettext_lazy(
        "asks this backend what it serves and checks its declared capabilities (Probe now)"
    ),
    page="replay:backend_detail",
)
@login_required
def backend_probe(request: AuthenticatedHttpRequest, name: str) -> HttpResponse:
    """'Probe now': ask the backend what it serves and check its declared capabilities."""
    backend = backend_for(request, name, write=True)
    try:
        probe = services.probe_backend(backend, actor=request.user)
    except ValidationError as error:
        for message in error.messages:
            messages.error(request, _("Probe not run: %(message)s") % {"message": message})
    else:
        if not probe.reachable:
            messages.warning(
                request,
                _("Probed %(name)s: unreachable. %(error)s")
                % {"name": backend.name, "error": probe.error},
            )
        elif probe.drift:
            messages.warning(
                request,
                ngettext(
                    "Probed %(name)s: %(count)d drift flag(s) raised.",
                    "Probed %(name)s: %(count)d drift flag(s) raised.",
                    len(probe.drift),
                )
                % {"name": backend.name, "count": len(probe.drift)},
            )
        else:
            messages.success(
                request, _("Probed %(name)s: reachable, no drift.") % {"name": backend.name}
            )
    return redirect(f"{reverse('replay:backend_detail', args=[name])}#probe-heading")
