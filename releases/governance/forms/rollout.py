"""The SRE's forms: an observation of a stage, a rollback, its confirmation, how a
release ended, an unauthorized change reconciled, and a service's own playbook."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django import forms
from django.utils import timezone
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from ledger.engines import Engine
from lib.forms import InlineValidationMixin
from releases.governance import playbooks
from releases.guards import MEASURES
from releases.models import Release, RollbackEvent

_RATE = {"min_value": 0, "max_value": 100, "decimal_places": 3}
_MS = {"min_value": 0, "max_value": 10_000_000, "decimal_places": 3}


def _measure_label(key: str) -> str:
    metric = MEASURES[key]
    return _("%(measure)s (%(unit)s)") % {"measure": gettext(metric.label), "unit": metric.unit}


def _measure_field(key: str, side: str) -> forms.Field:
    metric = MEASURES[key]
    bounds = _RATE if metric.unit == "%" else _MS
    return forms.DecimalField(
        required=False,
        label=(_("Candidate: %(measure)s") if side == "candidate" else _("Baseline: %(measure)s"))
        % {"measure": _measure_label(key)},
        help_text=_("Leave empty when not measured."),
        **bounds,  # type: ignore[arg-type]
    )


class ObservationForm(InlineValidationMixin, forms.Form):
    """The candidate and the live baseline over one window, as aggregates."""

    window_start = forms.DateTimeField(
        label=_("Window start"),
        help_text=_("In your time zone, e.g. 2026-12-03 14:00."),
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
    )
    window_end = forms.DateTimeField(
        label=_("Window end"),
        help_text=_("When the measurement stopped; not in the future."),
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
    )
    candidate_requests = forms.IntegerField(
        required=False,
        min_value=0,
        label=_("Candidate: requests"),
        help_text=_("How many requests the candidate served in the window."),
    )
    baseline_requests = forms.IntegerField(
        required=False,
        min_value=0,
        label=_("Baseline: requests"),
        help_text=_("How many the live revision served in the same window."),
    )
    source = forms.CharField(
        required=False,
        max_length=60,
        label=_("Source"),
        help_text=_("Where the numbers come from, e.g. gateway dashboard, Prometheus."),
    )
    source_error = forms.CharField(
        required=False,
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 2}),
        label=_("Metrics source failed"),
        help_text=_(
            "Fill in only when the numbers could not be read: the observation is then "
            "an error, counted against its own budget and never as a pass."
        ),
    )

    def __init__(
        self, *args: Any, stage_started_at: dt.datetime | None = None, **kwargs: Any
    ) -> None:
        """`stage_started_at`: when the stage observed began; the default window (the last
        quarter of an hour) starts no earlier."""
        super().__init__(*args, **kwargs)
        for side in ("candidate", "baseline"):
            for key in MEASURES:
                self.fields[f"{side}_{key}"] = _measure_field(key, side)
        if not self.is_bound:
            now = timezone.localtime().replace(microsecond=0)
            end = now.replace(second=0)
            start = end - dt.timedelta(minutes=15)
            if stage_started_at is not None:
                start = max(start, timezone.localtime(stage_started_at).replace(microsecond=0))
                if end <= start:  # the stage began within the current minute
                    # …or within the current second: a window of at least one second (the
                    # service accepts an end a little ahead of its clock).
                    end = max(now, start + dt.timedelta(seconds=1))
            self.initial.setdefault("window_end", end)
            self.initial.setdefault("window_start", start)

    def side(self, name: str) -> dict[str, Any]:
        """One side's aggregates as `record_observation` takes them."""
        data = self.cleaned_data
        values: dict[str, Any] = {}
        if data.get(f"{name}_requests") is not None:
            values["requests"] = data[f"{name}_requests"]
        for key in MEASURES:
            value = data.get(f"{name}_{key}")
            if value is not None:
                values[key] = float(value)
        return values

    def measure_rows(self) -> list[tuple[str, forms.BoundField, forms.BoundField]]:
        rows = [(str(_("Requests")), self["candidate_requests"], self["baseline_requests"])]
        for key in MEASURES:
            rows.append(
                (
                    _measure_label(key),
                    self[f"candidate_{key}"],
                    self[f"baseline_{key}"],
                )
            )
        return rows


class ReasonForm(forms.Form):
    reason = forms.CharField(
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 2}),
        label=_("Reason"),
        help_text=_("Recorded in the release's timeline and the ledger."),
    )


class EarlyStartForm(forms.Form):
    early_reason = forms.CharField(
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 2}),
        label=_("Why start before the planned start"),
        help_text=_(
            "The signers approved it for the planned start; your reason is kept with the "
            "start in the ledger."
        ),
    )


def prefix_cache_help(engine: str | None) -> str:
    """How the target's engine empties its prefix cache, from `playbooks.PREFIX_CACHE_FLUSH`."""
    flush = playbooks.prefix_cache_flush(engine) if engine else None
    name = gettext(Engine(engine).label) if engine in Engine.values else engine
    if flush is not None:
        how = gettext("%(engine)s: %(call)s, %(caveat)s.") % {
            "engine": name,
            "call": flush.call,
            "caveat": gettext(flush.caveat),
        }
    elif engine:
        how = gettext(
            "%(engine)s: no flush call is known; restart the replica to empty its prefix cache."
        ) % {"engine": name}
    else:
        how = gettext(
            "vLLM: POST /reset_prefix_cache (with VLLM_SERVER_DEV_MODE=1); SGLang: POST "
            "/flush_cache; other engines: restart the replica."
        )
    return gettext(
        "The engine's prefix (KV) cache. %(how)s Leave it for later if you do not know yet."
    ) % {"how": how}


