"""`get_FOO_display` through lib.choices.ChoiceLabels says what Django's own says, in
each language, for every choice of every model of the three apps."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.db import models
from django.utils import translation

from lib.choices import ChoiceLabels

CHOICE_FIELDS = [
    (model, field)
    for model in apps.get_models()
    if model._meta.app_label in ("ledger", "replay", "releases")
    for field in model._meta.fields
    if field.choices
]


def test_every_model_with_choices_reads_its_labels_cheaply():
    slow = sorted(
        {model.__name__ for model, _ in CHOICE_FIELDS if not issubclass(model, ChoiceLabels)}
    )
    assert not slow, f"add lib.choices.ChoiceLabels to: {', '.join(slow)}"
    assert len(CHOICE_FIELDS) > 30


@pytest.mark.parametrize("language", ["en", "zh-hans"])
@pytest.mark.parametrize(
    ("model", "field"), CHOICE_FIELDS, ids=[f"{m.__name__}.{f.name}" for m, f in CHOICE_FIELDS]
)
def test_labels_are_djangos_own(model, field, language):
    instance = model()
    display = getattr(instance, f"get_{field.name}_display")
    values = [value for value, _ in field.flatchoices]
    with translation.override(language):
        for value in [*values, "not-a-choice", None]:
            setattr(instance, field.attname, value)
            assert display() == models.Model._get_FIELD_display(instance, field), value


def test_a_label_is_translated_when_it_is_read():
    from releases.models import Release

    release = Release(state=Release.State.SUBMITTED)
    english = release.get_state_display()
    with translation.override("zh-hans"):
        chinese = release.get_state_display()
        assert chinese == str(Release.State.SUBMITTED.label)
    assert english == "Submitted" != chinese
