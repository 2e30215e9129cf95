"""The gateway policy form: one fieldset per section of the document, built for the
service (a row per tenant it lists and per task type it serves), read back into the
document the verb checks (`ledger.services.gateway_policies`)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.utils.translation import gettext_lazy as _

from ledger.gateway_policy import LIMITS
from ledger.models import Service

FALLBACK_KINDS = {
    "context_window": _("When the prompt is too long"),
    "error": _("When the pool is full or failing"),
    "content_policy": _("When the engine refuses the content"),
}
DEGRADATION_ACTIONS = [
    ("", _("— not stated —")),
    ("fallback", _("fall back to another service")),
    ("stop", _("stop with a message")),
    ("async_queue", _("move to the async queue")),
    ("human_review", _("send to human review")),
]
LIMIT_LABELS = {
    "max_input_tokens": _("Max input tokens"),
    "max_output_tokens": _("Max output tokens"),
    "timeout_s": _("Timeout (s)"),
    "stream_timeout_s": _("Stream timeout (s)"),
    "max_parallel_requests": _("Max parallel requests per backend"),
}
LIMIT_HELP = {
    "max_input_tokens": _("Longer prompts are refused by the gateway before an engine sees them."),
    "max_output_tokens": _("Longer answers are cut."),
    "timeout_s": _("The whole request, in seconds."),
    "stream_timeout_s": _("The wait for the first streamed chunk, in seconds."),
    "max_parallel_requests": _("Requests in flight per backend; the rest wait or get 429."),
}
EGRESS_CHOICES = [
    ("", _("— not stated —")),
    ("no", _("No: requests never leave for an external API")),
    ("yes", _("Yes: a fallback may call an external API")),
]
SECONDS = ("timeout_s", "stream_timeout_s")


def _plain_number(value: Decimal | int | None) -> int | float | None:
    if value is None or isinstance(value, int):
        return value
    return int(value) if value == value.to_integral_value() else float(value)


class GatewayPolicyForm(forms.Form):
    """Sections: `by_section[name]` lists a section's fields, in order."""

    note = forms.CharField(
        label=_("Why this version"),
        widget=forms.Textarea(attrs={"rows": 2}),
        required=False,
        max_length=2000,
        help_text=_("What changes and for whom; it stays with the version."),
    )

    def __init__(self, *args: Any, service: Service, task_types: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.service = service
        self.tenants = list(service.tenants or [])
        self.task_types = task_types
        self.sections: dict[str, list[str]] = {
            name: []
            for name in ("limits", "tenants", "fallbacks", "degradation", "retries", "egress")
        }
        for name in LIMITS:
            field: forms.Field
            if name in SECONDS:
                field = forms.DecimalField(
                    min_value=Decimal("0.001"), max_digits=9, decimal_places=3
                )
            else:
                field = forms.IntegerField(min_value=1, max_value=10_000_000)
            field.required = False
            field.label = LIMIT_LABELS[name]
            field.help_text = LIMIT_HELP[name]
            self._add("limits", f"limits_{name}", field)
        for tenant in self.tenants:
            self._add(
                "tenants",
                f"tenant_{tenant}_rpm",
                forms.IntegerField(
                    label=_("%(tenant)s: requests per minute") % {"tenant": tenant},
                    required=False,
                    min_value=1,
                    max_value=10_000_000,
                    help_text=_(
                        "Leave rpm and tpm empty to leave the tenant out: its calls are refused."
                    ),
                ),
            )
            self._add(
                "tenants",
                f"tenant_{tenant}_tpm",
                forms.IntegerField(
                    label=_("%(tenant)s: tokens per minute") % {"tenant": tenant},
                    required=False,
                    min_value=1,
                    max_value=1_000_000_000,
                ),
            )
            self._add(
                "tenants",
                f"tenant_{tenant}_parallel",
                forms.IntegerField(
                    label=_("%(tenant)s: max parallel requests") % {"tenant": tenant},
                    required=False,
                    min_value=1,
                    max_value=100_000,
                ),
            )
            self._add(
                "tenants",
                f"tenant_{tenant}_budget",
                forms.DecimalField(
                    label=_("%(tenant)s: budget (USD)") % {"tenant": tenant},
                    required=False,
                    min_value=0,
                    max_digits=12,
                    decimal_places=2,
                    help_text=_(
                        "LiteLLM refuses the tenant's calls once it is spent. Empty: no budget."
                    ),
                ),
            )
            self._add(
                "tenants",
                f"tenant_{tenant}_budget_days",
                forms.IntegerField(
                    label=_("%(tenant)s: budget period (days)") % {"tenant": tenant},
                    required=False,
                    min_value=1,
                    max_value=366,
                    help_text=_("The budget starts again after this many days (30 when empty)."),
                ),
            )
        for kind, label in FALLBACK_KINDS.items():
            self._add(
                "fallbacks",
                f"fallback_{kind}",
                forms.CharField(
                    label=label,
                    required=False,
                    max_length=400,
                    help_text=_("Services to try, in order, separated by commas, e.g. kb-long."),
                ),
            )
        for task in task_types:
            self._add(
                "degradation",
                f"degrade_{task}_action",
                forms.ChoiceField(
                    label=_("%(task)s: when degraded") % {"task": task},
                    choices=DEGRADATION_ACTIONS,
                    required=False,
                ),
            )
            self._add(
                "degradation",
                f"degrade_{task}_to",
                forms.SlugField(
                    label=_("%(task)s: fall back to (service)") % {"task": task},
                    required=False,
                    max_length=80,
                ),
            )
            self._add(
                "degradation",
                f"degrade_{task}_message",
                forms.CharField(
                    label=_("%(task)s: message when it stops") % {"task": task},
                    required=False,
                    max_length=500,
                ),
            )
        self._add(
            "retries",
            "retries_num_retries",
            forms.IntegerField(
                label=_("Retries per request"),
                required=False,
                min_value=0,
                max_value=10,
            ),
        )
        self._add(
            "retries",
            "retries_allowed_fails",
            forms.IntegerField(
                label=_("Failures per minute before a backend cools down"),
                required=False,
                min_value=0,
                max_value=10_000,
            ),
        )
        self._add(
            "retries",
            "retries_cooldown_s",
            forms.DecimalField(
                label=_("Cool-down (s)"),
                required=False,
                min_value=0,
                max_digits=9,
                decimal_places=3,
            ),
        )
        self._add(
            "egress",
            "egress",
            forms.ChoiceField(
                label=_("May a request leave for an external API?"),
                choices=EGRESS_CHOICES,
                required=False,
            ),
        )

    def _add(self, section: str, name: str, field: forms.Field) -> None:
        self.fields[name] = field
        self.sections[section].append(name)

    @property
    def by_section(self) -> dict[str, list[forms.BoundField]]:
        """Each section's bound fields, in order (what the page's fieldsets show)."""
        return {section: [self[name] for name in names] for section, names in self.sections.items()}

    @staticmethod
    def initial_from(document: dict[str, Any] | None) -> dict[str, Any]:
        """The form's initial values from a document (the version in force)."""
        document = document or {}
        initial: dict[str, Any] = {}
        for name, value in document.get("limits", {}).items():
            initial[f"limits_{name}"] = value
        for tenant in document.get("tenants", []):
            prefix = f"tenant_{tenant['name']}"
            initial[f"{prefix}_rpm"] = tenant.get("rpm")
            initial[f"{prefix}_tpm"] = tenant.get("tpm")
            initial[f"{prefix}_parallel"] = tenant.get("max_parallel_requests")
            if "budget" in tenant:
                initial[f"{prefix}_budget"] = tenant["budget"]["amount"]
                initial[f"{prefix}_budget_days"] = tenant["budget"]["period_days"]
        targets: dict[str, list[str]] = {}
        for fallback in document.get("fallbacks", []):
            targets.setdefault(fallback["on"], []).append(fallback["to_service"])
        for kind, slugs in targets.items():
            initial[f"fallback_{kind}"] = ", ".join(slugs)
        for task, rule in document.get("degradation", {}).items():
            initial[f"degrade_{task}_action"] = rule["action"]
            initial[f"degrade_{task}_to"] = rule.get("to_service", "")
            initial[f"degrade_{task}_message"] = rule.get("message", "")
        for name, value in document.get("retries", {}).items():
            initial[f"retries_{name}"] = value
        if "egress" in document:
            initial["egress"] = "yes" if document["egress"]["external_fallback_allowed"] else "no"
        return initial

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        for task in self.task_types:
            action = cleaned.get(f"degrade_{task}_action")
            if action == "fallback" and not cleaned.get(f"degrade_{task}_to"):
                self.add_error(f"degrade_{task}_to", _("Name the service to fall back to."))
            if action == "stop" and not (cleaned.get(f"degrade_{task}_message") or "").strip():
                self.add_error(f"degrade_{task}_message", _("Say what callers are told."))
        for tenant in self.tenants:
            extras = [
                f"tenant_{tenant}_parallel",
                f"tenant_{tenant}_budget",
                f"tenant_{tenant}_budget_days",
            ]
            quota = [cleaned.get(f"tenant_{tenant}_rpm"), cleaned.get(f"tenant_{tenant}_tpm")]
            if all(value is None for value in quota) and any(
                cleaned.get(f) is not None for f in extras
            ):
                self.add_error(
                    f"tenant_{tenant}_rpm",
                    _("Give %(tenant)s a quota (rpm, tpm) or leave all its fields empty.")
                    % {"tenant": tenant},
                )
        for kind in FALLBACK_KINDS:
            for slug in self._slugs(cleaned.get(f"fallback_{kind}") or ""):
                try:
                    forms.SlugField().clean(slug)
                except ValidationError:
                    self.add_error(
                        f"fallback_{kind}", _("%(value)r is not a service slug.") % {"value": slug}
                    )
        return cleaned

    @staticmethod
    def _slugs(text: str) -> list[str]:
        return [part.strip() for part in text.split(",") if part.strip()]

    def document(self) -> dict[str, Any]:
        """The policy document the cleaned form states (sections left empty are left out)."""
        data = self.cleaned_data
        document: dict[str, Any] = {}
        limits = {
            name: _plain_number(data[f"limits_{name}"])
            for name in LIMITS
            if data.get(f"limits_{name}") is not None
        }
        if limits:
            document["limits"] = limits
        tenants = []
        for name in self.tenants:
            entry: dict[str, Any] = {"name": name}
            for key, field in (
                ("rpm", "rpm"),
                ("tpm", "tpm"),
                ("max_parallel_requests", "parallel"),
            ):
                if data.get(f"tenant_{name}_{field}") is not None:
                    entry[key] = data[f"tenant_{name}_{field}"]
            budget = data.get(f"tenant_{name}_budget")
            if budget is not None:
                entry["budget"] = {
                    "amount": _plain_number(budget),
                    "currency": "USD",
                    "period_days": data.get(f"tenant_{name}_budget_days") or 30,
                }
            if len(entry) > 1:
                tenants.append(entry)
        if tenants:
            document["tenants"] = tenants
        fallbacks = [
            {"on": kind, "to_service": slug}
            for kind in FALLBACK_KINDS
            for slug in self._slugs(data.get(f"fallback_{kind}") or "")
        ]
        if fallbacks:
            document["fallbacks"] = fallbacks
        degradation: dict[str, Any] = {}
        for task in self.task_types:
            action = data.get(f"degrade_{task}_action")
            if not action:
                continue
            rule: dict[str, Any] = {"action": action}
            if action == "fallback":
                rule["to_service"] = data[f"degrade_{task}_to"]
            message = (data.get(f"degrade_{task}_message") or "").strip()
            if message:
                rule["message"] = message
            degradation[task] = rule
        if degradation:
            document["degradation"] = degradation
        retries = {
            name: _plain_number(data[f"retries_{name}"])
            for name in ("num_retries", "allowed_fails", "cooldown_s")
            if data.get(f"retries_{name}") is not None
        }
        if retries:
            document["retries"] = retries
        if data.get("egress"):
            document["egress"] = {"external_fallback_allowed": data["egress"] == "yes"}
        return document
