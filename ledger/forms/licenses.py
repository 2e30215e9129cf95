"""The license review and the record of a gated license's acceptance, as page forms.

They shape input; the verbs (`ledger.services.licenses`) decide, e.g. that a
rejection needs a comment, and the view puts their refusals beside the field.
"""

from __future__ import annotations

from django import forms
from django.utils.translation import gettext_lazy as _

from ledger.models.registry import ACCEPTED_BY_MAX_LENGTH, TERMS_VERSION_MAX_LENGTH
from ledger.services import COMMENT_MAX_LENGTH

DECISIONS = [("approved", _("Approve")), ("rejected", _("Reject"))]


class LicenseReviewForm(forms.Form):
    # Named as the verb and the API name it, so a refusal lands beside the field.
    license_approval = forms.ChoiceField(
        label=_("Decision"),
        choices=DECISIONS,
        widget=forms.RadioSelect,
        error_messages={
            "invalid_choice": _("%(value)s is not a decision: choose approve or reject."),
            "required": _("Choose approve or reject."),
        },
    )
    comment = forms.CharField(
        label=_("Comment"),
        required=False,
        max_length=COMMENT_MAX_LENGTH,
        widget=forms.Textarea(attrs={"rows": 4}),
        help_text=_(
            "Required to reject: say why, the asset's team reads it. Recorded in the "
            "event ledger with your decision."
        ),
    )


class LicenseAcceptanceForm(forms.Form):
    terms_version = forms.CharField(
        label=_("Terms version"),
        max_length=TERMS_VERSION_MAX_LENGTH,
        help_text=_(
            "The version or date of the terms accepted, as the license states it, e.g. "
            "3.1 or 2024-07-23."
        ),
    )
    accepted_by = forms.CharField(
        label=_("Accepted by"),
        max_length=ACCEPTED_BY_MAX_LENGTH,
        help_text=_("The person who accepted the terms on behalf of the company."),
    )
    accepted_at = forms.DateTimeField(
        label=_("Accepted at"),
        required=False,
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
        help_text=_("When the terms were accepted, in the site's time zone. Leave empty for now."),
    )
    note = forms.CharField(
        label=_("Note"),
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text=_(
            "Where it was accepted (e.g. the model hub's gate) and anything an auditor should know."
        ),
    )
