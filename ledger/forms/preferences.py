"""The user's language and time zone, on their preferences page."""

from __future__ import annotations

from django import forms
from django.utils.translation import gettext_lazy as _

from ledger.models import UserPreference
from lib.forms import InlineValidationMixin
from lib.i18n import known_time_zones


class PreferenceForm(InlineValidationMixin, forms.ModelForm):
    class Meta:
        model = UserPreference
        fields = ["language", "time_zone"]
        widgets = {"time_zone": forms.TextInput(attrs={"list": "time-zones", "autocomplete": "off"})}

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["language"].choices = [("", _("As my browser asks")), *self.fields["language"].choices[1:]]

    @staticmethod
    def time_zone_names() -> list[str]:
        return sorted(known_time_zones())


class LanguageSwitchForm(forms.Form):
    language = forms.ChoiceField(label=_("Language"), choices=())
    next = forms.CharField(required=False, widget=forms.HiddenInput)

    def __init__(self, *args, **kwargs) -> None:
        from django.conf import settings

        super().__init__(*args, **kwargs)
        self.fields["language"].choices = settings.LANGUAGES
