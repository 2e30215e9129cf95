"""Price sheets read: the versions of each GPU model, the price in force on a day, and
the GPU models runtimes run on that have no price yet.

The price of a day is the version with the latest `effective_from` on or before it
(`PriceSheet.objects.in_force`); `in_force_among` picks it from versions already read.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ledger.models import PriceSheet, Runtime, Service


@dataclass
class GpuModelPrices:
    """One GPU model on the price sheets page."""

    gpu_model: str
    versions: list[PriceSheet]  # newest first
    in_force: PriceSheet | None
    runtimes: list[str] = field(default_factory=list)  # names
    services: list[str] = field(default_factory=list)  # slugs of services live on it


def versions_by_gpu_model(gpu_models: Iterable[str] | None = None) -> dict[str, list[PriceSheet]]:
    """Every version of each GPU model (of `gpu_models`, when given), newest first."""
    rows = PriceSheet.objects.select_related("recorded_by").order_by("gpu_model", "-effective_from")
    if gpu_models is not None:
        rows = rows.filter(gpu_model__in=set(gpu_models))
    found: dict[str, list[PriceSheet]] = defaultdict(list)
    for sheet in rows:
        found[sheet.gpu_model].append(sheet)
    return dict(found)


def in_force_among(versions: Sequence[PriceSheet], day: dt.date) -> PriceSheet | None:
    """The version holding on `day` among one GPU model's versions, newest first."""
    return next((sheet for sheet in versions if sheet.effective_from <= day), None)


def price_in_force(gpu_model: str, day: dt.date) -> PriceSheet | None:
    return PriceSheet.objects.in_force(gpu_model, day)


def prices_in_force(gpu_models: Iterable[str], day: dt.date) -> dict[str, PriceSheet]:
    """The version in force on `day` of each of `gpu_models` that has one, in one query
    (the versions up to the day; a GPU model has a handful)."""
    wanted = {model for model in gpu_models if model}
    if not wanted:
        return {}
    found: dict[str, PriceSheet] = {}
    rows = PriceSheet.objects.filter(gpu_model__in=wanted, effective_from__lte=day).order_by(
        "gpu_model", "-effective_from"
    )
    for sheet in rows:
        found.setdefault(sheet.gpu_model, sheet)
    return found


def _runtimes_by_gpu_model() -> dict[str, list[str]]:
    found: dict[str, list[str]] = defaultdict(list)
    rows = Runtime.objects.exclude(gpu_model="").order_by("gpu_model", "name")
    for gpu_model, name in rows.values_list("gpu_model", "name"):
        found[gpu_model].append(name)
    return dict(found)


def _services_by_gpu_model() -> dict[str, list[str]]:
    found: dict[str, list[str]] = defaultdict(list)
    rows = (
        Service.objects.filter(live_revision__isnull=False)
        .exclude(live_revision__runtime__gpu_model="")
        .order_by("live_revision__runtime__gpu_model", "slug")
    )
    for gpu_model, slug in rows.values_list("live_revision__runtime__gpu_model", "slug"):
        found[gpu_model].append(slug)
    return dict(found)


def unpriced_gpu_models(day: dt.date) -> list[str]:
    """The GPU models runtimes name that have no price in force on `day`, sorted."""
    used = set(Runtime.objects.exclude(gpu_model="").values_list("gpu_model", flat=True))
    return sorted(used - set(prices_in_force(used, day)))


def price_overview(day: dt.date) -> tuple[list[GpuModelPrices], list[GpuModelPrices]]:
    """The GPU models that have versions, and those runtimes use without a price in force
    on `day` (a model with only a future version is in both), in three queries."""
    versions = versions_by_gpu_model()
    runtimes = _runtimes_by_gpu_model()
    services = _services_by_gpu_model()
    priced = [
        GpuModelPrices(
            gpu_model=model,
            versions=sheets,
            in_force=in_force_among(sheets, day),
            runtimes=runtimes.get(model, []),
            services=services.get(model, []),
        )
        for model, sheets in sorted(versions.items())
    ]
    unpriced = [
        GpuModelPrices(
            gpu_model=model,
            versions=versions.get(model, []),
            in_force=None,
            runtimes=names,
            services=services.get(model, []),
        )
        for model, names in sorted(runtimes.items())
        if in_force_among(versions.get(model, []), day) is None
    ]
    return priced, unpriced
