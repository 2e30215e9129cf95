"""Choice labels read cheaply.

Django's `get_FOO_display` builds a dict of the field's choices on every call, and
building it hashes each label: a lazily translated label is hashed by translating it,
so a field of nine choices costs nine catalog lookups, 43-62 µs against 8-9 µs for a
scan. The list and release pages ask for a few labels a row: about 5 ms a page.
"""

from __future__ import annotations

from typing import Any

from django.db import models
from django.utils.encoding import force_str


class ChoiceLabels:
    """Mixed into a model before `models.Model`: `get_FOO_display` scans the field's
    choices for the value instead, translating only the label it returns."""

    def _get_FIELD_display(self, field: models.Field) -> Any:
        value = getattr(self, field.attname)
        for choice, label in field.flatchoices:
            if choice == value:
                return force_str(label, strings_only=True)
        return force_str(value, strings_only=True)
