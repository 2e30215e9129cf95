"""What a user chose for reading the pages: language and time zone (blank: the browser's)."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from lib.choices import ChoiceLabels
from lib.i18n import is_time_zone


def validate_time_zone(value: str) -> None:
    if value and not is_time_zone(value):
        raise ValidationError(
            gettext("“%(zone)s” is not a time zone name; expected one like Asia/Shanghai or UTC.")
            % {"zone": value},
            code="invalid",
        )


class UserPreference(ChoiceLabels, models.Model):
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="preference"
    )
    language = models.CharField(
        _("language"),
        max_length=16,
        blank=True,
        choices=settings.LANGUAGES,
        help_text=_("Blank: the language your browser asks for."),
    )
    time_zone = models.CharField(
        _("time zone"),
        max_length=64,
        blank=True,
        validators=[validate_time_zone],
        help_text=_("An IANA name such as Asia/Shanghai. Blank: your browser's time zone."),
    )

    class Meta:
        verbose_name = _("user preference")
        verbose_name_plural = _("user preferences")

    def __str__(self) -> str:
        return f"preferences of {self.user}"
