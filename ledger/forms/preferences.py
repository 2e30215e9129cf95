"""The user's language and time zone, on their preferences page, and the top bar's switcher."""

from __future__ import annotations

from typing import Any, cast

from django import forms
from django.conf import settings
from django.utils.translation import gettext_lazy as _

from ledger.models import UserPreference
from lib.forms import InlineValidationMixin, NamedChoicesMixin
from lib.i18n import known_time_zones


class PreferenceForm(InlineValidationMixin, forms.ModelForm):
    class Meta:
        model = UserPreference
        fields = ["language", "time_zone"]
        widgets = {
            "time_zone": forms.TextInput(attrs={"list": "time-zones", "autocomplete": "off"})
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        language = cast(forms.ChoiceField, self.fields["language"])
        language.choices = [("", _("As my browser asks")), *settings.LANGUAGES]

    @staticmethod
    def time_zone_names() -> list[str]:
        return sorted(known_time_zones())


class LanguageSwitchForm(NamedChoicesMixin, forms.Form):
    language = forms.ChoiceField(label=_("Language"), choices=settings.LANGUAGES)
    next = forms.CharField(required=False, widget=forms.HiddenInput)
