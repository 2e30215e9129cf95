"""The price sheets page: what an hour of each GPU model costs, version by version, the
GPU models runtimes use without a price, and (for those who may) the form recording a
version. Who may is asked of `ledger.permissions`, as the API does."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods

from ledger import queries, services
from ledger.forms import PriceSheetForm
from ledger.permissions import can_record_price_sheet
from lib.actors import AuthenticatedHttpRequest
from lib.pages import apply_errors


@login_required
@require_http_methods(["GET", "POST"])
def price_sheet_list(request: AuthenticatedHttpRequest) -> HttpResponse:
    can_record = can_record_price_sheet(request.user)
    if request.method == "POST" and not can_record:
        raise PermissionDenied(
            _(
                "Only platform SREs and administrators can record price sheets; anyone can read them."
            )
        )
    form = (
        PriceSheetForm(request.POST if request.method == "POST" else None) if can_record else None
    )
    if form is not None and request.method == "POST" and form.is_valid():
        try:
            sheet = services.record_price_sheet(actor=request.user, **form.cleaned_data)
        except ValidationError as error:
            apply_errors(form, error)
        else:
            messages.success(
                request,
                _("Recorded: %(gpu)s costs %(price)s %(currency)s per GPU-hour from %(day)s.")
                % {
                    "gpu": sheet.gpu_model,
                    "price": sheet.price_per_gpu_hour,
                    "currency": sheet.currency,
                    "day": sheet.effective_from.isoformat(),
                },
            )
            return redirect(f"{reverse('ledger:price_sheet_list')}#gpu-{sheet.gpu_model}")
    today = timezone.now().date()
    priced, unpriced = queries.price_overview(today)
    context = {
        "priced": priced,
        "unpriced": unpriced,
        "today": today,
        "form": form,
    }
    return render(request, "ledger/price_sheet_list.html", context)
