"""A refused choice over the API names the value and the allowed ones, as the pages do
(`lib.forms.NamedChoicesMixin`): DRF's own message names only the value."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

# A long list is cut, saying how many more there are.
_CHOICES_LISTED = 12


def _allowed(field: serializers.ChoiceField) -> str:
    values = [str(value) for value in field.choices if value not in ("", None)]
    listed = ", ".join(values[:_CHOICES_LISTED])
    if len(values) > _CHOICES_LISTED:
        listed += f", and {len(values) - _CHOICES_LISTED} more"
    # The message is a str.format template with {input}: braces in a value are doubled.
    return listed.replace("{", "{{").replace("}", "}}")


class NamedChoicesMixin(serializers.Serializer):
    """Every choice field of the serializer says what it takes when refusing a value."""

    def get_fields(self) -> dict[str, Any]:
        fields = super().get_fields()
        for field in fields.values():
            if isinstance(field, serializers.ChoiceField) and not field.read_only:
                field.error_messages["invalid_choice"] = (
                    f'"{{input}}" is not one of the choices; expected one of: {_allowed(field)}.'
                )
        return fields