class CacheQuestionsForm(forms.Form):
    """Were the caches flushed after the rollback: asked when it is recorded (optional),
    and on the rollback's page later. `engine`: the target's, whose flush call the help
    names."""

    prefix_cache = forms.ChoiceField(
        required=False,
        choices=RollbackEvent.CacheAnswer.choices,
        label=_("Prefix (KV) cache flushed?"),
    )
    response_cache = forms.ChoiceField(
        required=False,
        choices=RollbackEvent.CacheAnswer.choices,
        label=_("Response cache flushed?"),
        help_text=_(
            "The gateway's response cache: until it is flushed, cached answers of the "
            "revision rolled back may still be served."
        ),
    )

    def __init__(self, *args: Any, engine: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.for_engine(engine)

    def for_engine(self, engine: str | None) -> None:
        self.fields["prefix_cache"].help_text = prefix_cache_help(engine)


class RollbackForm(CacheQuestionsForm):
    field_order = [
        "target_revision",
        "symptom",
        "reason",
        "confirm_rolled_back",
        "rolled_back_reason",
        "prefix_cache",
        "response_cache",
    ]

    target_revision = forms.TypedChoiceField(
        coerce=int,
        label=_("Roll back to"),
        help_text=_(
            "The rollback plan's target is chosen; pick another revision only if the plan "
            "is wrong, and read what changes below first."
        ),
    )
    symptom = forms.ChoiceField(
        required=False,
        label=_("Symptom"),
        help_text=_("What you see; it is recorded with the rollback."),
    )
    reason = forms.CharField(
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 2}),
        label=_("Reason"),
        help_text=_("Why you roll back, e.g. p95 TTFT 2.1 s for tenant support since 14:05."),
    )

    def __init__(
        self,
        *args: Any,
        revisions: list[tuple[int | str, str]],
        offers_rolled_back: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        target = self.fields["target_revision"]
        assert isinstance(target, forms.TypedChoiceField)
        target.choices = revisions
        if offers_rolled_back:
            # Some revision to choose from was rolled back off the service.
            self.fields["confirm_rolled_back"] = forms.BooleanField(
                required=False,
                label=_("Go back to a rolled-back revision anyway"),
                help_text=_(
                    "Only when the revision you chose was rolled back off this service: "
                    "tick to confirm you put it back."
                ),
            )
            self.fields["rolled_back_reason"] = forms.CharField(
                required=False,
                max_length=2000,
                widget=forms.Textarea(attrs={"rows": 2}),
                label=_("Why go back to it anyway"),
                help_text=_(
                    "Only for a rolled-back revision, e.g. the errors came from the gateway, "
                    "not from it. Recorded with the rollback."
                ),
            )
        self.order_fields(self.field_order)
        symptom = self.fields["symptom"]
        assert isinstance(symptom, forms.ChoiceField)
        symptom.choices = [
            ("", _("— not one of these —")),
            *(
                (mode, playbooks.FAILURE_MODE_TITLES.get(mode, title))
                for mode, title in playbooks.FAILURE_MODES.items()
            ),
        ]


class ConfirmRollbackForm(forms.Form):
    succeeded = forms.TypedChoiceField(
        choices=[
            ("yes", _("It worked: the target serves and the symptom is gone")),
            ("no", _("It did not")),
        ],
        coerce=lambda value: value == "yes",
        widget=forms.RadioSelect,
        label=_("Outcome"),
        help_text=_("Nothing could verify this rollback automatically: say how it went."),
    )
    note = forms.CharField(
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 2}),
        label=_("What you checked"),
        help_text=_("e.g. error rate back under 1 % at 14:22 on the gateway dashboard."),
    )


class CloseForm(forms.Form):
    close_code = forms.ChoiceField(
        choices=Release.CloseCode.choices,
        label=_("Close code"),
        help_text=_("How the release ended; set automatically, correct it here."),
    )
    note = forms.CharField(
        required=False,
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 2}),
        label=_("Note"),
        help_text=_("What happened, for the post-implementation review."),
    )
    incidents = forms.CharField(
        required=False,
        max_length=5000,
        widget=forms.Textarea(attrs={"rows": 2}),
        label=_("Incidents"),
        help_text=_(
            "One a line: the ticket id, then its address, e.g. INC-4412 https://tickets.example.com/INC-4412"
        ),
    )

    def clean_incidents(self) -> list[dict[str, str]]:
        found = []
        for line in self.cleaned_data["incidents"].splitlines():
            parts = line.split()
            if parts:
                found.append({"ticket": parts[0], "url": parts[1] if len(parts) > 1 else ""})
        return found


class ReconcileForm(forms.Form):
    note = forms.CharField(
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 2}),
        label=_("How it was put back"),
        help_text=_("e.g. node 7 restarted with the registered image; the next probe matched."),
    )


class PlaybookForm(forms.Form):
    diagnosis = forms.CharField(
        max_length=12000,
        widget=forms.Textarea(attrs={"rows": 6}),
        label=_("Diagnosis steps"),
        help_text=_("In the order to check them, one a line."),
    )
    recovery = forms.CharField(
        max_length=12000,
        widget=forms.Textarea(attrs={"rows": 5}),
        label=_("Recovery actions"),
        help_text=_("Least disruptive first, one a line; rolling back is usually last."),
    )


class DegradationForm(forms.Form):
    may_degrade = forms.TypedChoiceField(
        choices=[("yes", _("May degrade")), ("no", _("Never silently"))],
        coerce=lambda value: value == "yes",
        widget=forms.RadioSelect,
        label=_("When the service degrades"),
        help_text=_("Tasks acting on money, contracts or tools never degrade silently."),
    )
    how = forms.CharField(
        max_length=300,
        label=_("How"),
        help_text=_("e.g. move to the async queue; or: stop with an explainable error."),
    )
