"""Form machinery every app's pages share: inline validation as the user types,
refused choices that name the value and the allowed ones, live list filters kept
in the URL, and small fields (lists typed by commas or lines, JSON that can be stored, pretty JSON)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import django_filters
from django import forms
from django.core.exceptions import ValidationError
from django.forms.utils import pretty_name
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext

from lib.storable import TOO_DEEP_TO_PARSE, find_unstorable, validate_storable


def shown_choices(choices: Any) -> list[tuple[Any, Any]]:
    """Choices whose labels stay English where they are written (gettext_noop in the
    model: they reach hashed or sent text), translated where a form shows them."""
    return [(value, gettext_lazy(label)) for value, label in choices]


# ---------------------------------------------------------------- inline validation

# The mixin goes before a Form or ModelForm; mypy is told so, Python needs no base.
if TYPE_CHECKING:
    _FormBase = forms.BaseForm
else:
    _FormBase = object


# How many allowed choices a refusal lists before it says how many more there are.
_CHOICES_LISTED = 12
_VALUE_SHOWN = 60


def _shown(value: Any) -> str:
    text = str(value)
    return repr(text if len(text) <= _VALUE_SHOWN else text[:_VALUE_SHOWN] + "…")


def allowed_choices(field: forms.Field) -> list[str]:
    """The values a choice field accepts, as a person would send them: `value (label)`
    when the label says more than the value (a row's id and its name)."""
    choices = getattr(field, "choices", None)
    if choices is None:
        return []
    allowed = []
    for value, label in choices:
        if isinstance(label, list | tuple):  # an optgroup: (group label, [(value, label), …])
            allowed += [str(v) for v, _ in label if v not in ("", None)]
            continue
        value = getattr(value, "value", value)  # ModelChoiceIteratorValue
        if value in ("", None):
            continue
        allowed.append(str(value) if str(label) == str(value) else f"{value} ({label})")
    return allowed


def invalid_choice_message(field: forms.Field, value: Any, *, label: str | None = None) -> str:
    """`'gpu9' is not one of the choices of Engine; choose one of: vllm (vLLM), …`."""
    allowed = allowed_choices(field)
    listed = ", ".join(allowed[:_CHOICES_LISTED])
    if len(allowed) > _CHOICES_LISTED:
        more = len(allowed) - _CHOICES_LISTED
        listed += ngettext(", and %(count)d more", ", and %(count)d more", more) % {"count": more}
    label = label or str(field.label or _("this field"))
    if not allowed:
        return _("%(value)s is not one of the choices of %(label)s; there is none to choose.") % {
            "value": _shown(value),
            "label": label,
        }
    return _("%(value)s is not one of the choices of %(label)s; choose one of: %(listed)s.") % {
        "value": _shown(value),
        "label": label,
        "listed": listed,
    }


class NamedChoicesMixin(_FormBase):
    """A refused choice names the value sent and the allowed ones, instead of Django's
    "Select a valid choice. That choice is not one of the available choices."

    The message is written after validation, from the field's choices as they are
    then (forms narrow their querysets in `__init__`).
    """

    def full_clean(self) -> None:
        super().full_clean()
        errors_by_field = self.errors  # set by full_clean just now: no second validation
        for name in list(errors_by_field):
            field = self.fields.get(name)
            if field is None:
                continue
            errors = errors_by_field[name].as_data()
            if not any(error.code == "invalid_choice" for error in errors):
                continue
            label = str(field.label or pretty_name(name))
            messages = []
            for error in errors:
                if error.code == "invalid_choice":
                    value = (error.params or {}).get("value", self.data.get(self.add_prefix(name)))
                    messages.append(
                        ValidationError(
                            invalid_choice_message(field, value, label=label),
                            code="invalid_choice",
                        )
                    )
                else:
                    messages.append(error)
            errors_by_field[name] = self.error_class(messages, renderer=self.renderer)


class InlineValidationMixin(NamedChoicesMixin):
    """Each visible widget posts the whole form to `validate_url` as the user types.

    The endpoint answers with the partial of the one field that fired (named by
    htmx in HX-Trigger-Name), so errors appear beside the field before the form
    is submitted, and nothing is written.
    """

    def __init__(self, *args: Any, validate_url: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.field_warnings: dict[str, list[str]] = {}
        if not validate_url:
            return
        for name, field in self.fields.items():
            widget = field.widget
            if widget.is_hidden or field.disabled:
                continue
            typed = not isinstance(widget, forms.Select | forms.CheckboxInput | forms.DateInput)
            widget.attrs.update(
                {
                    "hx-post": validate_url,
                    "hx-trigger": "input changed delay:400ms" if typed else "change",
                    "hx-target": f"#field-{self[name].html_name}",
                    "hx-swap": "outerHTML",
                    "hx-include": "closest form",
                }
            )

    def warn(self, name: str, message: str) -> None:
        self.field_warnings.setdefault(name, []).append(message)

    def rows(self) -> list[tuple[forms.BoundField, list[str]]]:
        """Each visible field with its warnings, in order, for the form template."""
        return [(field, self.field_warnings.get(field.name, [])) for field in self.visible_fields()]


class TypedListField(forms.CharField):
    """A list typed as text in one box: split at `separator` (None: one item a line),
    each item stripped, blank ones dropped (and repeats, when `unique`); a list is
    shown back joined by `joiner`."""

    separator: str | None = ","
    joiner = ", "
    unique = True

    def __init__(self, *, item_validator=None, **kwargs: Any) -> None:
        self.item_validator = item_validator
        kwargs.setdefault("required", False)
        super().__init__(**kwargs)

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, list | tuple):
            return self.joiner.join(str(item) for item in value)
        return value

    # A list where CharField gives text: the field exists to turn the one into the other.
    def to_python(self, value: Any) -> list[str]:  # type: ignore[override]
        text = super().to_python(value) or ""
        parts = text.splitlines() if self.separator is None else text.split(self.separator)
        items = [item.strip() for item in parts if item.strip()]
        return list(dict.fromkeys(items)) if self.unique else items

    def validate(self, value: list[str]) -> None:
        if self.required and not value:
            raise ValidationError(self.error_messages["required"], code="required")
        if self.item_validator:
            for item in value:
                try:
                    self.item_validator(item)
                except ValidationError as error:
                    raise ValidationError(
                        _(
                            "%(item)s: use lowercase letters, digits and hyphens, e.g. chat, rag, sql."
                        )
                        % {"item": repr(item)}
                    ) from error


class CommaListField(TypedListField):
    """A short list typed as words separated by commas: 'chat, rag, sql'."""


class LinesField(TypedListField):
    """A list typed one item a line, kept as typed (a line's number names it in errors)."""

    separator = None
    joiner = "\n"
    unique = False
    widget = forms.Textarea


class JSONField(forms.JSONField):
    """Django's JSON form field, refusing what PostgreSQL cannot store (a NUL, an
    unpaired surrogate, nesting past MAX_JSON_DEPTH) and JSON nested too deep for
    Python's parser, as a form error naming the JSON path."""

    default_validators = [validate_storable]

    def to_python(self, value: Any) -> Any:
        try:
            return super().to_python(value)
        except RecursionError:
            raise ValidationError(TOO_DEEP_TO_PARSE, code="invalid") from None

    def bound_data(self, data: Any, initial: Any) -> Any:
        # Redisplayed as typed: re-encoding a lone surrogate would fail the response.
        try:
            value = super().bound_data(data, initial)
        except RecursionError:
            return forms.fields.InvalidJSONInput(data)
        if data is not None and find_unstorable(value) is not None:
            return forms.fields.InvalidJSONInput(data)
        return value


class PrettyJSONField(JSONField):
    """A JSON textarea that shows stored objects indented, one key a line."""

    widget = forms.Textarea

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, forms.fields.InvalidJSONInput):
            return value
        if value is None:  # an empty field, not the JSON text `null`
            return ""
        return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


# ---------------------------------------------------------------- list filters


class LiveFilterSet(django_filters.FilterSet):
    """A list's filters: a plain GET form, which with htmx refreshes only the
    results as the filters change and keeps them in the address bar."""

    @property
    def form(self) -> forms.Form:
        form = super().form
        if getattr(form, "live", False) or self.request is None:
            return form
        for field in form.fields.values():
            widget = field.widget
            typed = isinstance(widget, forms.TextInput) and not isinstance(widget, forms.DateInput)
            if typed:
                widget.input_type = "search"
            widget.attrs.update(
                {
                    "hx-get": self.request.path,
                    "hx-trigger": "input changed delay:250ms, search" if typed else "change",
                    "hx-target": "#results",
                    "hx-push-url": "true",
                    "hx-include": "closest form",
                    "hx-sync": "closest form:replace",
                    "hx-indicator": "closest form",
                    "autocomplete": "off",
                }
            )
        form.live = True
        return form
