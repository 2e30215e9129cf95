"""Price sheets: record a version of what an hour of a GPU model costs.

A version is never rewritten: a new price is a new version from a later day, and
each version is an Event (`price_sheet.recorded`). Who may is
`permissions.can_record_price_sheet`; pages and the API both call this verb.
"""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal, InvalidOperation
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from ledger import permissions
from ledger.chain import append_event
from ledger.models import PriceSheet
from lib.actors import Actor

__all__ = ["record_price_sheet", "recorded_payload"]

CURRENCY = re.compile(r"^[A-Z]{3}$")
GPU_MODEL_MAX_LENGTH = PriceSheet._meta.get_field("gpu_model").max_length or 60
NOTE_MAX_LENGTH = PriceSheet._meta.get_field("note").max_length or 300
PRICE_DECIMALS = 4
# Decimal(12, 4): eight digits before the point.
PRICE_LIMIT = Decimal(10) ** 8


def _price(value: Any) -> Decimal:
    try:
        price = value if isinstance(value, Decimal) else Decimal(str(value).strip())
    except (InvalidOperation, ValueError):
        raise ValidationError(
            {"price_per_gpu_hour": _("%(value)s is not a number, e.g. 2.4500.") % {"value": value}}
        ) from None
    if not price.is_finite():
        raise ValidationError({"price_per_gpu_hour": _("The price must be a finite number.")})
    if price < 0:
        raise ValidationError(
            {"price_per_gpu_hour": _("A price cannot be negative (write 0 for free hardware).")}
        )
    exponent = price.as_tuple().exponent
    if isinstance(exponent, int) and -exponent > PRICE_DECIMALS:
        raise ValidationError(
            {
                "price_per_gpu_hour": _(
                    "%(value)s has more than 4 decimals; round it to 4, e.g. 2.4500."
                )
                % {"value": price}
            }
        )
    if price >= PRICE_LIMIT:
        raise ValidationError(
            {"price_per_gpu_hour": _("The price must be below 100000000 per GPU-hour.")}
        )
    # As the column keeps it (2.45 reads back 2.4500; -0 is 0), in the Event and the
    # answer alike.
    return (price if price else Decimal(0)).quantize(Decimal(1).scaleb(-PRICE_DECIMALS))


def _effective_from(value: Any) -> dt.date:
    if isinstance(value, dt.datetime):
        raise ValidationError(
            {"effective_from": _("Give a day (YYYY-MM-DD), not a time: a price holds from a day.")}
        )
    if isinstance(value, dt.date):
        return value
    try:
        return dt.date.fromisoformat(str(value))
    except ValueError:
        raise ValidationError(
            {"effective_from": _("%(value)s is not a date: give YYYY-MM-DD.") % {"value": value}}
        ) from None


def _clean(
    gpu_model: Any, price_per_gpu_hour: Any, currency: Any, effective_from: Any, note: Any
) -> tuple[str, Decimal, str, dt.date, str]:
    """Every field checked, every problem named by its field at once."""
    errors: dict[str, list[str]] = {}
    values: dict[str, Any] = {}
    model = str(gpu_model or "").strip()
    if not model:
        errors["gpu_model"] = [_("Name the GPU model as runtimes name it, e.g. H100-80GB.")]
    elif len(model) > GPU_MODEL_MAX_LENGTH:
        errors["gpu_model"] = [
            _("A GPU model is at most %(limit)d characters.") % {"limit": GPU_MODEL_MAX_LENGTH}
        ]
    code = str(currency or "").strip()
    if not CURRENCY.match(code):
        errors["currency"] = [
            _("%(value)s is not an ISO 4217 code: three capital letters, e.g. USD, EUR, CNY.")
            % {"value": code or _("an empty value")}
        ]
    text = str(note or "").strip()
    if len(text) > NOTE_MAX_LENGTH:
        errors["note"] = [_("A note is at most %(limit)d characters.") % {"limit": NOTE_MAX_LENGTH}]
    for name, parse, value in (
        ("price_per_gpu_hour", _price, price_per_gpu_hour),
        ("effective_from", _effective_from, effective_from),
    ):
        try:
            values[name] = parse(value)
        except ValidationError as exc:
            errors.update(exc.message_dict)
    if errors:
        raise ValidationError(errors)
    return model, values["price_per_gpu_hour"], code, values["effective_from"], text


def _duplicate(gpu_model: str, day: dt.date) -> ValidationError:
    if day == dt.date.max:
        return ValidationError(
            {
                "effective_from": _("%(gpu)s already has a price from %(day)s.")
                % {"gpu": gpu_model, "day": day}
            }
        )
    return ValidationError(
        {
            "effective_from": _(
                "%(gpu)s already has a price from %(day)s, and a version is never rewritten: "
                "record the new price from %(next)s or later."
            )
            % {"gpu": gpu_model, "day": day.isoformat(), "next": (day + dt.timedelta(days=1))}
        }
    )


@transaction.atomic
def record_price_sheet(
    *,
    actor: Actor,
    gpu_model: str,
    price_per_gpu_hour: Decimal | str | int,
    currency: str,
    effective_from: dt.date | str,
    note: str = "",
) -> PriceSheet:
    """Record a new version of `gpu_model`'s price per GPU-hour from `effective_from`
    (a future day is allowed: a price announced ahead)."""
    permissions.ensure_can_record_price_sheet(actor)
    model, price, code, day, text = _clean(
        gpu_model, price_per_gpu_hour, currency, effective_from, note
    )
    if PriceSheet.objects.filter(gpu_model=model, effective_from=day).exists():
        raise _duplicate(model, day)
    try:
        # A savepoint: a version recorded by someone else meanwhile is refused in words.
        with transaction.atomic():
            sheet = PriceSheet.objects.create(
                gpu_model=model,
                price_per_gpu_hour=price,
                currency=code,
                effective_from=day,
                note=text,
                recorded_by=actor if actor is not None and actor.is_authenticated else None,
                recorded_at=timezone.now(),
            )
    except IntegrityError:
        raise _duplicate(model, day) from None
    append_event(
        actor=actor,
        action="price_sheet.recorded",
        subject=sheet,
        subject_label=f"{model} price from {day.isoformat()}",
        payload=recorded_payload(sheet),
    )
    return sheet


def recorded_payload(sheet: PriceSheet) -> dict[str, Any]:
    """What the `price_sheet.recorded` Event of a version says."""
    return {
        "gpu_model": sheet.gpu_model,
        "price_per_gpu_hour": str(sheet.price_per_gpu_hour),
        "currency": sheet.currency,
        "effective_from": sheet.effective_from.isoformat(),
        "note": sheet.note,
    }
