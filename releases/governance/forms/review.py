"""The small forms of the release page: a sign-off, a waiver, a comment."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext

from lib.forms import shown_choices
from releases.models import SignOff


class SignOffForm(forms.Form):
    role = forms.ChoiceField(
        choices=shown_choices(SignOff.Role.choices),
        label=_("Role"),
        help_text=_("The role you sign for; one person signs one role on a release."),
    )
    decision = forms.ChoiceField(
        choices=SignOff.Decision.choices,
        widget=forms.RadioSelect,
        label=_("Decision"),
        help_text=_("Approve what the page shows now, or reject the release."),
    )
    comment = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}),
        required=False,
        max_length=5000,
        label=_("Comment"),
        help_text=_(
            "What you checked, or what must change. A rejection needs a comment: the filer "
            "reads it."
        ),
    )
    # Shown beside the label instead of "(optional)" (templates/lib/_form.html).
    comment.required_when = _("required to reject")  # type: ignore[attr-defined]

    def __init__(self, *args: Any, roles: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        labels = dict(shown_choices(SignOff.Role.choices))
        field = self.fields["role"]
        assert isinstance(field, forms.ChoiceField)
        field.choices = [(role, labels[role]) for role in roles]
        if len(roles) == 1:
            field.initial = roles[0]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if cleaned.get("decision") == SignOff.Decision.REJECT and not cleaned.get("comment"):
            self.add_error("comment", _("A rejection needs a comment: the filer reads it."))
        return cleaned


class WaiverForm(forms.Form):
    gate = forms.ChoiceField(
        label=_("Gate"),
        help_text=_("The gate to set aside for this release only."),
    )
    reason = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2}),
        max_length=5000,
        label=_("Reason"),
        help_text=_(
            "Why the release may go ahead without this gate; shown wherever the release is."
        ),
    )
    expires_at = forms.DateTimeField(
        label=_("Expires"),
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
        input_formats=["%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M:%S"],
        help_text=_("When the waiver lapses and the gate counts again (server time zone)."),
    )

    def __init__(
        self,
        *args: Any,
        gates: list[tuple[str, str]],
        tier: str,
        max_days: int,
        bound: dt.datetime,
        **kwargs: Any,
    ) -> None:
        """`bound`: the latest expiry the verb accepts now, `max_days` after now on a
        service of `tier` (`releases.policy.waiver_bound`); the verb refuses later ones."""
        super().__init__(*args, **kwargs)
        field = self.fields["gate"]
        assert isinstance(field, forms.ChoiceField)
        field.choices = shown_choices(gates)  # the titles of policy.GATES, in English there
        latest = timezone.localtime(bound)
        expires = self.fields["expires_at"]
        expires.initial = min(timezone.localtime() + dt.timedelta(days=7), latest).replace(
            second=0, microsecond=0, tzinfo=None
        )
        expires.widget.attrs["max"] = f"{latest:%Y-%m-%dT%H:%M}"
        expires.help_text = _(
            "When the waiver lapses and the gate counts again (server time zone). At most "
            "%(days)s days on this %(tier)s service: until %(until)s."
        ) % {
            "days": max_days,
            "tier": pgettext("state word", tier),
            "until": f"{latest:%Y-%m-%d %H:%M %Z}",
        }

    def clean_expires_at(self) -> dt.datetime:
        value: dt.datetime = self.cleaned_data["expires_at"]
        if value <= timezone.now():
            raise ValidationError(_("The expiry must be in the future."))
        return value


class CommentForm(forms.Form):
    body = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}),
        max_length=10000,
        label=_("Comment"),
        help_text=_("Seen by everyone who reads the release."),
    )
