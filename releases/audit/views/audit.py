"""The auditor's pages: the record filtered (releases, sign-offs, waivers, events, with
their counts), a release's change record, and exports — requested, watched while a
worker builds them, downloaded through a short-lived link.

Anyone signed in reads the record and the change records; requesting and
downloading exports is `releases.permissions.can_request_exports` (auditors,
security & compliance, superusers), asked here and by the API alike.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, HttpResponseBase
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods
from django.views.decorators.vary import vary_on_headers

from ledger import signing
from lib.actors import AuthenticatedHttpRequest
from lib.http import post_only
from lib.pages import apply_errors, paginate, render_list, wants_fragment
from releases import permissions
from releases.audit.forms.audit import AuditFilterForm, ExportRequestForm
from releases.audit.queries.change_record import change_record as build_change_record
from releases.audit.records import RECORD_TYPES
from releases.audit.services import exports as export_services
from releases.governance.queries import pages as page_queries
from releases.models import Export

# The filters an export request carries over from the auditor's page.
FILTER_FIELDS = ("date_from", "date_to", "service", "tier", "change_kind", "path", "state")


@require_GET
@login_required
@vary_on_headers("HX-Request")
def audit(request: AuthenticatedHttpRequest) -> HttpResponse:
    form = AuditFilterForm(request.GET or None, path_url=request.path)
    filters = form.filters()
    current = RECORD_TYPES[form.record_type]
    counts = [(record, record.queryset(filters).count()) for record in RECORD_TYPES.values()]
    page = paginate(request, current.page_queryset(filters))
    filtered = any(request.GET.get(name) for name in FILTER_FIELDS)
    context = {
        "form": form,
        "filters": filters,
        "current": current,
        "counts": counts,
        "page": page,
        "filtered": filtered,
        "can_export": permissions.can_request_exports(request.user),
        "can_manage_webhooks": permissions.can_manage_webhooks(request.user),
        "formats": Export.Format.choices,
        "carried": [(name, request.GET.get(name, "")) for name in FILTER_FIELDS],
        "fingerprints": signing.fingerprints(),
    }
    return render_list(request, "releases/audit.html", context)


@require_GET
@login_required
def change_record(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    release = page_queries.release_for_page(pk)
    if release is None:
        raise Http404(f"No release #{pk}.")
    if not permissions.can_view_release(request.user, release):
        raise PermissionDenied(_("Sign in to read releases."))
    return render(request, "releases/change_record.html", {"record": build_change_record(release)})


# ---------------------------------------------------------------- exports


def _export(request: AuthenticatedHttpRequest, pk: int) -> Export:
    permissions.ensure_can_request_exports(request.user)
    export = Export.objects.for_page().filter(pk=pk).first()
    if export is None:
        raise Http404(f"No export #{pk}.")
    return export


@require_GET
@login_required
def export_list(request: AuthenticatedHttpRequest) -> HttpResponse:
    permissions.ensure_can_request_exports(request.user)
    page = paginate(request, Export.objects.for_page().order_by("-created_at", "-id"))
    return render(request, "releases/export_list.html", {"page": page})


@require_http_methods(["GET", "POST"])
@login_required
def export_request(request: AuthenticatedHttpRequest) -> HttpResponse:
    """GET: the request form (the filters of the auditor's page filled in); POST: queue it."""
    permissions.ensure_can_request_exports(request.user)
    if request.method == "GET":
        form = ExportRequestForm(initial={k: v for k, v in request.GET.items() if v})
        return render(request, "releases/export_request.html", {"form": form})
    form = ExportRequestForm(request.POST)
    if form.is_valid():
        try:
            export = export_services.request_export(
                actor=request.user, format=form.cleaned_data["format"], filters=form.filters()
            )
        except ValidationError as error:
            apply_errors(form, error)
        else:
            messages.success(
                request,
                _("Export #%(pk)s is queued: a worker builds it now.") % {"pk": export.pk},
            )
            return redirect("releases:export_detail", pk=export.pk)
    return render(request, "releases/export_request.html", {"form": form}, status=400)


@require_GET
@login_required
@vary_on_headers("HX-Request")
def export_detail(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    """The export, its progress while it builds (htmx polls the status region; without
    JavaScript the page refreshes itself), and its download once ready."""
    export = _export(request, pk)
    context: dict[str, Any] = {
        "export": export,
        "filters": export_services.filters_of(export),
        "record_labels": {key: r.label for key, r in RECORD_TYPES.items()},
    }
    if wants_fragment(request):
        return render(request, "releases/export_detail.html#status", context)
    return render(request, "releases/export_detail.html", context)


@post_only(
    "records a download of this export and sends you to its file", page="releases:export_detail"
)
@login_required
def export_download(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    export = _export(request, pk)
    try:
        link = export_services.download_link(export, actor=request.user)
    except export_services.ExportNotReady as refused:
        messages.error(request, str(refused))
        return redirect("releases:export_detail", pk=pk)
    return redirect(link.url)


@require_GET
def export_file(request: HttpRequest, pk: int, token: str) -> HttpResponseBase:
    """The file behind a signed link of this site (the local-folder default): the link
    is the permission, as a presigned S3 link is, and it expires the same way."""
    try:
        export = export_services.open_signed_download(pk, token)
    except export_services.ExportNotReady as refused:
        return render(
            request, "releases/export_link_expired.html", {"reason": str(refused)}, status=410
        )
    return FileResponse(export.file.open("rb"), as_attachment=True, filename=export.filename)
