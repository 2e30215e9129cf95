"""Sample sets: the list, one version's samples, the JSONL export and the import form."""

from __future__ import annotations

import json
from collections import defaultdict

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Count, Max
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.http import require_GET, require_http_methods
from django.views.decorators.vary import vary_on_headers

from lib.actors import AuthenticatedHttpRequest
from lib.pages import apply_errors, paginate, render_list
from replay import permissions, services
from replay.filters import SampleFilter, SampleSetListFilter
from replay.forms import SampleSetImportForm
from replay.models import Sample, SampleSet

SAMPLES_PER_PAGE = 50
CATEGORIES = [(value, label) for value, label in Sample.Category.choices]


@require_GET
@login_required
@vary_on_headers("HX-Request")
def sampleset_list(request: AuthenticatedHttpRequest) -> HttpResponse:
    names = SampleSetListFilter(
        request.GET or None, queryset=SampleSet.objects.all(), request=request
    )
    grouped = (
        names.qs.order_by()
        .values("name")
        .annotate(latest=Max("version"), versions=Count("pk"))
        .order_by("name")
    )
    page = paginate(request, grouped)
    wanted = {row["name"]: row["latest"] for row in page.object_list}
    latest = {
        s.name: s
        for s in SampleSet.objects.filter(name__in=wanted).order_by("name", "version")
        if s.version == wanted[s.name]
    }
    counts: dict[int, dict[str, int]] = defaultdict(dict)
    for row in (
        Sample.objects.filter(sample_set__in=latest.values())
        .values("sample_set_id", "category")
        .annotate(n=Count("pk"))
        .order_by()
    ):
        counts[row["sample_set_id"]][row["category"]] = row["n"]
    rows = []
    for row in page.object_list:
        sample_set = latest[row["name"]]
        by_category = counts[sample_set.pk]
        rows.append(
            {
                "set": sample_set,
                "versions": row["versions"],
                "total": sum(by_category.values()),
                "categories": [
                    (label, by_category[value])
                    for value, label in CATEGORIES
                    if value in by_category
                ],
            }
        )
    context = {
        "filter": names,
        "page": page,
        "rows": rows,
        "filtered": any(request.GET.get(name) for name in names.filters),
        "can_import": permissions.can_manage_sample_sets(request.user),
    }
    return render_list(request, "replay/sampleset_list.html", context)


def _sample_set(name: str, version: int) -> SampleSet:
    return get_object_or_404(
        SampleSet.objects.select_related("created_by"), name=name, version=version
    )


@require_GET
@login_required
def sampleset_latest(request: AuthenticatedHttpRequest, name: str) -> HttpResponse:
    """A set's name alone opens its newest version."""
    latest = SampleSet.objects.filter(name=name).order_by("-version").first()
    if latest is None:
        raise Http404(_("No sample set is named %(name)s.") % {"name": name})
    return redirect("replay:sampleset_detail", name=name, version=latest.version)


def _checks_summary(checks: list) -> list[str]:
    """Each check in a few words: its label or type, and its bound when it has one."""
    words = []
    for check in checks if isinstance(checks, list) else []:
        if not isinstance(check, dict):
            continue
        kind = check.get("type", "?")
        name = check.get("label") or kind
        if kind in ("max_ttft_ms", "max_tpot_ms"):
            name = f"{name} ≤ {check.get('value')} ms"
        elif kind in ("contains", "not_contains"):
            name = f"{name} {check.get('value')!r}"
        elif kind == "tool_call" and check.get("name"):
            name = f"{name} {check['name']}"
        elif kind == "refusal" and check.get("expected") is False:
            name = "no refusal"
        words.append(name)
    return words


def _prompt_preview(messages_: list) -> str:
    """The last user message, which is what most samples are about."""
    for message in reversed(messages_ if isinstance(messages_, list) else []):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if not isinstance(content, str):
                content = json.dumps(content, ensure_ascii=False)
            return content if len(content) <= 160 else content[:160] + "…"
    return ""


