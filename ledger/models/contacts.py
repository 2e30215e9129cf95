"""How to reach a person in an incident besides e-mail: a phone or pager number. Django's
user keeps the name and the e-mail; this row keeps what the user model has no field for."""

from __future__ import annotations

import re

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

# Digits with the separators people write (+86 138-0000 0000, (030) 1234.56); a pager's
# number is digits too. At least three digits, so "+" or "--" alone is refused.
PHONE_SHAPE = re.compile(r"\+?[0-9][0-9 ()./-]{1,30}[0-9)]")


def validate_phone(value: str) -> None:
    if value and (not PHONE_SHAPE.fullmatch(value) or sum(c.isdigit() for c in value) < 3):
        raise ValidationError(
            gettext(
                "Phone or pager: “%(value)s” is not a number; write digits, with spaces, "
                "-, . or ( ) between them and an optional + first, like +86 138 0000 0000."
            )
            % {"value": value},
            code="invalid",
        )


def tel_uri(phone: str) -> str:
    """The `tel:` address of a number as people write it: its + and digits only."""
    return "tel:" + "".join(c for c in phone if c.isdigit() or c == "+")


class Contact(models.Model):
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="contact"
    )
    phone = models.CharField(
        _("phone or pager"),
        max_length=32,
        blank=True,
        validators=[validate_phone],
        help_text=_(
            "Shown in the incident screen's Who to call as a number to tap. Blank: e-mail only."
        ),
    )

    class Meta:
        verbose_name = _("contact")
        verbose_name_plural = _("contacts")

    def __str__(self) -> str:
        return f"contact of {self.user}"
