"""The OpenAPI schema says what the API answers when it refuses, not only when it agrees.

drf-spectacular documents the success of each operation. `AutoSchema`
(REST_FRAMEWORK["DEFAULT_SCHEMA_CLASS"]) adds the refusals every operation of
this API can give, from what the operation takes:

- 400 when it takes a body or query parameters: the body names each field (or
  JSON path) and what it accepts, a reference to a missing object included;
- 401 always: every endpoint needs `Authorization: Token <key>`;
- 403 when it writes: the caller's role or team may not; when it reads too, on a
  view that says so (`reads_need_a_role = True`: exports, webhooks);
- 404 when its path names an object, or its list is paged (a page past the end).

An operation that documents one of these itself (`extend_schema(responses=…)`)
keeps its own.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular import openapi
from drf_spectacular.plumbing import ResolvedComponent
from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers
from rest_framework.permissions import SAFE_METHODS

from lib.api import api_text


class ErrorSerializer(serializers.Serializer):
    detail = serializers.CharField(help_text=api_text("What went wrong, in a sentence."))


VALIDATION_ERROR = {
    "type": "object",
    "description": "Each key is a field of the request (or `detail`, or `non_field_errors`); "
    "its value lists what is wrong with it and what would be accepted.",
    "additionalProperties": {},
    "example": {"team": ["Object with slug=kb-tem does not exist."]},
}


class AutoSchema(openapi.AutoSchema):
    def get_operation(self, *args: Any, **kwargs: Any) -> dict[str, Any] | None:
        operation = super().get_operation(*args, **kwargs)
        if operation is None:
            return None
        places = {parameter["in"] for parameter in operation.get("parameters", [])}
        refusals: dict[str, tuple[Any, str]] = {
            "401": (ErrorSerializer, "No valid `Authorization: Token <key>` header."),
        }
        if "requestBody" in operation or "query" in places:
            refusals["400"] = (
                self._validation_error(),
                "Bad input: each field says what is wrong and what is accepted.",
            )
        if self.method not in SAFE_METHODS or getattr(self.view, "reads_need_a_role", False):
            refusals["403"] = (ErrorSerializer, "The caller's role or team may not do this.")
        if "path" in places or (self._is_list_view() and self._get_paginator()):
            refusals["404"] = (ErrorSerializer, "No such object, or no such page.")
        responses = operation["responses"]
        for code, (body, description) in sorted(refusals.items()):
            if code not in responses:
                responses[code] = self._get_response_for_code(
                    OpenApiResponse(body, description=description), code
                )
        return operation

    def _validation_error(self) -> dict[str, str]:
        component = ResolvedComponent(
            name="ValidationError",
            type=ResolvedComponent.SCHEMA,
            object="ValidationError",
            schema=VALIDATION_ERROR,
        )
        self.registry.register_on_missing(component)
        return component.ref
