"""Load-test evidence pages: the upload form, a report's page, its raw file, and
the Evidence section of the revision page.

The upload is progressive: without JavaScript the form posts to
`loadtest_upload`, which saves and redirects. With htmx, picking a file posts
the form to `loadtest_preview`, which parses it and writes nothing; "Save
report" then posts the same file to `loadtest_upload`, which answers with the
revision page's Evidence section. The chosen file survives the swaps of the
form (`hx-preserve` on the file input).

Charts come from the pure builders in `ledger.charts`, fed by
`ledger.queries`; each is shown with a table of the same numbers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import plotly.graph_objects as go
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.files.storage import FileSystemStorage
from django.http import FileResponse, HttpResponse, HttpResponseBase
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import content_disposition_header
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import reswap, retarget

from ledger import charts, queries, services
from ledger.charts import LatencyPoint
from ledger.forms import LoadTestUploadForm
from ledger.models import LoadTestReport, Revision
from ledger.permissions import ensure_can_edit
from lib.actors import AuthenticatedHttpRequest
from lib.charts import FigureSpec, figure_spec
from lib.http import post_only
from lib.pages import apply_errors, wants_fragment

# ---------------------------------------------------------------- fetching


def _revision_for_upload(request: AuthenticatedHttpRequest, slug: str, number: int) -> Revision:
    revision = get_object_or_404(
        Revision.objects.select_related("service__team", "runtime", "model_asset"),
        service__slug=slug,
        number=number,
    )
    ensure_can_edit(request.user, revision.service.team)
    return revision


def _report(slug: str, number: int, pk: int) -> LoadTestReport:
    """A report of this revision (404 for one of another revision, even if it exists)."""
    return get_object_or_404(
        LoadTestReport.objects.with_context().select_related("revision__service__team"),
        pk=pk,
        revision__service__slug=slug,
        revision__number=number,
    )


# ---------------------------------------------------------------- the revision page


def revision_evidence(
    revision: Revision,
    *,
    can_upload: bool,
    saved: tuple[LoadTestReport, bool] | None = None,
) -> dict[str, Any]:
    """The context of the revision page's Evidence section (partial `evidence`).

    `revision` comes with its service and runtime; the queries are those of
    `queries.revision_reports`.
    """
    read = queries.revision_reports(revision)
    slo = queries.service_slo(revision.service)
    points = read["latency_points"]
    chart = rows = None
    if points:
        chart = _chart_spec(charts.latency_by_workload_figure(points, slo))
        rows = charts.latency_by_workload_rows(points, slo)
    return {
        "evidence_reports": read["reports"],
        "latency_chart": chart,
        "latency_rows": rows,
        "stale_count": read["stale_count"],
        "can_upload": can_upload,
        "upload_form": LoadTestUploadForm() if can_upload else None,
        "saved_report": saved[0] if saved else None,
        "saved_message": _saved_message(*saved) if saved else "",
        # plotly.js is loaded where a chart is shown, or may appear after an upload.
        "needs_plotly": chart is not None or can_upload,
    }


def _preview_for_page(preview: Mapping[str, Any], revision: Revision) -> dict[str, Any]:
    duplicate = LoadTestReport.objects.filter(
        revision=revision, raw_sha256=preview["sha256"]
    ).first()
    match = queries.match_evidence(revision, preview["meta"])
    return {
        **preview,
        "levels": queries.shaped_levels(preview["levels"]),
        "duplicate": duplicate,
        "match": match,
        "mismatch_summary": match.summary(revision.label),
    }


def _upload_context(revision: Revision, form: LoadTestUploadForm, preview=None) -> dict[str, Any]:
    return {
        "revision": revision,
        "service": revision.service,
        "upload_form": form,
        "preview": preview,
    }


@post_only(
    "reads a chosen load-test file and previews it, storing nothing",
    page="ledger:revision_detail",
)
@login_required
@vary_on_headers("HX-Request")
def loadtest_preview(request: AuthenticatedHttpRequest, slug: str, number: int) -> HttpResponse:
    """Parse an uploaded file and show what it says; nothing is stored or recorded."""
    revision = _revision_for_upload(request, slug, number)
    form = LoadTestUploadForm(request.POST, request.FILES)
    preview = None
    if form.is_valid_for_preview():
        upload = form.cleaned_data["file"]
        try:
            parsed = services.preview_loadtest_report(
                upload, filename=upload.name, format=form.cleaned_data["format"], **form.scrapes()
            )
        except ValidationError as error:
            apply_errors(form, error)
        else:
            preview = _preview_for_page(parsed, revision)
    context = _upload_context(revision, form, preview)
    if wants_fragment(request):
        return render(request, "ledger/_evidence_upload.html", context)
    return render(request, "ledger/evidence_upload.html", context)


def _saved_message(report: LoadTestReport, created: bool) -> str:
    if created:
        return _("Saved %(filename)s as %(workload)s evidence.") % {
            "filename": report.filename,
            "workload": report.get_workload_display().lower(),
        }
    return _(
        "%(filename)s was already attached to %(revision)s (measured %(date)s); nothing changed."
    ) % {
        "filename": report.filename,
        "revision": report.revision.label,
        "date": f"{report.measured_at:%Y-%m-%d}",
    }


@login_required
@require_http_methods(["GET", "POST"])
@vary_on_headers("HX-Request")
def loadtest_upload(request: AuthenticatedHttpRequest, slug: str, number: int) -> HttpResponse:
    """Attach a load-test report to a revision: the form's own page, and its save."""
    revision = _revision_for_upload(request, slug, number)
    posted = request.method == "POST"
    form = LoadTestUploadForm(request.POST if posted else None, request.FILES if posted else None)
    if posted and form.is_valid():
        upload = form.cleaned_data["file"]
        try:
            report, created = services.import_loadtest_report(
                revision,
                actor=request.user,
                workload=form.cleaned_data["workload"],
                file=upload,
                filename=upload.name,
                format=form.cleaned_data["format"],
                accept_mismatch=form.cleaned_data["accept_mismatch"],
                **form.scrapes(),
            )
        except ValidationError as error:
            apply_errors(form, error)
        else:
            report.revision = revision
            if wants_fragment(request):
                context = {
                    "revision": revision,
                    "service": revision.service,
                    **revision_evidence(revision, can_upload=True, saved=(report, created)),
                }
                return render(request, "ledger/revision_detail.html#evidence", context)
            messages.success(request, _saved_message(report, created))
            url = reverse("ledger:loadtest_detail", args=[slug, number, report.pk])
            return redirect(url)
    context = _upload_context(revision, form)
    if posted and wants_fragment(request):
        # The Save button aims at the whole section; a refusal replaces only the form,
        # so the chosen file stays chosen.
        response = render(request, "ledger/_evidence_upload.html", context)
        return reswap(retarget(response, "#loadtest-form"), "outerHTML")
    return render(request, "ledger/evidence_upload.html", context)


