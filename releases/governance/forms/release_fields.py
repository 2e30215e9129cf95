"""The release form's fields, stated once: which section each sits in, what the release
page calls it, and what an empty answer is saved as.

The form's fields themselves (their input label, widget, help and parser) are the
declared fields of `ReleaseForm`; this table says the rest, and the form's sections,
`to_release_fields`, `initial_from` and the release page's read-only rows are built from
it. A release field the form fills through several inputs (`gray_stages` from the stage
rows, `failure_classifications` from one input per failed sample, `logging_policy` from
its three parts) is built by the form itself; `snapshot.FORM_FIELDS` lists them all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.utils.translation import gettext_lazy as _
from django_stubs_ext import StrOrPromise

SECTION_TITLES: dict[str, StrOrPromise] = {
    "what": _("What changes"),
    "impact": _("Impact"),
    "evidence": _("Evidence"),
    "rollback": _("Rollback plan"),
    "capacity": _("Capacity"),
    "retirement": _("Retirement"),
    "decommission": _("Decommission moves"),
    "logging": _("Logging policy"),
    "path": _("Path and calendar"),
}


@dataclass(frozen=True)
class FieldSpec:
    name: str
    section: str
    # Its label among the release page's read-only rows, where it stands without its input.
    shown_as: StrOrPromise
    # What an empty answer is saved as: "", [] or None. `saved_empty` of a part of a
    # release field (logging) is unused: the form builds that field.
    saved_empty: Any = ""
    # The release field of the same name it fills; False for a part of another field.
    stored: bool = True


LIST: list[Any] = []

FIELD_SPECS: tuple[FieldSpec, ...] = (
    FieldSpec("to_revision", "what", _("To revision"), None),
    FieldSpec("change_kind", "what", _("Change kind")),
    FieldSpec("risk", "what", _("Risk")),
    FieldSpec("risk_override_reason", "what", _("Risk override reason")),
    FieldSpec("summary", "what", _("Summary")),
    FieldSpec("impact_tenants", "impact", _("Impact tenants"), LIST),
    FieldSpec("impact_task_types", "impact", _("Impact task types"), LIST),
    FieldSpec("impact_downstream", "impact", _("Impact downstream"), LIST),
    FieldSpec("impact_dismissed", "impact", _("Impact dismissed"), LIST),
    FieldSpec("required_sample_sets", "evidence", _("Required sample sets"), LIST),
    FieldSpec("metrics_declared", "evidence", _("Metrics declared"), LIST),
    FieldSpec("known_limitations", "evidence", _("Known limitations")),
    FieldSpec("compatible_request_formats", "evidence", _("Compatible request formats")),
    FieldSpec("rollback_target", "rollback", _("Rollback target"), None),
    FieldSpec("rollback_kind", "rollback", _("Rollback kind")),
    FieldSpec("rollback_triggers", "rollback", _("Rollback triggers"), LIST),
    FieldSpec("rollback_expected_minutes", "rollback", _("Rollback expected minutes"), None),
    FieldSpec("rollback_impact_scope", "rollback", _("Rollback impact scope")),
    FieldSpec("rollback_verification_set", "rollback", _("Rollback verification set")),
    FieldSpec("planned_peak_rps", "capacity", _("Planned peak rate (requests/s)"), None),
    FieldSpec("retirement_plan", "retirement", _("Retirement plan")),
    FieldSpec("decommission_moves", "decommission", _("Decommission moves"), LIST),
    FieldSpec("logging_debug", "logging", _("Debug logs"), stored=False),
    FieldSpec("logging_audit", "logging", _("Audit logs"), stored=False),
    FieldSpec(
        "logging_retention_days", "logging", _("Sensitive content kept (days)"), stored=False
    ),
    FieldSpec("path", "path", _("Path")),
    FieldSpec("standard_template", "path", _("Standard template"), None),
    FieldSpec("emergency_reason", "path", _("Emergency reason")),
    FieldSpec("planned_start", "path", _("Planned start"), None),
)

# Which form fields belong to which section of the page, in order.
SECTIONS: list[tuple[str, StrOrPromise, tuple[str, ...]]] = [
    (key, title, tuple(spec.name for spec in FIELD_SPECS if spec.section == key))
    for key, title in SECTION_TITLES.items()
]
# The logging policy's parts: the form field and the key it is saved under.
LOGGING_PARTS = {
    "logging_debug": "debug_logs",
    "logging_audit": "audit_logs",
    "logging_retention_days": "sensitive_retention_days",
}


def saved(spec: FieldSpec, value: Any) -> Any:
    """A cleaned value as the release keeps it: an empty answer as the field's empty."""
    if value is None or value == "" or (isinstance(spec.saved_empty, list) and not value):
        return list(spec.saved_empty) if isinstance(spec.saved_empty, list) else spec.saved_empty
    return list(value) if isinstance(spec.saved_empty, list) else value
