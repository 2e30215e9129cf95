"""What every app's REST API shares: calling a domain verb as the requester,
parsers and filters that refuse what PostgreSQL cannot store.

The verbs validate, check who may, write and append the Event; this only
translates their refusals into HTTP: ValidationError → 400 keyed by field,
PermissionDenied → 403. The parsers (REST_FRAMEWORK["DEFAULT_PARSER_CLASSES"])
refuse a NUL or an unpaired surrogate anywhere in a body with a 400 naming its
JSON path, before a serializer looks it up or a JSON column stores it.
`ApiFilterSet` is the base of every API filter set.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import django_filters
from django import forms
from django.core.exceptions import NON_FIELD_ERRORS
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import models
from django.http import QueryDict
from django_filters.fields import IsoDateTimeField
from django_filters.utils import get_model_field
from rest_framework import exceptions, parsers
from rest_framework.fields import get_error_detail
from rest_framework.settings import api_settings

from lib.storable import TOO_DEEP_TO_PARSE, find_unstorable, offset_problem, text_problem


def api_text(text: str) -> str:
    """Text of the API and its schema (a filter's help, a serializer field's), which
    stays English in every language (docs/glossary.md): the call says it is not for
    the translation catalog, where a bare literal would look forgotten."""
    return text


def field_errors(exc: DjangoValidationError) -> dict[str, Any]:
    detail = get_error_detail(exc)
    if isinstance(detail, list):
        return {api_settings.NON_FIELD_ERRORS_KEY: detail}
    return {
        (api_settings.NON_FIELD_ERRORS_KEY if key == NON_FIELD_ERRORS else key): errors
        for key, errors in detail.items()
    }


# The mixin goes before an APIView (a viewset); mypy is told so, Python needs no base.
if TYPE_CHECKING:
    from rest_framework.views import APIView

    _ViewBase = APIView
else:
    _ViewBase = object


class DomainVerbMixin(_ViewBase):
    """Calls a domain verb as the requester and answers its refusals in HTTP terms."""

    def call_verb(self, verb: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return verb(*args, actor=self.request.user, **kwargs)
        except DjangoValidationError as exc:
            raise exceptions.ValidationError(field_errors(exc)) from exc
        except DjangoPermissionDenied as exc:
            raise exceptions.PermissionDenied(str(exc) or None) from exc


# ---------------------------------------------------------------- parsers


def refuse_unstorable(data: Any) -> None:
    """A 400 keyed by the top-level field when a body holds what PostgreSQL cannot store.

    Checked once, on the parsed body, so that no serializer field, relation
    lookup or JSON column ever sends a NUL or a lone surrogate to the database.
    """
    found = find_unstorable(data)
    if found is None:
        return
    first = found.path[0] if found.path else None
    key = first if isinstance(first, str) and text_problem(first) is None else None
    raise exceptions.ValidationError({key or api_settings.NON_FIELD_ERRORS_KEY: [found.message()]})


def _form_fields(data: QueryDict) -> dict[str, Any]:
    return {key: values[0] if len(values) == 1 else values for key, values in data.lists()}


class JSONParser(parsers.JSONParser):
    """DRF's JSON parser, refusing what cannot be stored and JSON nested too deep to parse."""

    def parse(self, stream, media_type=None, parser_context=None) -> Any:
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise exceptions.ParseError(f"JSON parse error - {TOO_DEEP_TO_PARSE}.") from None
        refuse_unstorable(data)
        return data


class FormParser(parsers.FormParser):
    """DRF's form parser, refusing a NUL in any field (decoding already replaced
    what is not UTF-8, so no surrogate gets this far)."""

    def parse(self, stream, media_type=None, parser_context=None):  # the stubs' own return type
        data = super().parse(stream, media_type, parser_context)
        refuse_unstorable(_form_fields(data))
        return data


class MultiPartParser(parsers.MultiPartParser):
    """DRF's multipart parser, refusing a NUL in any non-file field."""

    def parse(self, stream, media_type=None, parser_context=None) -> parsers.DataAndFiles:
        parsed = super().parse(stream, media_type, parser_context)
        refuse_unstorable(_form_fields(parsed.data))
        return parsed


# ---------------------------------------------------------------- filters


class StorableIsoDateTimeField(IsoDateTimeField):
    """ISO 8601, with a time-zone offset PostgreSQL can compare against (±15:59)."""

    def to_python(self, value: Any) -> dt.datetime | None:
        parsed = super().to_python(value)
        problem = offset_problem(parsed) if parsed is not None else None
        if problem:
            raise DjangoValidationError(problem, code="offset")
        return parsed


class IsoDateTimeFilter(django_filters.IsoDateTimeFilter):
    field_class = StorableIsoDateTimeField


class StrictBooleanField(forms.NullBooleanField):
    """true or false (1 or 0); anything else is refused, where django-filter's
    boolean filter quietly ignores it and answers the unfiltered list."""

    widget = forms.TextInput

    def to_python(self, value: Any) -> bool | None:  # type: ignore[override]  # None: no filter
        text = str(value).strip().lower() if value is not None else ""
        if text == "":
            return None
        if text in ("true", "1"):
            return True
        if text in ("false", "0"):
            return False
        raise DjangoValidationError(f"{value} is not true or false.", code="invalid")

    def validate(self, value: Any) -> None:
        pass


class ApiFilterSet(django_filters.FilterSet):
    """The API's filter sets refuse what the schema does not allow, rather than
    ignore it: an enum filter names the allowed values, a filter on a missing row
    names what is missing (django-filter's "Select a valid choice" says neither),
    a boolean is true or false, a count a whole number, and a datetime ISO 8601
    with an offset PostgreSQL can take. An empty parameter still means no filter."""

    FILTER_DEFAULTS = {
        **django_filters.FilterSet.FILTER_DEFAULTS,
        models.DateTimeField: {"filter_class": IsoDateTimeFilter},
    }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name, api_filter in self.filters.items():
            message = _invalid_choice_message(api_filter)
            if message:
                api_filter.extra.setdefault("error_messages", {})["invalid_choice"] = message
            if isinstance(api_filter, django_filters.BooleanFilter):
                api_filter.field_class = StrictBooleanField
            elif isinstance(api_filter, django_filters.NumberFilter) and self._counts(name):
                # A whole number, as the schema says: 0.5 is refused, not matched against.
                api_filter.field_class = forms.IntegerField
            # A form field built earlier (the schema generator builds them) is cached.
            api_filter.__dict__.pop("_field", None)

    def _counts(self, name: str) -> bool:
        field_name = self.filters[name].field_name
        model_field = get_model_field(self._meta.model, field_name) if field_name else None
        if isinstance(model_field, models.ForeignKey):
            model_field = model_field.target_field
        return isinstance(model_field, models.IntegerField | models.AutoField)


def _invalid_choice_message(choice_filter: django_filters.Filter) -> str | None:
    if isinstance(choice_filter, django_filters.ModelChoiceFilter):
        # A reference to a row: name what is missing (the schema documents the 400).
        model = getattr(choice_filter.queryset, "model", None)  # None: a callable
        if model is None:
            return None
        key = choice_filter.extra.get("to_field_name") or "id"
        return f"No {model._meta.verbose_name} with {key} %(value)s."
    if isinstance(choice_filter, django_filters.ChoiceFilter):
        allowed = ", ".join(_choice_values(choice_filter.extra["choices"]))
        return f"%(value)s is not one of the allowed values: {allowed.replace('%', '%%')}."
    return None


def _choice_values(choices: Any) -> list[str]:
    if callable(choices):
        choices = choices()
    return [str(value) for value, _label in choices if value not in ("", None)]
