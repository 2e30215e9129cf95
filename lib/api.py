"""What every app's REST API shares: calling a domain verb as the requester.

The verbs validate, check who may, write and append the Event; this only
translates their refusals into HTTP: ValidationError → 400 keyed by field,
PermissionDenied → 403.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django.core.exceptions import NON_FIELD_ERRORS
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import exceptions
from rest_framework.fields import get_error_detail
from rest_framework.settings import api_settings


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