@require_GET
@login_required
@vary_on_headers("HX-Request")
def sampleset_detail(request: AuthenticatedHttpRequest, name: str, version: int) -> HttpResponse:
    sample_set = _sample_set(name, version)
    samples = SampleFilter(
        request.GET or None,
        queryset=sample_set.samples.order_by("key"),
        request=request,
    )
    page = paginate(request, samples.qs, per_page=SAMPLES_PER_PAGE)
    for sample in page.object_list:
        sample.checks_summary = _checks_summary(sample.checks)
        sample.prompt = _prompt_preview(sample.messages)
    by_category = dict(
        sample_set.samples.order_by().values_list("category").annotate(n=Count("pk"))
    )
    context = {
        "sample_set": sample_set,
        "versions": list(
            SampleSet.objects.filter(name=name)
            .annotate(sample_count=Count("samples"))
            .order_by("-version")
        ),
        "categories": [(label, by_category[v]) for v, label in CATEGORIES if v in by_category],
        "total": sum(by_category.values()),
        "filter": samples,
        "page": page,
        "filtered": any(request.GET.get(n) for n in samples.filters),
        "can_import": permissions.can_manage_sample_sets(request.user),
    }
    return render_list(request, "replay/sampleset_detail.html", context)


@require_GET
@login_required
def sampleset_export(request: AuthenticatedHttpRequest, name: str, version: int) -> HttpResponse:
    """The version as JSONL, one sample a line, ready to commit next to the code it tests."""
    sample_set = _sample_set(name, version)
    response = HttpResponse(
        services.export_sample_set(sample_set), content_type="application/x-ndjson; charset=utf-8"
    )
    response["Content-Disposition"] = f'attachment; filename="{name}@{version}.jsonl"'
    return response


@login_required
@require_http_methods(["GET", "POST"])
def sampleset_import(request: AuthenticatedHttpRequest) -> HttpResponse:
    if not permissions.can_manage_sample_sets(request.user):
        raise PermissionDenied(_("Only model owners and platform SREs can import sample sets."))
    initial = {"name": request.GET.get("name", "")}
    if request.method == "POST":
        form = SampleSetImportForm(request.POST, request.FILES)
    else:
        form = SampleSetImportForm(initial=initial)
    line_errors: list[str] = []
    if request.method == "POST" and form.is_valid():
        try:
            sample_set, created = services.import_sample_set(
                actor=request.user,
                name=form.cleaned_data["name"],
                jsonl=form.cleaned_data["jsonl"],
                description=form.cleaned_data["description"],
            )
        except ValidationError as error:
            line_errors = _line_errors(error)
            apply_errors(form, _without_line_errors(error))
            if line_errors:
                source = "jsonl_file" if request.FILES.get("jsonl_file") else "jsonl_text"
                form.add_error(
                    source,
                    ngettext(
                        "%(count)d problem in the lines, listed at the top; nothing was saved.",
                        "%(count)d problems in the lines, listed at the top; nothing was saved.",
                        len(line_errors),
                    )
                    % {"count": len(line_errors)},
                )
        else:
            if created:
                messages.success(
                    request,
                    _("Imported %(sample_set)s (%(count)d samples).")
                    % {"sample_set": sample_set, "count": sample_set.samples.count()},
                )
            else:
                messages.info(
                    request,
                    _("Nothing changed: the lines are the same as %(sample_set)s.")
                    % {"sample_set": sample_set},
                )
            return redirect(
                "replay:sampleset_detail", name=sample_set.name, version=sample_set.version
            )
    return render(
        request, "replay/sampleset_import.html", {"form": form, "line_errors": line_errors}
    )


def _is_line_key(key: str) -> bool:
    return key.startswith("line") or key == "jsonl"


def _line_errors(error: ValidationError) -> list[str]:
    """The domain names a bad line by its number ('line 3' or a message saying so)."""
    if not hasattr(error, "error_dict"):
        return []
    found: list[str] = []
    for key, messages_ in error.message_dict.items():
        if _is_line_key(key):
            found.extend(
                message if key == "jsonl" or message.startswith(key) else f"{key}: {message}"
                for message in messages_
            )
    return found


def _without_line_errors(error: ValidationError) -> ValidationError:
    if not hasattr(error, "error_dict"):
        return error
    rest = {key: value for key, value in error.message_dict.items() if not _is_line_key(key)}
    return ValidationError(rest) if rest else ValidationError({})
