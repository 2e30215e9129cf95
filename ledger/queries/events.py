"""Reading events: what an update changed, before and after; what a review decided;
which events belong to a service; what their subjects are called."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypedDict

from django.apps import apps
from django.db import models
from django.db.models import Q, QuerySet
from django.db.models.functions import Cast
from django.utils.text import capfirst

from ledger.models import Event, LicenseAcceptance, Revision, Service


class FieldChange(TypedDict):
    field: str
    before: Any
    after: Any


def event_changes(
    event: Event, labels: dict[str, dict[Any, str]] | None = None
) -> list[FieldChange]:
    """The fields an update event changed, before and after (template filter `change_value`
    shows them).

    `labels` turns ids into words for relation fields, e.g. {"live_revision": {12: "r3"}}.
    """
    data = event.payload_data
    before, after = data.get("before"), data.get("after")
    if not isinstance(before, dict) or not isinstance(after, dict):
        return []
    labels = labels or {}

    def named(name: str, value: Any) -> Any:
        names = labels.get(name)
        if names and isinstance(value, int | str) and value in names:
            return names[value]
        return value

    return [
        {
            "field": name,
            "before": named(name, before.get(name)),
            "after": named(name, after[name]),
        }
        for name in sorted(after)
    ]


class EventNote(TypedDict):
    """What an event decided and said, for a list of events: a review's decision and
    comment, an acceptance's terms, a live-revision change's reason."""

    decision: str  # a word shown as a badge, or ""
    text: str  # the comment, terms or reason, or ""


def event_notes(event: Event) -> EventNote | None:
    """The decision and words an event carries, if any."""
    data = event.payload_data
    if event.action == "model_asset.license_reviewed":
        return {"decision": str(data.get("decision", "")), "text": str(data.get("comment", ""))}
    if event.action == "license.accepted":
        after = data.get("after") or {}
        terms = f"{after.get('license', '')} terms {after.get('terms_version', '')}".strip()
        return {"decision": "accepted", "text": f"{terms}, by {after.get('accepted_by', '')}"}
    reason = data.get("reason")
    if isinstance(reason, str) and reason:
        return {"decision": "", "text": reason}
    return None


def describe_for_timeline(
    events: Iterable[Event], labels: dict[str, dict[Any, str]] | None = None
) -> None:
    """Give each event the `changes` and `note` a timeline shows (ledger/_event.html)."""
    for event in events:
        event.changes = event_changes(event, labels)  # type: ignore[attr-defined]
        event.note = event_notes(event)  # type: ignore[attr-defined]


def subject_type_names() -> dict[str, str]:
    """Each model's event subject type (`ledger.modelasset`) and the name people read
    ("Model asset"), from the models rather than SELECT DISTINCT over every event."""
    return {
        model._meta.label_lower: capfirst(str(model._meta.verbose_name))
        for app in ("ledger", "replay", "releases")
        for model in apps.get_app_config(app).get_models()
        if model is not Event
    }


def subject_type_choices() -> list[tuple[str, str]]:
    """The subject types to filter by, by the names people read."""
    return sorted(subject_type_names().items(), key=lambda item: item[1])


def events_of_service(events: QuerySet[Event], slug: str) -> QuerySet[Event]:
    """Events of the service `slug` and of everything it runs: its own events and its
    revisions', capabilities', evidence's and runs' (recorded with the service), and
    those of the model assets and runtimes its revisions use and the license
    acceptances of those assets (recorded with no service, since many may share them)."""
    revisions = Revision.objects.filter(service__slug=slug)
    asset_ids = revisions.values("model_asset_id")
    as_text: dict[str, models.Field] = {"output_field": models.CharField()}
    return events.filter(
        Q(service__in=Service.objects.filter(slug=slug).values("pk"))
        | Q(
            subject_type="ledger.modelasset",
            subject_id__in=revisions.values(subject=Cast("model_asset_id", **as_text)),
        )
        | Q(
            subject_type="ledger.runtime",
            subject_id__in=revisions.values(subject=Cast("runtime_id", **as_text)),
        )
        | Q(
            subject_type="ledger.licenseacceptance",
            subject_id__in=LicenseAcceptance.objects.filter(model_asset__in=asset_ids).values(
                subject=Cast("pk", **as_text)
            ),
        )
    )
