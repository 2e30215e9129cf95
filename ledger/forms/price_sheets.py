"""The form that records a price sheet version on the price sheets page.

It shapes input; the verb (`ledger.services.price_sheets`) decides, e.g. that a day
already recorded is refused, and the view puts its refusals beside the field.
"""

from __future__ import annotations

from django import forms
from django.utils.translation import gettext_lazy as _

from ledger.services.price_sheets import GPU_MODEL_MAX_LENGTH, NOTE_MAX_LENGTH


class PriceSheetForm(forms.Form):
    # Named as the verb and the API name them, so a refusal lands beside the field.
    gpu_model = forms.CharField(
        label=_("GPU model"),
        max_length=GPU_MODEL_MAX_LENGTH,
        help_text=_(
            "As runtimes name it, e.g. H100-80GB; the price applies to every runtime on it."
        ),
    )
    price_per_gpu_hour = forms.CharField(
        label=_("Price per GPU-hour"),
        widget=forms.TextInput(attrs={"inputmode": "decimal"}),
        help_text=_(
            "What one GPU of this model costs for an hour, at most 4 decimals, e.g. 2.4500."
        ),
    )
    currency = forms.CharField(
        label=_("Currency"),
        max_length=3,
        initial="USD",
        help_text=_("ISO 4217 code in capitals, e.g. USD, EUR, CNY."),
    )
    effective_from = forms.DateField(
        label=_("Effective from"),
        widget=forms.DateInput(attrs={"type": "date"}, format="%Y-%m-%d"),
        help_text=_(
            "The first day (UTC) this price holds, until a later version; a future day "
            "records a price announced ahead."
        ),
        error_messages={"invalid": _("Give a date as YYYY-MM-DD.")},
    )
    note = forms.CharField(
        label=_("Note"),
        required=False,
        max_length=NOTE_MAX_LENGTH,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text=_("Where the price comes from, e.g. the cloud's list price or a contract."),
    )
