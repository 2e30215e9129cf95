"""Load-test evidence pages: the upload form, a report's page, its raw file, and
the evidence sections of the revision and service pages.

The upload is progressive: without JavaScript the form posts to
`loadtest_upload`, which saves and redirects. With htmx, picking a file posts
the form to `loadtest_preview`, which parses it and writes nothing; "Save
report" then posts the same file to `loadtest_upload`, which answers with the
revision page's Evidence section. The chosen file survives the swaps of the
form (`hx-preserve` on the file input).

Charts come from the pure builders in `ledger.charts`, fed by
`ledger.evidence`; each is shown with a table of the same numbers.
"""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.files.storage import FileSystemStorage
from django.http import FileResponse, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import content_disposition_header
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import reswap, retarget

from ledger import charts, evidence, services
from ledger.forms import LoadTestUploadForm
from ledger.models import LoadTestReport, LoadTestRequestData, Revision, Service
from ledger.views._common import apply_errors, ensure_can_edit, wants_fragment

LATENCY_METRICS = (("ttft", "TTFT"), ("tpot", "TPOT"), ("itl", "ITL"), ("e2e", "End to end"))
LOAD_AXES = {
    "concurrency": ("concurrency", ""),
    "request_rate": ("request rate", "req/s"),
    "requests_per_s": ("achieved request rate", "req/s"),
}
# The fill colours ledger.charts shades the throughput-latency regions with.
REGION_FILLS = {"latency-sensitive": "#009E73", "throughput-first": "#D55E00"}
WORD_CLASSES = {
    "met": "ok",
    "breached": "bad",
    "stale": "warn",
    "no SLO": "none",
    "no evidence": "none",
}


def figure_html(fig: go.Figure, *, height: int = 460) -> str:
    """A figure as a fragment for a page that loads plotly.js from static/ itself.

    The builders leave the size to the page: the width follows the container,
    the height is fixed so the div does not collapse.
    """
    fig.update_layout(
        height=height,
        # Pinned to the bottom of the figure, below the (sometimes slanted) tick labels
        # and the axis title, which a legend placed relative to the plot would cover.
        legend={"yref": "container", "y": 0, "yanchor": "bottom", "x": 0, "xanchor": "left"},
        margin={"b": 140},
    )
    return fig.to_html(
        full_html=False,
        include_plotlyjs=False,
        config={"responsive": True, "displaylogo": False},
        default_width="100%",
    )


# ---------------------------------------------------------------- fetching