# ---------------------------------------------------------------- one report


def _chart_spec(fig: go.Figure, *, height: int = 460) -> FigureSpec:
    return figure_spec(charts.fit_to_page(fig, height=height))


def _chart(fig: go.Figure, rows: list[dict], *, height: int = 460) -> dict[str, Any]:
    return {"spec": _chart_spec(fig, height=height), "rows": rows}


def _level_latency_point(level: dict[str, Any]) -> LatencyPoint:
    """One load level of a sweep as a latency point of its own, named by the level."""
    latency = level["latency_ms"]
    ttft, tpot = latency.get("ttft") or {}, latency.get("tpot") or {}
    return {
        "workload": level["name"],
        "label": level["name"],
        "ttft_p50_ms": ttft.get("p50"),
        "ttft_p95_ms": ttft.get("p95"),
        "ttft_p99_ms": ttft.get("p99"),
        "tpot_p50_ms": tpot.get("p50"),
        "tpot_p95_ms": tpot.get("p95"),
        "tpot_p99_ms": tpot.get("p99"),
        "status": "",
    }


@require_GET
@login_required
def loadtest_detail(
    request: AuthenticatedHttpRequest, slug: str, number: int, pk: int
) -> HttpResponse:
    report = _report(slug, number, pk)
    revision = report.revision
    service = revision.service
    slo = queries.service_slo(service)
    levels = report.levels

    # Latency percentiles against the SLOs: one bar group per load level of a sweep.
    if len(levels) > 1:
        points = [_level_latency_point(level) for level in levels]
        latency_fig = charts.latency_by_workload_figure(
            points, slo, title=_("Latency percentiles by load level, against the SLOs")
        )
        latency_fig.update_xaxes(title_text=_("Load level"))
    else:
        points = [queries.latency_point(report, status="")]
        latency_fig = charts.latency_by_workload_figure(
            points, slo, title=_("Latency percentiles against the SLOs")
        )
    latency = {
        **_chart(latency_fig, charts.latency_by_workload_rows(points, slo)),
        "first_col": _("Load level") if len(levels) > 1 else _("Workload class"),
        "caption": _("Latency percentiles of each load level, in ms")
        if len(levels) > 1
        else _("Latency percentiles, in ms"),
    }

    curve = None
    if len(levels) > 1:
        level_points = queries.level_points(report, slo)
        curve = _chart(
            charts.regions_in_the_legend(charts.throughput_latency_figure(level_points, slo)),
            charts.throughput_latency_rows(level_points),
            height=620,
        )
    cdf = None
    series = queries.ttft_cdf_series(report)
    if series:
        cdf = _chart(charts.ttft_cdf_figure(series, slo), charts.ttft_cdf_rows(series, slo))

    capacity = queries.report_capacity(report, service)
    goodput = queries.report_goodput(report, service)
    goodput_pct = queries.pct(goodput.value)
    context = {
        "report": report,
        "revision": revision,
        "service": service,
        "status": queries.evidence_status(report),
        "slo": slo,
        "levels": queries.shaped_levels(levels),
        "goodput": goodput,
        "goodput_pct": goodput_pct,
        "goodput_target_pct": queries.GOODPUT_TARGET * 100,
        "goodput_met": goodput_pct is not None and goodput_pct >= queries.GOODPUT_TARGET * 100,
        "goodput_slo": queries.goodput_slo(service),
        "capacity": capacity,
        "latency": latency,
        "curve": curve,
        "cdf": cdf,
        "max_age_days": queries.max_age_days(service.tier),
    }
    return render(request, "ledger/evidence_report.html", context)


@require_GET
@login_required
def loadtest_raw(
    request: AuthenticatedHttpRequest, slug: str, number: int, pk: int
) -> HttpResponseBase:
    """The raw file as the tool wrote it: streamed from the local folder through this
    login-protected view, or a short-lived presigned URL of the object store."""
    report = _report(slug, number, pk)
    storage = report.raw_file.storage
    if isinstance(storage, FileSystemStorage):
        return FileResponse(
            report.raw_file.open("rb"), as_attachment=True, filename=report.filename
        )
    from storages.backends.s3 import S3Storage

    if isinstance(storage, S3Storage):
        # Signed for AWS_QUERYSTRING_EXPIRE seconds; saved under the name it was uploaded with.
        disposition = content_disposition_header(True, report.filename)
        return redirect(
            storage.url(
                report.raw_file.name, parameters={"ResponseContentDisposition": disposition}
            )
        )
    return redirect(storage.url(report.raw_file.name))
