"""Runs: the list, the run page with its results and live progress, and two runs compared."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.db.models import Count
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import HttpResponseClientRefresh

from lib.actors import AuthenticatedHttpRequest
from lib.charts import figure_spec
from lib.ids import row_id
from lib.pages import paginate, render_list, wants_fragment
from replay import charts, queries, services
from replay.filters import ResultFilter, RunListFilter
from replay.models import Result, Run, Sample

CATEGORY_LABELS = dict(Sample.Category.choices)
OTHER_RUNS = 10


def _run(pk: int) -> Run:
    return get_object_or_404(
        Run.objects.select_related(
            "sample_set",
            "backend",
            "revision__service",
            "baseline__backend",
            "baseline__sample_set",
            "requested_by",
        ),
        pk=pk,
    )


@require_GET
@login_required
@vary_on_headers("HX-Request")
def run_list(request: AuthenticatedHttpRequest) -> HttpResponse:
    runs = RunListFilter(
        request.GET or None,
        queryset=Run.objects.select_related("sample_set", "backend", "revision__service").order_by(
            "-created_at"
        ),
        request=request,
    )
    context = {
        "filter": runs,
        "page": paginate(request, runs.qs),
        "filtered": any(request.GET.get(name) for name in runs.filters),
    }
    return render_list(request, "replay/run_list.html", context)


# ---------------------------------------------------------------- one run


@require_GET
@login_required
@vary_on_headers("HX-Request")
def run_detail(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    run = _run(pk)
    outcomes = dict(run.results.order_by().values_list("outcome").annotate(n=Count("pk")))
    error_codes = list(
        run.results.exclude(error_code="")
        .order_by("error_code")
        .values_list("error_code", flat=True)
        .distinct()
    )
    results = ResultFilter(
        request.GET or None,
        queryset=run.results.select_related("sample").order_by("sample__key", "attempt"),
        request=request,
        error_codes=error_codes,
    )
    others = (
        Run.objects.filter(sample_set__name=run.sample_set.name, state=Run.State.FINISHED)
        .exclude(pk=run.pk)
        .select_related("backend", "sample_set")
        .order_by("-finished_at")[:OTHER_RUNS]
    )
    context = {
        "run": run,
        "progress": queries.run_progress(run, done=sum(outcomes.values())),
        "numbers": queries.summary_numbers(run.summary),
        "outcomes": [(o, label, outcomes.get(o, 0)) for o, label in Result.Outcome.choices],
        "comparison": queries.comparison_table(run.comparison),
        "others": list(others),
        "filter": results,
        "page": paginate(request, results.qs),
        "filtered": any(request.GET.get(name) for name in results.filters),
    }
    return render_list(request, "replay/run_detail.html", context)


@require_GET
@login_required
@vary_on_headers("HX-Request")
def run_progress(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    """The progress panel htmx polls every 2 s while the run is queued or running.

    When the run has finished since the page was drawn, the whole page reloads so
    the verdict, the summary and the results appear together.
    """
    run = _run(pk)
    if not wants_fragment(request):
        return redirect("replay:run_detail", pk=pk)
    active = queries.ACTIVE_STATES
    if run.state not in active and request.GET.get("was") in active:
        return HttpResponseClientRefresh()
    context = {"run": run, "progress": queries.run_progress(run)}
    return render(request, "replay/run_detail.html#progress", context)


# ---------------------------------------------------------------- two runs


def _per_sample(run_a: Run, run_b: Run, comparison: dict) -> list[charts.SampleComparison]:
    """The domain's per-sample pass rates, with each sample's category from the summaries."""
    categories: dict[str, str] = {}
    for run in (run_b, run_a):
        for key, sample in ((run.summary or {}).get("per_sample") or {}).items():
            categories[key] = sample.get("category", "")
    return [
        {
            "key": sample["key"],
            "category": str(CATEGORY_LABELS.get(categories.get(sample["key"], ""), "")),
            "a": sample.get("a_rate"),
            "b": sample.get("b_rate"),
        }
        for sample in comparison.get("samples") or []
    ]


def _latency_metrics(comparison: dict) -> list[charts.LatencyComparison]:
    return [
        {
            "metric": f"{pct} {name}",
            "a": ((comparison.get(key) or {}).get(pct) or {}).get("a"),
            "b": ((comparison.get(key) or {}).get(pct) or {}).get("b"),
        }
        for key, name in (("ttft_ms", "TTFT"), ("tpot_ms", "TPOT"))
        for pct in ("p50", "p95")
    ]


def _run_label(run: Run) -> str:
    return _("run %(pk)s · %(backend)s") % {"pk": run.pk, "backend": run.backend.name}


def _comparison_context(run_a: Run, run_b: Run) -> dict[str, Any]:
    comparison = services.compare_runs(run_a, run_b)
    samples = _per_sample(run_a, run_b, comparison)
    metrics = _latency_metrics(comparison)
    label_a, label_b = _run_label(run_a), _run_label(run_b)
    view = queries.comparison_table(comparison)
    regressed = {row["metric"] for row in view["rows"] if row["regressed"]} if view else set()
    latency_rows = charts.latency_comparison_rows(metrics)
    for row in latency_rows:
        row["regressed"] = row["metric"] in regressed
    pass_fig = charts.pass_rate_comparison_figure(samples, label_a=label_a, label_b=label_b)
    latency_fig = charts.latency_comparison_figure(metrics, label_a=label_a, label_b=label_b)
    return {
        "run_a": run_a,
        "run_b": run_b,
        "pair": [("A", run_a), ("B", run_b)],
        "comparison": view,
        "pass_chart": figure_spec(pass_fig) if samples else None,
        "pass_rows": charts.pass_rate_comparison_rows(samples),
        "latency_chart": figure_spec(latency_fig),
        "latency_rows": latency_rows,
        "same_version": run_a.sample_set_id == run_b.sample_set_id,
    }


@require_GET
@login_required
def run_compare(request: AuthenticatedHttpRequest) -> HttpResponse:
    """Two runs of the same sample set: candidate against live, or one engine against another."""
    ids = {side: request.GET.get(side, "") for side in ("a", "b")}
    problems = []
    runs: dict[str, Run] = {}
    for side, value in ids.items():
        if not value:
            continue
        number = row_id(value)
        if number is None:
            problems.append(
                _("Run %(side)s: %(value)s is not a run number.")
                % {"side": side.upper(), "value": repr(value)}
            )
            continue
        run = (
            Run.objects.select_related("sample_set", "backend", "revision__service")
            .filter(pk=number)
            .first()
        )
        if run is None:
            problems.append(
                _("Run %(side)s: there is no run %(value)s.")
                % {"side": side.upper(), "value": value}
            )
        else:
            runs[side] = run
    context: dict[str, Any] = {"ids": ids, "problems": problems, "runs": runs}
    if "a" in runs and "b" in runs:
        run_a, run_b = runs["a"], runs["b"]
        if run_a.sample_set.name != run_b.sample_set.name:
            problems.append(
                _(
                    "Run %(a)s replayed %(set_a)s and run %(b)s replayed %(set_b)s: only runs of "
                    "the same set compare."
                )
                % {
                    "a": run_a.pk,
                    "set_a": run_a.sample_set.name,
                    "b": run_b.pk,
                    "set_b": run_b.sample_set.name,
                }
            )
        else:
            unfinished = [r for r in (run_a, run_b) if r.state != Run.State.FINISHED]
            for run in unfinished:
                # The state's label, lowercased, is its value in English ("running").
                problems.append(
                    _("Run %(pk)s is %(state)s: runs compare once both have finished.")
                    % {"pk": run.pk, "state": str(run.get_state_display()).lower()}
                )
            if not unfinished:
                context.update(_comparison_context(run_a, run_b))
    if "a" in runs and "b" not in runs:
        context["pick_for"] = runs["a"]
        context["candidates"] = list(
            Run.objects.filter(sample_set__name=runs["a"].sample_set.name, state=Run.State.FINISHED)
            .exclude(pk=runs["a"].pk)
            .select_related("backend", "sample_set", "revision__service")
            .order_by("-finished_at")[:OTHER_RUNS]
        )
    return render(request, "replay/run_compare.html", context)