def _revision_for_upload(request: HttpRequest, slug: str, number: int) -> Revision:
    revision = get_object_or_404(
        Revision.objects.select_related("service__team", "runtime"),
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


# ---------------------------------------------------------------- shaping levels


def _load(conditions: dict[str, Any]) -> str:
    """What load a level ran under, in words: 'concurrency 8', '2.5 req/s', 'unlimited rate'."""
    parts = []
    if conditions.get("concurrency") is not None:
        parts.append(f"concurrency {conditions['concurrency']:g}")
    if conditions.get("request_rate") is not None:
        parts.append(f"{conditions['request_rate']:g} req/s")
    elif conditions.get("request_rate_unlimited"):
        parts.append("unlimited rate")
    return ", ".join(parts)


def _pct(fraction: float | None) -> float | None:
    return None if fraction is None else fraction * 100.0


def levels_for_page(levels: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every level of a parsed report, with what the tables show (no computation of our own)."""
    shaped = []
    for level in levels:
        conditions = level.get("conditions", {})
        latency = level.get("latency_ms", {})
        metrics = [
            {"key": key, "label": label, **latency[key]}
            for key, label in LATENCY_METRICS
            if latency.get(key) and any(v is not None for v in latency[key].values())
        ]
        shaped.append(
            {
                "name": level["name"],
                "source": level.get("source", ""),
                "load": _load(conditions),
                "conditions": conditions,
                "error_rate_pct": _pct(conditions.get("error_rate")),
                "latency": latency,
                "metrics": metrics,
                "throughput": level.get("throughput") or {},
            }
        )
    return shaped


# ---------------------------------------------------------------- the revision page


def _goodputs(reports: list[LoadTestReport], service: Service) -> None:
    """Set `goodput_now` on each report against today's SLOs, reading the per-request
    arrays of those whose SLOs changed since import in one query (none when unchanged)."""
    slo = evidence.goodput_slo(service)
    stale_slo = [r.pk for r in reports if evidence.needs_recompute(r, slo)]
    arrays = (
        {d.report_id: d for d in LoadTestRequestData.objects.filter(report__in=stale_slo)}
        if stale_slo
        else {}
    )
    for report in reports:
        report.goodput_now = evidence.report_goodput(
            report, service, request_data=arrays.get(report.pk)
        )
        report.goodput_pct = _pct(report.goodput_now.value)


def revision_evidence(
    revision: Revision,
    *,
    can_upload: bool,
    saved: tuple[LoadTestReport, bool] | None = None,
) -> dict[str, Any]:
    """The context of the revision page's Evidence section (partial `evidence`).

    `revision` comes with its service and runtime. Queries, whatever the number of
    reports: 1 the reports with their uploader (without the parsed levels),
    2 the parsed levels of the newest current report of each workload class
    (when there is one), and the per-request arrays of reports whose goodput must
    be recomputed because the SLOs changed (only then).
    """
    service = revision.service
    now = timezone.now()
    reports = list(
        LoadTestReport.objects.filter(revision=revision)
        .select_related("uploaded_by")
        .defer("results")
    )
    for report in reports:
        report.revision = revision
        report.status = evidence.evidence_status(report, now=now)
        report.error_rate_pct = _pct(report.error_rate)
    _goodputs(reports, service)

    newest = evidence.newest_by_workload(r for r in reports if r.status.status == "current")
    slo = evidence.service_slo(service)
    chart = rows = None
    if newest:
        results = dict(
            LoadTestReport.objects.filter(pk__in=[r.pk for r in newest.values()]).values_list(
                "pk", "results"
            )
        )
        points = []
        for report in newest.values():
            report.results = results[report.pk]
            points.append(evidence.latency_point(report, status="current"))
        chart = figure_html(charts.latency_by_workload_figure(points, slo))
        rows = charts.latency_by_workload_rows(points, slo)
    return {
        "evidence_reports": reports,
        "latency_chart": chart,
        "latency_rows": rows,
        "stale_count": sum(1 for r in reports if r.status.status == "stale"),
        "can_upload": can_upload,
        "upload_form": LoadTestUploadForm() if can_upload else None,
        "saved_report": saved[0] if saved else None,
        "saved_message": _saved_message(*saved) if saved else "",
        # plotly.js is loaded where a chart is shown, or may appear after an upload.
        "needs_plotly": chart is not None or can_upload,
    }


def _preview_for_page(preview: dict[str, Any], revision: Revision) -> dict[str, Any]:
    duplicate = LoadTestReport.objects.filter(
        revision=revision, raw_sha256=preview["sha256"]
    ).first()
    return {**preview, "levels": levels_for_page(preview["levels"]), "duplicate": duplicate}


def _upload_context(revision: Revision, form: LoadTestUploadForm, preview=None) -> dict[str, Any]:
    return {
        "revision": revision,
        "service": revision.service,
        "upload_form": form,
        "preview": preview,
    }


@require_POST
@login_required
@vary_on_headers("HX-Request")
def loadtest_preview(request: HttpRequest, slug: str, number: int) -> HttpResponse:
    """Parse an uploaded file and show what it says; nothing is stored or recorded."""
    revision = _revision_for_upload(request, slug, number)
    form = LoadTestUploadForm(request.POST, request.FILES)
    preview = None
    if form.is_valid_for_preview():
        upload = form.cleaned_data["file"]
        try:
            parsed = services.preview_loadtest_report(
                upload, filename=upload.name, format=form.cleaned_data["format"]
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
        return f"Saved {report.filename} as {report.get_workload_display().lower()} evidence."
    return (
        f"{report.filename} was already attached to {report.revision.label} "
        f"(measured {report.measured_at:%Y-%m-%d}); nothing changed."
    )


@login_required
@require_http_methods(["GET", "POST"])
@vary_on_headers("HX-Request")
def loadtest_upload(request: HttpRequest, slug: str, number: int) -> HttpResponse:
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


def _capacity_load(capacity: evidence.Capacity) -> str:
    """The capacity's load in words: 'concurrency 8', '1 req/s'."""
    load = capacity["load"]
    if load is None:
        return ""
    name, unit = LOAD_AXES.get(capacity["axis"] or "", ("load", ""))
    return f"{name} {load:g}" if not unit else f"{name} {load:.3g} {unit}"


def _regions_in_the_legend(fig: go.Figure) -> go.Figure:
    """Name the shaded regions in the legend rather than inside each panel.

    The builder labels them at the top of the panels, where the SLO line is
    labelled too; on a phone the labels cover each other or the curve.
    """
    named: dict[str, str] = {}

    def hide(annotation) -> None:
        text = annotation.text or ""
        for region, colour in REGION_FILLS.items():
            if text.startswith(region):
                named.setdefault(text, colour)
                annotation.update(visible=False)

    fig.for_each_annotation(hide)
    for text, colour in named.items():
        fig.add_trace(
            go.Scatter(
                x=[None],
                y=[None],
                mode="markers",
                name=f"shaded: {text}",
                marker={"symbol": "square", "size": 14, "color": colour, "opacity": 0.3},
                hoverinfo="skip",
            )
        )
    return fig


def _chart(fig: go.Figure, rows: list[dict], *, height: int = 460) -> dict[str, Any]:
    return {"html": figure_html(fig, height=height), "rows": rows}


@require_GET
@login_required
def loadtest_detail(request: HttpRequest, slug: str, number: int, pk: int) -> HttpResponse:
    report = _report(slug, number, pk)
    revision = report.revision
    service = revision.service
    slo = evidence.service_slo(service)
    levels = report.levels

    # Latency percentiles against the SLOs: one bar group per load level of a sweep.
    if len(levels) > 1:
        points = [
            {
                **evidence.latency_point(report, status=""),
                "workload": level["name"],
                "label": level["name"],
                **{
                    f"{metric}_{pct}_ms": (level["latency_ms"].get(metric) or {}).get(pct)
                    for metric in ("ttft", "tpot")
                    for pct in ("p50", "p95", "p99")
                },
            }
            for level in levels
        ]
        latency_fig = charts.latency_by_workload_figure(
            points, slo, title="Latency percentiles by load level, against the SLOs"
        )
        latency_fig.update_xaxes(title_text="Load level")
    else:
        points = [evidence.latency_point(report, status="")]
        latency_fig = charts.latency_by_workload_figure(
            points, slo, title="Latency percentiles against the SLOs"
        )
    latency = {
        **_chart(latency_fig, charts.latency_by_workload_rows(points, slo)),
        "first_col": "Load level" if len(levels) > 1 else "Workload class",
        "caption": "Latency percentiles of each load level, in ms"
        if len(levels) > 1
        else "Latency percentiles, in ms",
    }

    curve = None
    if len(levels) > 1:
        level_points = evidence.level_points(report, slo)
        curve = _chart(
            _regions_in_the_legend(charts.throughput_latency_figure(level_points, slo)),
            charts.throughput_latency_rows(level_points),
            height=620,
        )
    cdf = None
    series = evidence.ttft_cdf_series(report)
    if series:
        cdf = _chart(charts.ttft_cdf_figure(series, slo), charts.ttft_cdf_rows(series, slo))

    capacity = evidence.report_capacity(report, service)
    goodput = evidence.report_goodput(report, service)
    goodput_pct = _pct(goodput.value)
    context = {
        "report": report,
        "revision": revision,
        "service": service,
        "status": evidence.evidence_status(report),
        "slo": slo,
        "levels": levels_for_page(levels),
        "goodput": goodput,
        "goodput_pct": goodput_pct,
        "goodput_target_pct": evidence.GOODPUT_TARGET * 100,
        "goodput_met": goodput_pct is not None and goodput_pct >= evidence.GOODPUT_TARGET * 100,
        "goodput_slo": evidence.goodput_slo(service),
        "capacity": capacity,
        "capacity_load": _capacity_load(capacity),
        "latency": latency,
        "curve": curve,
        "cdf": cdf,
        "max_age_days": evidence.max_age_days(service.tier),
    }
    return render(request, "ledger/evidence_report.html", context)


@require_GET
@login_required
def loadtest_raw(request: HttpRequest, slug: str, number: int, pk: int) -> HttpResponse:
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


# ---------------------------------------------------------------- the service page


def _shown(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    if unit == "%":
        return f"{value:,.2f} %" if value < 10 else f"{value:,.1f} %"
    return f"{value:,.1f} {unit}"


def _bound_shown(value: float, unit: str) -> str:
    """An SLO as it was set: 800 ms, 1.5 %, not 800.0 ms."""
    return f"{value:,.10g} {unit}"


def _matrix_for_page(matrix: evidence.SloMatrix) -> list[dict[str, Any]]:
    """The matrix's blocks with each cell's value, SLO and word as the table shows them."""
    columns = matrix["columns"]
    blocks = []
    for block in matrix["revisions"]:
        rows = []
        for row in block["rows"]:
            cells = []
            for column, cell in zip(columns, row["cells"], strict=True):
                bound = "≥" if column["bound"] == "min" else "≤"
                cells.append(
                    {
                        **cell,
                        "label": column["label"],
                        "shown": _shown(cell["value"], column["unit"]),
                        "slo_shown": (
                            f"SLO {bound} {_bound_shown(cell['slo'], column['unit'])}"
                            if cell["slo"] is not None
                            else ""
                        ),
                        "css": WORD_CLASSES[cell["word"]],
                        # A stale row says why once, beside the workload class.
                        "note": "" if cell["word"] == "stale" else cell["note"],
                    }
                )
            rows.append({**row, "cells": cells})
        blocks.append({**block, "rows": rows})
    return blocks


def _column_point(row: evidence.MatrixRow, label: str) -> charts.LatencyPoint:
    """A chart point from the report's columns (the matrix does not load the levels)."""
    report = row["report"]
    return {
        "workload": row["workload"],
        "label": label,
        "ttft_p50_ms": None,
        "ttft_p95_ms": report.ttft_p95_ms,
        "ttft_p99_ms": report.ttft_p99_ms,
        "tpot_p50_ms": None,
        "tpot_p95_ms": report.tpot_p95_ms,
        "tpot_p99_ms": None,
        "status": row["status"].status,
    }


def _comparison(matrix: evidence.SloMatrix) -> dict[str, Any] | None:
    """Candidate against live per workload class, from the reports the matrix shows."""
    blocks = {block["role"]: block for block in matrix["revisions"]}
    live, candidate = blocks.get("live"), blocks.get("candidate")
    if live is None or candidate is None:
        return None
    pairs = [
        (old, new)
        for old, new in zip(live["rows"], candidate["rows"], strict=True)
        if old["report"] is not None or new["report"] is not None
    ]
    if not pairs:
        return None
    live_points, candidate_points, statuses = [], [], {}
    for old, new in pairs:
        words = {
            side: row["status"].status if row["status"] else "no evidence"
            for side, row in (("live", old), ("candidate", new))
        }
        statuses[old["workload"]] = words
        label = old["workload_label"]
        if "stale" in words.values():
            label = f"{label} (stale)"
        if old["report"] is not None:
            live_points.append(_column_point(old, label))
        if new["report"] is not None:
            candidate_points.append(_column_point(new, label))
    live_label = f"live {live['revision'].label}"
    candidate_label = f"candidate {candidate['revision'].label}"
    fig = charts.comparison_figure(
        live_points, candidate_points, live_label=live_label, candidate_label=candidate_label
    )
    rows = charts.comparison_rows(live_points, candidate_points)
    for row in rows:
        row.update(
            live_status=statuses[row["workload"]]["live"],
            candidate_status=statuses[row["workload"]]["candidate"],
            change=(
                ""
                if row["delta"] is None or row["delta"] == 0
                else "slower"
                if row["delta"] > 0
                else "faster"
            ),
        )
    return {
        "html": figure_html(fig),
        "rows": rows,
        "live": live["revision"],
        "candidate": candidate["revision"],
    }


def service_evidence(service: Service) -> dict[str, Any]:
    """The context of the service page's SLO matrix and comparison.

    Queries: `slo_matrix`'s revisions and reports (the per-request arrays too,
    only for reports whose goodput must be recomputed for changed SLOs).
    """
    matrix = evidence.slo_matrix(service)
    comparison = _comparison(matrix)
    return {
        "matrix_columns": matrix["columns"],
        "matrix_blocks": _matrix_for_page(matrix),
        "goodput_target_pct": evidence.GOODPUT_TARGET * 100,
        "comparison": comparison,
        "needs_plotly": comparison is not None,
    }
