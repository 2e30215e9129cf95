"""The drill's forms. The plan form gathers what the API's body holds, one row per task
type (its sample set, weight and bounds), and hands it to the same verb; the verb's
refusals, named by path (`mix[1].sample_set`), are put back beside the field they name."""

from __future__ import annotations

import re
from typing import Any

from django import forms
from django.utils.translation import gettext_lazy as _

from ledger.models import Service, TaskType
from releases.drills.plan import ARRIVAL_TYPES, DEFAULT_CEILING, DEFAULT_SIGNERS, SIGNER_ROLES
from releases.models import Drill

TASK_ROWS = 4
_STAGE_LINE = re.compile(r"^\s*(\d+)\s*s?\s*[@, ]\s*(\d+(?:\.\d+)?)\s*(?:/s)?\s*$")


def _row(number: int, name: str) -> str:
    return f"task_{number}_{name}"


class PlanForm(forms.Form):
    name = forms.CharField(max_length=160, help_text=_("e.g. Month-end close, December"))
    business_event = forms.CharField(
        max_length=200, required=False, help_text=_("The peak rehearsed, in the business's words.")
    )
    window_starts_at = forms.DateTimeField(
        required=False,
        label=_("Peak starts"),
        help_text=_("UTC, e.g. 2026-12-31 06:00. Needed to price a scale-up and for a blackout."),
    )
    window_ends_at = forms.DateTimeField(required=False, label=_("Peak ends"))
    services = forms.ModelMultipleChoiceField(
        queryset=Service.objects.order_by("slug"),
        to_field_name="slug",
        help_text=_("The services the peak will load."),
    )
    arrival_type = forms.ChoiceField(
        choices=[(kind, kind) for kind in ARRIVAL_TYPES],
        label=_("Arrivals"),
        help_text=_(
            "constant: evenly spaced; poisson: random gaps at the same mean rate; ramp: "
            "stages, each reached linearly from the one before."
        ),
    )
    rate = forms.FloatField(
        required=False, min_value=0, label=_("Rate (requests/s)"), help_text=_("constant, poisson")
    )
    duration_s = forms.IntegerField(
        required=False, min_value=1, label=_("Duration (s)"), help_text=_("constant, poisson")
    )
    stages = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        label=_("Ramp stages"),
        help_text=_("One stage a line: seconds, then the rate to reach, e.g. 60 20"),
    )
    in_flight_ceiling = forms.IntegerField(
        required=False,
        min_value=1,
        initial=DEFAULT_CEILING,
        help_text=_("At most this many requests in flight; a start above it counts as dropped."),
    )
    seed = forms.IntegerField(
        required=False, min_value=0, help_text=_("Left empty: drawn now, and kept with the plan.")
    )
    extra_replicas = forms.IntegerField(required=False, min_value=0, initial=0)
    pool = forms.CharField(required=False, max_length=100, help_text=_("The pool scaled up."))
    prewarm_pools = forms.CharField(
        required=False, max_length=500, help_text=_("Pools to pre-warm, separated by commas.")
    )
    owner = forms.CharField(
        required=False, max_length=150, help_text=_("Username of who owns the scale-up.")
    )
    reclaim_by = forms.DateTimeField(required=False, help_text=_("UTC; when it must be gone."))
    signers = forms.MultipleChoiceField(
        choices=[(role.value, role.label) for role in SIGNER_ROLES],
        initial=DEFAULT_SIGNERS,
        widget=forms.CheckboxSelectMultiple,
        help_text=_("Whose sign-off concludes the drill."),
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        task_types = [("", "—")] + [
            (slug, slug)
            for slug in TaskType.objects.order_by("slug").values_list("slug", flat=True)
        ]
        for number in range(1, TASK_ROWS + 1):
            first = number == 1
            self.fields[_row(number, "task_type")] = forms.ChoiceField(
                choices=task_types, required=first, label=_("Task type")
            )
            self.fields[_row(number, "sample_set")] = forms.CharField(
                required=first,
                max_length=120,
                label=_("Sample set"),
                help_text=_("name, or name@version") if first else "",
            )
            self.fields[_row(number, "weight")] = forms.FloatField(
                required=first, min_value=0, label=_("Weight")
            )
            self.fields[_row(number, "ttft_p95_ms")] = forms.FloatField(
                required=first, min_value=0, label=_("p95 TTFT (ms)")
            )
            self.fields[_row(number, "e2e_p95_ms")] = forms.FloatField(
                required=first, min_value=0, label=_("p95 end to end (ms)")
            )
            self.fields[_row(number, "failure_message")] = forms.CharField(
                required=False,
                max_length=500,
                label=_("Failure message"),
                help_text=_("Empty: the gateway policy's") if first else "",
            )
            self.fields[_row(number, "degrade_to")] = forms.CharField(
                required=False,
                max_length=200,
                label=_("Degrade to"),
                help_text=_("Empty: the gateway policy's") if first else "",
            )
        self.rows: list[int] = []

    def task_rows(self) -> list[list[forms.BoundField]]:
        names = (
            *("task_type", "sample_set", "weight", "ttft_p95_ms", "e2e_p95_ms"),
            *("failure_message", "degrade_to"),
        )
        return [[self[_row(n, name)] for name in names] for n in range(1, TASK_ROWS + 1)]

    def clean_stages(self) -> list[dict[str, Any]]:
        stages = []
        for number, line in enumerate(self.cleaned_data["stages"].splitlines(), start=1):
            if not line.strip():
                continue
            match = _STAGE_LINE.match(line)
            if match is None:
                raise forms.ValidationError(
                    _("line %(number)d: expected seconds and a rate, e.g. 60 20; got %(line)s")
                    % {"number": number, "line": repr(line.strip())}
                )
            stages.append({"duration_s": int(match[1]), "rate": float(match[2])})
        return stages

    def plan(self) -> dict[str, Any]:
        """The API's body, from what the form holds."""
        data = self.cleaned_data
        mix, bounds = [], {}
        self.rows = []
        for number in range(1, TASK_ROWS + 1):
            task_type = data.get(_row(number, "task_type"))
            if not task_type:
                continue
            self.rows.append(number)
            mix.append(
                {
                    "task_type": task_type,
                    "sample_set": data.get(_row(number, "sample_set")) or "",
                    "weight": data.get(_row(number, "weight")),
                }
            )
            bounds[task_type] = {
                "ttft_p95_ms": data.get(_row(number, "ttft_p95_ms")),
                "e2e_p95_ms": data.get(_row(number, "e2e_p95_ms")),
                "failure_message": data.get(_row(number, "failure_message")) or "",
                "degrade_to": data.get(_row(number, "degrade_to")) or "",
            }
        kind = data["arrival_type"]
        arrival: dict[str, Any] = {"type": kind}
        if kind == "ramp":
            arrival["stages"] = data["stages"]
        else:
            arrival.update(rate=data.get("rate"), duration_s=data.get("duration_s"))
        extra, pool = data.get("extra_replicas") or 0, data.get("pool") or ""
        capacity: dict[str, Any] = {}
        prewarm = [p.strip() for p in (data.get("prewarm_pools") or "").split(",") if p.strip()]
        if extra or pool or prewarm or data.get("owner") or data.get("reclaim_by"):
            capacity = {
                "extra_replicas": extra,
                "pool": pool,
                "prewarm_pools": prewarm,
                "owner": data.get("owner") or "",
                "reclaim_by": data["reclaim_by"].isoformat() if data.get("reclaim_by") else None,
            }
        starts, ends = data.get("window_starts_at"), data.get("window_ends_at")
        return {
            "name": data["name"],
            "business_event": data.get("business_event") or "",
            "window": {
                "starts_at": starts.isoformat() if starts else None,
                "ends_at": ends.isoformat() if ends else None,
            },
            "services": [service.slug for service in data["services"]],
            "mix": mix,
            "arrival": arrival,
            "bounds": bounds,
            "capacity": capacity,
            "in_flight_ceiling": data.get("in_flight_ceiling"),
            "seed": data.get("seed"),
            "signers": list(data.get("signers") or []),
        }

    def field_for(self, path: str) -> str | None:
        """The form field a verb's path names, or None for the summary."""
        flat = {
            "name": "name",
            "business_event": "business_event",
            "window.starts_at": "window_starts_at",
            "window.ends_at": "window_ends_at",
            "arrival.type": "arrival_type",
            "arrival.rate": "rate",
            "arrival.duration_s": "duration_s",
            "in_flight_ceiling": "in_flight_ceiling",
            "seed": "seed",
            "signers": "signers",
        }
        if path in flat:
            return flat[path]
        if path.startswith("services"):
            return "services"
        if path.startswith("arrival"):
            return "stages"
        if path.startswith("capacity."):
            name = path.split(".", 1)[1]
            return name if name in self.fields else None
        if match := re.match(r"^mix\[(\d+)\]\.(\w+)$", path):
            index = int(match[1])
            if index < len(self.rows):
                return _row(self.rows[index], match[2])
        if match := re.match(r"^bounds\.([\w-]+)(?:\.(\w+))?$", path):
            for number in self.rows:
                if self.cleaned_data.get(_row(number, "task_type")) == match[1]:
                    return _row(number, match[2] or "ttft_p95_ms")
        return None


class ConclusionForm(forms.Form):
    protected = forms.MultipleChoiceField(
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text=_("Task types that met their bounds or were kept whole."),
    )
    degraded = forms.MultipleChoiceField(
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text=_("Task types that degraded (fell back, queued or stopped)."),
    )
    failure_message_seen = forms.TypedChoiceField(
        required=False,
        choices=[("", "—"), ("yes", _("Yes")), ("no", _("No"))],
        coerce=lambda value: value == "yes",
        empty_value=None,
        label=_("Did users of a degraded task type see its failure message?"),
    )
    reclaimed_at = forms.DateTimeField(
        required=False, help_text=_("UTC; when the scale-up was given back.")
    )
    reclaimed_by = forms.CharField(required=False, max_length=150, help_text=_("A username."))
    action_owner = forms.CharField(
        required=False,
        max_length=150,
        label=_("Or: open action owner"),
        help_text=_("When the scale-up is not reclaimed yet: who will, and by when."),
    )
    action_due_on = forms.DateField(required=False, label=_("Action due on"))
    prewarm_pools = forms.CharField(
        required=False, max_length=500, help_text=_("Pools to pre-warm for the peak, by commas.")
    )
    throttles = forms.CharField(
        required=False,
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text=_("Throttles to set in the gateway policy for the peak."),
    )
    blackout = forms.BooleanField(
        required=False,
        label=_("Put the peak's window on the calendar as a blackout"),
    )

    def __init__(self, *args: Any, drill: Drill, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        choices = [(entry["task_type"], entry["task_type"]) for entry in drill.mix]
        for name in ("protected", "degraded"):
            self.fields[name].choices = choices  # type: ignore[attr-defined]
        self.fields["prewarm_pools"].initial = ", ".join(
            (drill.capacity or {}).get("prewarm_pools", [])
        )

    def answers(self) -> dict[str, Any]:
        data = dict(self.cleaned_data)
        data["prewarm_pools"] = [
            p.strip() for p in (data.get("prewarm_pools") or "").split(",") if p.strip()
        ]
        for name in ("reclaimed_at", "action_due_on"):
            data[name] = data[name].isoformat() if data.get(name) else None
        return data


def place_errors(form: forms.Form, errors: dict[str, str]) -> None:
    """A verb's refusals beside the fields they name; the rest in the summary."""
    field_for = getattr(form, "field_for", None)
    for path, message in errors.items():
        name = field_for(path) if field_for else (path if path in form.fields else None)
        if name and name in form.fields:
            form.add_error(name, message)
        else:
            form.add_error(None, f"{path}: {message}" if path else message)
