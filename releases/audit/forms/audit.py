"""Forms of the auditor's page (filters kept in the URL), export requests and webhooks."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django import forms
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from ledger.models import Service
from lib.forms import NamedChoicesMixin, shown_choices
from releases.audit.records import RECORD_TYPES, AuditFilters
from releases.audit.webhook_types import EVENT_TYPES
from releases.models import Export, Release


def _any(choices: Any, any_label: Any) -> list[tuple[str, Any]]:
    return [("", any_label), *choices]


class AuditFilterForm(NamedChoicesMixin, forms.Form):
    """The auditor's filters: a plain GET form; with htmx each change refreshes the
    results and the address (so a filtered record can be bookmarked and shared)."""

    date_from = forms.DateField(
        required=False,
        label=_("From"),
        widget=forms.DateInput(attrs={"type": "date"}),
        help_text=_("On or after this day (UTC)."),
    )
    date_to = forms.DateField(
        required=False,
        label=_("To"),
        widget=forms.DateInput(attrs={"type": "date"}),
        help_text=_("On or before this day (UTC)."),
    )
    service = forms.CharField(
        required=False,
        max_length=100,
        label=_("Service"),
        help_text=_("A service slug, e.g. kb-assistant."),
    )
    tier = forms.ChoiceField(
        required=False, label=_("Tier"), choices=_any(Service.Tier.choices, _("Any tier"))
    )
    change_kind = forms.ChoiceField(
        required=False,
        label=_("Change kind"),
        choices=_any(shown_choices(Release.ChangeKind.choices), _("Any change kind")),
    )
    path = forms.ChoiceField(
        required=False,
        label=_("Path"),
        choices=_any(shown_choices(Release.Path.choices), _("Any path")),
    )
    state = forms.ChoiceField(
        required=False,
        label=_("Release state"),
        choices=_any(Release.State.choices, _("Any state")),
    )
    type = forms.ChoiceField(
        required=False,
        choices=[(key, r.label) for key, r in RECORD_TYPES.items()],
        widget=forms.HiddenInput,
    )

    def __init__(self, *args: Any, path_url: str = "", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not path_url:
            return
        for field in self.fields.values():
            widget = field.widget
            if widget.is_hidden:
                continue
            typed = isinstance(widget, forms.TextInput) and not isinstance(widget, forms.DateInput)
            if typed:
                widget.input_type = "search"
            widget.attrs.update(
                {
                    "hx-get": path_url,
                    "hx-trigger": "input changed delay:250ms, search" if typed else "change",
                    "hx-target": "#results",
                    "hx-push-url": "true",
                    "hx-include": "closest form",
                    "hx-sync": "closest form:replace",
                    "autocomplete": "off",
                }
            )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        start, end = data.get("date_from"), data.get("date_to")
        if start and end and start > end:
            self.add_error("date_to", _("The period ends before it starts."))
        return data

    def filters(self) -> AuditFilters:
        """The filters that validated; a field with an error is ignored (and says so)."""
        if not self.is_bound:
            return AuditFilters()
        self.is_valid()
        data = {k: v for k, v in getattr(self, "cleaned_data", {}).items() if k not in self.errors}
        start, end = data.get("date_from"), data.get("date_to")
        return AuditFilters(
            since=dt.datetime.combine(start, dt.time(), tzinfo=dt.UTC) if start else None,
            until=(
                dt.datetime.combine(end + dt.timedelta(days=1), dt.time(), tzinfo=dt.UTC)
                if end
                else None
            ),
            service=(data.get("service") or "").strip(),
            tier=data.get("tier") or "",
            change_kind=data.get("change_kind") or "",
            path=data.get("path") or "",
            state=data.get("state") or "",
        )

    @property
    def record_type(self) -> str:
        value = self.data.get("type") if self.is_bound else None
        return value if value in RECORD_TYPES else next(iter(RECORD_TYPES))


class ExportRequestForm(AuditFilterForm):
    """The filters again (hidden on the auditor's page, visible on the request page)
    and the format."""

    format = forms.ChoiceField(
        choices=Export.Format.choices,
        label=_("Format"),
        help_text=_(
            "CSV or JSON Lines for a spreadsheet or a script; the evidence bundle to "
            "prove the record to someone who does not trust this server."
        ),
    )
    field_order = ["format"]


def _event_type_choices() -> list[tuple[str, str]]:
    """Read when a form is made, so the note is in the reader's language."""
    return [
        (
            key,
            kind.label
            if kind.emitted
            else gettext("%(label)s (not emitted yet)") % {"label": kind.label},
        )
        for key, kind in EVENT_TYPES.items()
    ]


class WebhookSubscriptionForm(NamedChoicesMixin, forms.Form):
    name = forms.CharField(
        max_length=120,
        label=_("Name"),
        help_text=_("What receives the events, e.g. Change board bot."),
    )
    url = forms.URLField(
        label=_("URL"),
        max_length=500,
        assume_scheme="https",
        help_text=_(
            "Where events are POSTed. Its host and port must be on the webhooks' "
            "allow-list (WEBHOOK_ALLOWED_HOSTS)."
        ),
    )
    event_types = forms.MultipleChoiceField(
        label=_("Event types"),
        choices=_event_type_choices,
        widget=forms.CheckboxSelectMultiple,
        help_text=_("Types marked “not emitted yet” are delivered once their feature lands."),
    )
