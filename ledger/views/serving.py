"""What was serving on a service, and when: its live revisions over time, read from the
event chain (`ledger.queries.serving`), and the answer for one moment."""

from __future__ import annotations

import datetime as dt

from django import forms
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_GET

from ledger import queries
from ledger.models import Service
from lib.storable import offset_problem

HISTORY_SHOWN = 100
SHARES_SHOWN = 20


class MomentForm(forms.Form):
    at = forms.DateTimeField(
        label=_("What was live at"),
        required=False,
        help_text=_(
            "A date and time in your time zone (e.g. 2026-11-30 14:05), or ISO 8601 with an offset."
        ),
        widget=forms.DateTimeInput(attrs={"placeholder": "2026-11-30 14:05"}),
    )

    def clean_at(self) -> dt.datetime | None:
        value: dt.datetime | None = self.cleaned_data.get("at")
        if value is None:
            return None
        if timezone.is_naive(value):
            value = value.replace(tzinfo=dt.UTC)
        problem = offset_problem(value)
        if problem:
            raise forms.ValidationError(problem)
        return value


@require_GET
@login_required
def serving_history(request: HttpRequest, slug: str) -> HttpResponse:
    service = get_object_or_404(Service.objects.select_related("team"), slug=slug)
    form = MomentForm(request.GET or None)
    at = form.cleaned_data.get("at") if form.is_valid() else None
    history = queries.serving_history(service, limit=HISTORY_SHOWN + 1)
    context = {
        "service": service,
        "form": form,
        "at": at,
        "answer": queries.serving_at(service, at) if at is not None else None,
        "answer_shares": queries.shares_at(service, at) if at is not None else [],
        "shares": queries.share_history(service, limit=SHARES_SHOWN),
        "history": history[:HISTORY_SHOWN],
        "more": len(history) > HISTORY_SHOWN,
    }
    return render(request, "ledger/serving_history.html", context)
