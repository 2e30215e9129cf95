"""Forms of the auditor's page (filters kept in the URL), export requests and webhooks."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django import forms

from ledger.models import Service
from lib.forms import NamedChoicesMixin
from releases.models import Export, Release
from releases.records import RECORD_TYPES, AuditFilters
from releases.webhook_types import EVENT_TYPES


def _any(choices: Any, word: str) -> list[tuple[str, str]]:
    return [("", f"Any {word}"), *choices]


class AuditFilterForm(NamedChoicesMixin, forms.Form):
    """The auditor's filters: a plain GET form; with htmx each change refreshes the
    results and the address (so a filtered record can be bookmarked and shared)."""

    date_from = forms.DateField(
        required=False,
        label="From",
        widget=forms.DateInput(attrs={"type": "date"}),
        help_text="On or after this day (UTC).",
    )
    date_to = forms.DateField(
        required=False,
        label="To",
        widget=forms.DateInput(attrs={"type": "date"}),
        help_text="On or before this day (UTC).",
    )
    service = forms.CharField(
        required=False, max_length=100, help_text="A service slug, e.g. kb-assistant."
    )
    tier = forms.ChoiceField(required=False, choices=_any(Service.Tier.choices, "tier"))
    change_kind = forms.ChoiceField(
        required=False,
        label="Change kind",
        choices=_any(Release.ChangeKind.choices, "change kind"),
    )
    path = forms.ChoiceField(required=False, choices=_any(Release.Path.choices, "path"))
    state = forms.ChoiceField(
        required=False,
        label="Release state",
        choices=_any(Release.State.choices, "state"),
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
            self.add_error("date_to", "The period ends before it starts.")
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
        help_text="CSV or JSON Lines for a spreadsheet or a script; the evidence bundle to "
        "prove the record to someone who does not trust this server.",
    )
    field_order = ["format"]


class WebhookSubscriptionForm(NamedChoicesMixin, forms.Form):
    name = forms.CharField(
        max_length=120, help_text="What receives the events, e.g. Change board bot."
    )
    url = forms.URLField(
        label="URL",
        max_length=500,
        assume_scheme="https",
        help_text="Where events are POSTed. Its host must be on the outbound allow-list "
        "(REPLAY_ALLOWED_HOSTS).",
    )
    event_types = forms.MultipleChoiceField(
        label="Event types",
        choices=[
            (key, kind.label + ("" if kind.emitted else " (not emitted yet)"))
            for key, kind in EVENT_TYPES.items()
        ],
        widget=forms.CheckboxSelectMultiple,
        help_text="Types marked “not emitted yet” are delivered once their feature lands.",
    )
