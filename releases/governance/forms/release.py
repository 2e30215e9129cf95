"""The release form as a page form: sections of plain fields, no JavaScript needed.

The JSON columns of `Release` are edited here as plain fields a person can
fill without writing JSON: lists as comma-separated words or one item a line,
gray stages as a fixed number of rows, each failed replay sample as its own
classification field. `to_release_fields()` turns the cleaned form into the
keyword arguments of the domain verbs (`create_release`, `update_release`),
which validate the whole (`releases.schemas`) and refuse naming the field.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from django_stubs_ext import StrOrPromise

from ledger.models import Revision, Service
from lib.forms import CommaListField, LinesField, shown_choices
from releases import policy
from releases.governance.forms.release_fields import FIELD_SPECS, LOGGING_PARTS, SECTIONS, saved
from releases.governance.playbooks import never_degrading
from releases.governance.snapshot import attname
from releases.models import Release, StandardChangeTemplate
from releases.schemas import (
    CLASSIFICATIONS,
    DECOMMISSION_KINDS,
    DOWNSTREAM_SYSTEMS,
    GUARDS,
    METRICS,
)
from replay.queries import sample_set_choices

# Rows of the gray plan shown at once: enough for a five-stage plan without JavaScript.
GRAY_ROWS = 5
# The guards' column heads as the form names them (releases.schemas.GUARDS keeps English).
_GUARD_LABELS: dict[str, StrOrPromise] = {
    "ttft_p95_ms": _("p95 TTFT (ms)"),
    "error_rate_pct": _("error rate (%)"),
    "structured_error_rate_pct": _("structured-output error rate (%)"),
}
STAGE_PARTS: dict[str, StrOrPromise] = {
    "traffic_pct": _("Traffic (%)"),
    "observation_minutes": _("Observe (min)"),
    **{key: _GUARD_LABELS.get(key, label) for key, label in GUARDS.items()},
    "analysis": _("Analysis"),
}
# A stage's analysis as the row's one choice: (on_breach, auto_promote); "" is none. The
# other keys (interval, error limit, queries) are the plan's, set through the API, kept.
ANALYSIS_CHOICES: dict[str, tuple[str, bool]] = {
    "hold": ("hold", False),
    "rollback": ("rollback", False),
    "hold_promote": ("hold", True),
    "rollback_promote": ("rollback", True),
}
ANALYSIS_LABELS = [
    ("", _("none: posted observations")),
    ("hold", _("Prometheus; a breach holds")),
    ("rollback", _("Prometheus; a breach rolls back")),
    ("hold_promote", _("Prometheus; a breach holds, a pass promotes")),
    ("rollback_promote", _("Prometheus; a breach rolls back, a pass promotes")),
]


class SampleSetsField(forms.MultipleChoiceField):
    """Names of replay sample sets, picked from those that exist. A name the list does
    not hold (an API client's, one posted by hand) is left to the verb, which refuses it
    beside this field as it refuses it from the API: "No sample set named x."."""

    widget = forms.CheckboxSelectMultiple

    def valid_value(self, value: str) -> bool:
        return True


def classification_field_name(sample_set: str, sample: str) -> str:
    return f"failure::{sample_set}::{sample}"


def degradation_field_name(sample_set: str, sample: str) -> str:
    return f"degradation::{sample_set}::{sample}"


def stage_field_name(row: int, part: str) -> str:
    return f"stage_{row}_{part}"


class MovesField(LinesField):
    """Decommission moves, one a line: `tenant support -> kb-assistant`."""

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, list | tuple):
            return "\n".join(
                f"{m.get('kind', '')} {m.get('name', '')} -> {m.get('moved_to', '')}"
                for m in value
                if isinstance(m, dict)
            )
        return value

    def to_python(self, value: Any) -> list[dict[str, str]]:  # type: ignore[override]
        moves = []
        for number, line in enumerate(super().to_python(value), start=1):
            head, arrow, moved_to = line.partition("->")
            kind, _sep, name = head.strip().partition(" ")
            if not arrow or kind not in DECOMMISSION_KINDS or not name.strip():
                raise ValidationError(
                    _(
                        "Line %(number)s (%(line)s): expected 'KIND NAME -> WHERE', KIND one of "
                        "%(kinds)s, e.g. 'tenant support -> kb-assistant'."
                    )
                    % {"number": number, "line": repr(line), "kinds": ", ".join(DECOMMISSION_KINDS)}
                )
            moves.append({"kind": kind, "name": name.strip(), "moved_to": moved_to.strip()})
        return moves


class DismissalsField(LinesField):
    """Suggested downstream systems the change does not touch, one a line with why:
    `Front end: no page streams from this service`. The system by its label or key."""

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, list | tuple):
            return "\n".join(
                f"{DOWNSTREAM_SYSTEMS.get(d.get('system', ''), d.get('system', ''))}: "
                f"{d.get('reason', '')}"
                for d in value
                if isinstance(d, dict)
            )
        return value

    def to_python(self, value: Any) -> list[dict[str, str]]:  # type: ignore[override]
        by_name = {key: key for key in DOWNSTREAM_SYSTEMS}
        for key, label in DOWNSTREAM_SYSTEMS.items():
            by_name[label.casefold()] = key
            by_name[str(_(label)).casefold()] = key
        dismissals = []
        for number, line in enumerate(super().to_python(value), start=1):
            name, colon, reason = line.replace("：", ":", 1).partition(":")
            system = by_name.get(name.strip().casefold()) or by_name.get(name.strip())
            if not colon or system is None or not reason.strip():
                raise ValidationError(
                    _(
                        "Line %(number)s (%(line)s): expected 'SYSTEM: WHY IT IS NOT TOUCHED', "
                        "SYSTEM one of %(systems)s, e.g. 'Front end: no page streams from "
                        "this service'."
                    )
                    % {
                        "number": number,
                        "line": repr(line),
                        "systems": ", ".join(
                            str(_(label)) for label in DOWNSTREAM_SYSTEMS.values()
                        ),
                    }
                )
            dismissals.append({"system": system, "reason": reason.strip()})
        return dismissals


class RevisionChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, obj: Any) -> str:
        revision: Revision = obj
        asset = revision.model_asset
        return _("%(label)s: %(model)s@%(revision)s on %(runtime)s") % {
            "label": revision.label,
            "model": asset.name,
            "revision": asset.revision,
            "runtime": revision.runtime.name,
        }


class ReleaseForm(forms.Form):
    """Every section of the release form; a draft may leave any of it empty."""

    to_revision = RevisionChoiceField(
        queryset=Revision.objects.none(),
        label=_("To revision"),
        help_text=_(
            "The candidate: the revision of this service that would serve after the release."
        ),
    )
    change_kind = forms.ChoiceField(
        choices=shown_choices(Release.ChangeKind.choices),
        label=_("Change kind"),
        help_text=_(
            "What kind of change this is; it sets the suggested risk and the gates that apply."
        ),
    )
    risk = forms.ChoiceField(
        choices=[("", _("Suggested")), *list(Release.Risk.choices)],
        required=False,
        label=_("Risk"),
        help_text=_("Leave on Suggested to take the risk suggested from the change kind and tier."),
    )
    risk_override_reason = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2}),
        required=False,
        label=_("Why a different risk"),
        help_text=_("Needed when the risk you choose is lower than the one suggested."),
    )
    summary = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}),
        max_length=5000,
        label=_("Summary"),
        help_text=_("What changes and why, in a few sentences the reviewers read first."),
    )
    impact_tenants = CommaListField(
        label=_("Tenants"),
        max_length=2000,
        help_text=_("Tenants that call this service and feel the change, separated by commas."),
    )
    impact_task_types = CommaListField(
        label=_("Task types"),
        max_length=2000,
        help_text=_("Task types affected, separated by commas, e.g. chat, rag, sql."),
    )
    impact_downstream = forms.MultipleChoiceField(
        choices=shown_choices(DOWNSTREAM_SYSTEMS.items()),
        widget=forms.CheckboxSelectMultiple,
        required=False,
        label=_("Downstream systems touched"),
        help_text=_("The systems that read this service's output or depend on its behaviour."),
    )
    impact_dismissed = DismissalsField(
        label=_("Suggested systems not touched"),
        max_length=5000,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text=_(
            "A system the diff suggests that this change does not touch, one a line with "
            "why, e.g. 'Front end: no page streams from this service'. Every suggested "
            "system is ticked above or named here."
        ),
    )
    required_sample_sets = SampleSetsField(
        required=False,
        label=_("Replay sample sets required"),
        help_text=_(
            "The replay sample sets that must pass on the candidate, each with its latest "
            "version; those already replayed on this service come first."
        ),
    )
    metrics_declared = forms.MultipleChoiceField(
        choices=shown_choices(METRICS.items()),
        widget=forms.CheckboxSelectMultiple,
        required=False,
        label=_("Metrics the candidate exports"),
        help_text=_("What the candidate's engine exposes for the gray stages' guards to watch."),
    )
    known_limitations = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}),
        required=False,
        max_length=5000,
        label=_("Known limitations"),
        help_text=_("Free text shown to reviewers: what the candidate does worse or not at all."),
    )
    compatible_request_formats = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2}),
        required=False,
        max_length=5000,
        label=_("Compatible request formats"),
        help_text=_("Free text shown to reviewers: the request formats callers may keep sending."),
    )
    rollback_target = RevisionChoiceField(
        queryset=Revision.objects.none(),
        required=False,
        label=_("Rollback target"),
        empty_label=_("The live revision"),
        help_text=_(
            "The revision to come back to if the rollout goes wrong; by default the live one."
        ),
    )
    rollback_kind = forms.ChoiceField(
        choices=[("", "—"), *shown_choices(Release.RollbackKind.choices)],
        required=False,
        label=_("Rollback kind"),
        help_text=_("What a rollback switches back: the engine, the model, or a gateway policy."),
    )
    rollback_triggers = LinesField(
        label=_("Trigger conditions"),
        max_length=10000,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text=_(
            "When to roll back, one condition a line, e.g. p95 TTFT above 1200 ms for 10 min."
        ),
    )
    rollback_expected_minutes = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=1440,
        label=_("Expected minutes"),
        help_text=_(
            "How long the rollback takes, from decision to the target serving, in minutes."
        ),
    )
    rollback_impact_scope = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2}),
        required=False,
        max_length=5000,
        label=_("Impact scope"),
        help_text=_(
            "Who notices a rollback while it runs (tenants, dropped streams, cold caches)."
        ),
    )
    rollback_verification_set = forms.CharField(
        required=False,
        max_length=100,
        widget=forms.TextInput(attrs={"list": "sample-set-names", "autocomplete": "off"}),
        label=_("Verification sample set"),
        help_text=_("The replay sample set that verifies the rollback target serves as expected."),
    )
    retirement_plan = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}),
        required=False,
        max_length=5000,
        label=_("Retirement plan"),
        help_text=_(
            "How the candidate will be retired once it serves: what triggers it (a "
            "successor, a license or hardware end date), the notice tenants get, where "
            "their traffic goes. Production needs one before going live."
        ),
    )
    planned_peak_rps = forms.FloatField(
        required=False,
        min_value=0.1,
        max_value=100_000,
        label=_("Planned peak rate (requests/s)"),
        help_text=_(
            "Capacity change only: the peak arrival rate the new capacity is for. A drill of "
            "the candidate must have met every task type's bounds at this rate "
            "(required on production services)."
        ),
    )
    decommission_moves = MovesField(
        label=_("Moves"),
        max_length=10000,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text=_(
            "Decommission only: which tenants, task types and sample sets moved where, "
            "one a line, e.g. tenant support -> kb-assistant."
        ),
    )
    logging_debug = forms.ChoiceField(
        choices=[("", "—"), ("off", _("Off")), ("sampled", _("Sampled")), ("full", _("Full"))],
        required=False,
        label=_("Debug logs"),
        help_text=_("Whether the candidate writes debug logs of requests, and how many."),
    )
    logging_audit = forms.ChoiceField(
        choices=[("", "—"), ("on", _("On")), ("off", _("Off"))],
        required=False,
        label=_("Audit logs"),
        help_text=_("Whether the candidate writes audit logs of who asked what."),
    )
    logging_retention_days = forms.IntegerField(
        required=False,
        min_value=0,
        max_value=3650,
        label=_("Sensitive content kept (days)"),
        help_text=_("How many days logs with sensitive content are kept; 0 keeps none."),
    )
    path = forms.ChoiceField(
        choices=shown_choices(Release.Path.choices),
        initial=Release.Path.NORMAL,
        label=_("Change path"),
        help_text=_(
            "Standard: a pre-approved change (only the model team signs). Emergency: may "
            "roll out before sign-offs, which are then due within hours."
        ),
    )
    standard_template = forms.ModelChoiceField(
        queryset=StandardChangeTemplate.objects.none(),
        required=False,
        label=_("Standard change"),
        empty_label="—",
        help_text=_("Standard path only: the pre-approved change this release follows."),
    )
    emergency_reason = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2}),
        required=False,
        max_length=5000,
        label=_("Emergency reason"),
        help_text=_("Emergency path only: why the normal path cannot be followed."),
    )
    planned_start = forms.DateTimeField(
        required=False,
        label=_("Planned start"),
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
        input_formats=["%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M:%S"],
        help_text=_(
            "When the rollout would start, in the server's time zone; the form warns "
            "when it falls inside a blackout window."
        ),
    )

    def __init__(
        self,
        *args: Any,
        service: Service,
        failed: list[tuple[str, str]] | None = None,
        release: Release | None = None,
        **kwargs: Any,
    ) -> None:
        if release is not None and "initial" not in kwargs:
            kwargs["initial"] = initial_from(release)
        if release is None:
            # A new release touches, until the filer says otherwise, every tenant and
            # task type of the service.
            kwargs["initial"] = {
                "impact_tenants": [t for t in service.tenants if isinstance(t, str)],
                "impact_task_types": [t.slug for t in service.task_types.all()],
                **kwargs.get("initial", {}),
            }
        super().__init__(*args, **kwargs)
        self.service = service
        self.release = release
        self.failed = failed or []
        revisions = Revision.objects.filter(service=service).select_related(
            "model_asset", "runtime"
        )
        candidates = revisions.exclude(pk=service.live_revision_id).order_by("-number")
        to_revision = self.fields["to_revision"]
        rollback = self.fields["rollback_target"]
        assert isinstance(to_revision, forms.ModelChoiceField)
        assert isinstance(rollback, forms.ModelChoiceField)
        to_revision.queryset = candidates
        rollback.queryset = revisions.order_by("-number")
        self.sample_set_choices = sample_set_choices(service)
        picker = self.fields["required_sample_sets"]
        assert isinstance(picker, SampleSetsField)
        picker.choices = [
            (
                choice["name"],
                (
                    _("%(name)s (v%(version)s), replayed on this service")
                    if choice["replayed_here"]
                    else _("%(name)s (v%(version)s)")
                )
                % {"name": choice["name"], "version": choice["version"]},
            )
            for choice in self.sample_set_choices
        ]
        if not self.sample_set_choices:
            picker.help_text = _(
                "No replay sample set exists yet: import one under Replay, then pick it here."
            )
        template = self.fields["standard_template"]
        assert isinstance(template, forms.ModelChoiceField)
        template.queryset = StandardChangeTemplate.objects.usable().filter(tier=service.tier)
        self.fields["risk"].help_text = _(
            "Leave on Suggested to take the risk suggested from the change kind and tier "
            "(%(tier)s)."
        ) % {"tier": service.tier}
        for row in range(self.stage_rows(release)):
            for part, label in STAGE_PARTS.items():
                cell_label = _("Stage %(number)s: %(part)s") % {"number": row + 1, "part": label}
                cell: forms.Field
                if part == "analysis":
                    cell = forms.ChoiceField(
                        choices=ANALYSIS_LABELS,
                        required=False,
                        label=cell_label,
                        help_text=_STAGE_HELP[part],
                    )
                else:
                    cell = forms.DecimalField(
                        required=False,
                        min_value=0,
                        max_value=100 if part.endswith("_pct") else 100000,
                        decimal_places=2 if part != "observation_minutes" else 0,
                        label=cell_label,
                        help_text=_STAGE_HELP[part],
                    )
                self.fields[stage_field_name(row, part)] = cell
                # The table renders each column's help once, under it (stage_help), not
                # beside each of the cells, so the cells point at that.
                self.fields[stage_field_name(row, part)].widget.attrs["aria-describedby"] = (
                    f"stage-help-{part}"
                )
        given = {
            (c.get("sample_set"), c.get("sample")): c
            for c in (release.failure_classifications if release else [])
            if isinstance(c, dict)
        }
        for sample_set, sample in self.failed:
            entry = given.get((sample_set, sample), {})
            name = classification_field_name(sample_set, sample)
            self.fields[name] = forms.ChoiceField(
                choices=[("", _("Not classified yet")), *shown_choices(CLASSIFICATIONS.items())],
                required=False,
                label=_("%(sample_set)s / %(sample)s")
                % {"sample_set": sample_set, "sample": sample},
                initial=entry.get("classification", ""),
                help_text=FAILURE_HELP["classification"],
            )
            self.fields[degradation_field_name(sample_set, sample)] = forms.CharField(
                required=False,
                max_length=2000,
                label=_("%(sample_set)s / %(sample)s: which degradation")
                % {"sample_set": sample_set, "sample": sample},
                initial=entry.get("degradation", ""),
                help_text=FAILURE_HELP["degradation"],
            )
            # As the stages: the failures table renders each column's help once, under it.
            for field_name, part in (
                (name, "classification"),
                (degradation_field_name(sample_set, sample), "degradation"),
            ):
                self.fields[field_name].widget.attrs["aria-describedby"] = f"failure-help-{part}"

    @staticmethod
    def stage_rows(release: Release | None) -> int:
        existing = (
            len(release.gray_stages) if release and isinstance(release.gray_stages, list) else 0
        )
        return max(GRAY_ROWS, existing + 1)

    # -- the page's layout

    def sections(self) -> list[tuple[str, StrOrPromise, list[forms.BoundField]]]:
        return [(key, title, [self[name] for name in names]) for key, title, names in SECTIONS]

    def stage_headers(self) -> list[str]:
        """The gray plan's column heads: what each cell of a stage row holds."""
        return [str(label) for label in STAGE_PARTS.values()]

    def failure_help(self) -> dict[str, StrOrPromise]:
        return FAILURE_HELP

    def stage_help(self) -> list[tuple[str, StrOrPromise, StrOrPromise]]:
        """Each column's help, rendered once under the gray plan: (part, label, help)."""
        return [(part, label, _STAGE_HELP[part]) for part, label in STAGE_PARTS.items()]

    def stage_table(self) -> list[list[forms.BoundField]]:
        rows = sum(1 for name in self.fields if name.endswith("_traffic_pct"))
        return [[self[stage_field_name(row, part)] for part in STAGE_PARTS] for row in range(rows)]

    def failure_rows(self) -> list[tuple[str, str, forms.BoundField, forms.BoundField]]:
        return [
            (
                sample_set,
                sample,
                self[classification_field_name(sample_set, sample)],
                self[degradation_field_name(sample_set, sample)],
            )
            for sample_set, sample in self.failed
        ]

    def suggested_risk(self) -> str | None:
        kind = self.data.get("change_kind") if self.is_bound else self.initial.get("change_kind")
        if kind not in Release.ChangeKind.values:
            return None
        strict = bool(self.never_degrading())
        return policy.suggested_risk(self.service.tier, str(kind), strict=strict)

    def never_degrading(self) -> list[str]:
        """The impacted task types, as the form holds them, that must never degrade
        silently (they raise the suggested risk)."""
        if self.is_bound:
            task_types = str(self.data.get("impact_task_types", "")).split(",")
        else:
            task_types = list(self.initial.get("impact_task_types") or [])
        return never_degrading(t.strip() for t in task_types if isinstance(t, str))

    # -- validation

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        stages = []
        for row in range(sum(1 for name in self.fields if name.endswith("_traffic_pct"))):
            values = {part: cleaned.get(stage_field_name(row, part)) for part in STAGE_PARTS}
            values["analysis"] = values["analysis"] or None
            if all(value is None for value in values.values()):
                continue
            if values["traffic_pct"] is None or values["observation_minutes"] is None:
                self.add_error(
                    stage_field_name(
                        row,
                        "traffic_pct" if values["traffic_pct"] is None else "observation_minutes",
                    ),
                    _(
                        "Stage %(number)s needs both a traffic share (1-100 %%) and an "
                        "observation window in minutes, or leave the whole row empty."
                    )
                    % {"number": row + 1},
                )
                continue
            if values["traffic_pct"] <= 0:
                self.add_error(
                    stage_field_name(row, "traffic_pct"),
                    _("Stage %(number)s: the traffic share must be above 0 %%, up to 100 %%.")
                    % {"number": row + 1},
                )
                continue
            if values["observation_minutes"] < 1:
                self.add_error(
                    stage_field_name(row, "observation_minutes"),
                    _("Stage %(number)s: observe for at least 1 minute.") % {"number": row + 1},
                )
                continue
            stage: dict[str, Any] = {
                "traffic_pct": _number(values["traffic_pct"]),
                "observation_minutes": int(values["observation_minutes"]),
            }
            guards = _merged_guards(
                {part: _number(values[part]) for part in GUARDS if values[part] is not None},
                self._stored_stage(row),
            )
            if guards:
                stage["guards"] = guards
            for kept in ("failure_limit", "error_limit"):
                if kept in self._stored_stage(row):
                    stage[kept] = self._stored_stage(row)[kept]
            if values["analysis"] in ANALYSIS_CHOICES:
                on_breach, auto_promote = ANALYSIS_CHOICES[values["analysis"]]
                stored = self._stored_stage(row).get("analysis")
                stage["analysis"] = {
                    **(stored if isinstance(stored, dict) else {}),
                    "source": "prometheus",
                    "on_breach": on_breach,
                    "auto_promote": auto_promote,
                }
            stages.append(stage)
        cleaned["gray_stages"] = stages
        return cleaned

    def _stored_stage(self, row: int) -> dict[str, Any]:
        """The stage as saved, for what the form's row does not show (relative, critical
        and dry-run guards, budgets, the analysis: set through the API, kept by the form)."""
        stages = self.release.gray_stages if self.release is not None else []
        if isinstance(stages, list) and row < len(stages) and isinstance(stages[row], dict):
            return stages[row]
        return {}

    def to_release_fields(self) -> dict[str, Any]:
        """The cleaned form as the keyword arguments of `create_release` / `update_release`."""
        data = self.cleaned_data
        classifications = []
        for sample_set, sample in self.failed:
            kind = data.get(classification_field_name(sample_set, sample))
            if not kind:
                continue
            entry = {"sample_set": sample_set, "sample": sample, "classification": kind}
            which = data.get(degradation_field_name(sample_set, sample))
            if which:
                entry["degradation"] = which
            classifications.append(entry)
        logging = {
            key: data[name]
            for name, key in LOGGING_PARTS.items()
            # A retention of 0 days is an answer; an empty choice is not.
            if data.get(name) not in (None, "")
        }
        fields = {
            spec.name: saved(spec, data.get(spec.name)) for spec in FIELD_SPECS if spec.stored
        }
        return {
            **fields,
            "failure_classifications": classifications,
            "gray_stages": data.get("gray_stages") or [],
            "logging_policy": logging,
        }


# The failures table's columns: what each asks, rendered once under the table.
FAILURE_HELP: dict[str, StrOrPromise] = {
    "classification": _(
        "Failed on the candidate: does it block the release, is it handled "
        "by a degradation, or does the business owner accept the risk?"
    ),
    "degradation": _("If handled by degradation: which one, e.g. falls back to search results."),
}

_STAGE_HELP = {
    "traffic_pct": _("Share of the traffic this stage sends to the candidate, above 0 up to 100."),
    "observation_minutes": _("How long the stage is watched before it is promoted, in minutes."),
    "ttft_p95_ms": _("Hold or roll back when p95 time to first token goes above this (ms)."),
    "error_rate_pct": _("Hold or roll back when the error rate goes above this (%)."),
    "structured_error_rate_pct": _(
        "Hold or roll back when structured-output errors go above this (%)."
    ),
    "analysis": _(
        "Let the ledger judge the stage itself from the engines' metrics in Prometheus, every "
        "60 s: what a breach does, and whether a stage whose window passed promotes itself."
    ),
}


def _number(value: Any) -> int | float:
    number = float(value)
    return int(number) if number.is_integer() else number


def initial_from(release: Release) -> dict[str, Any]:
    """The form's values from a saved release."""
    logging = release.logging_policy if isinstance(release.logging_policy, dict) else {}
    initial: dict[str, Any] = {
        spec.name: getattr(release, attname(spec.name)) for spec in FIELD_SPECS if spec.stored
    }
    for name, key in LOGGING_PARTS.items():
        initial[name] = logging.get(key, None if name == "logging_retention_days" else "")
    if release.planned_start:
        initial["planned_start"] = timezone.localtime(release.planned_start).replace(tzinfo=None)
    for row, stage in enumerate(
        release.gray_stages if isinstance(release.gray_stages, list) else []
    ):
        if not isinstance(stage, dict):
            continue
        initial[stage_field_name(row, "traffic_pct")] = stage.get("traffic_pct")
        initial[stage_field_name(row, "observation_minutes")] = stage.get("observation_minutes")
        analysis = stage.get("analysis")
        if isinstance(analysis, dict):
            initial[stage_field_name(row, "analysis")] = next(
                (
                    choice
                    for choice, (on_breach, promote) in ANALYSIS_CHOICES.items()
                    if (
                        analysis.get("on_breach")
                        or policy.ANALYSIS_ON_BREACH_DEFAULT[release.service.tier]
                    )
                    == on_breach
                    and bool(analysis.get("auto_promote")) == promote
                ),
                "hold",
            )
        for part, value in (stage.get("guards") or {}).items():
            if part in GUARDS:
                # A guard with more than a bound shows its bound; the rest is kept.
                initial[stage_field_name(row, part)] = (
                    value.get("max") if isinstance(value, dict) else value
                )
    return initial


def _merged_guards(bounds: dict[str, Any], stored: dict[str, Any]) -> dict[str, Any]:
    """The row's absolute bounds over the stage's saved guards: a guard saved as an
    object keeps its other settings, with the row's bound as its `max`."""
    given = stored.get("guards")
    saved: dict[str, Any] = given if isinstance(given, dict) else {}
    merged: dict[str, Any] = {}
    for part in GUARDS:
        old, bound = saved.get(part), bounds.get(part)
        if isinstance(old, dict):
            rest = {key: value for key, value in old.items() if key != "max"}
            rule = {**rest, "max": bound} if bound is not None else rest
            if rule:
                merged[part] = rule
        elif bound is not None:
            merged[part] = bound
    merged.update({k: v for k, v in saved.items() if k not in GUARDS})
    return merged
