"""Querysets whose shape never changes, built once per process.

Building a queryset with joins and subqueries (resolving each name, each OuterRef,
each annotation) can cost as long as running it: on the incident screen it did.
A read that differs from one request to the next only by a final filter can build
the rest once and copy it each time.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TypeVar

from django.db.models import Model, QuerySet

M = TypeVar("M", bound=Model)


def built_once(build: Callable[[], QuerySet[M]]) -> Callable[[], QuerySet[M]]:
    """`build`'s queryset, built on the first call and handed out as a fresh copy each
    time (a copy's results never stick to the one kept). `build` must read nothing
    that changes while the process runs: no clock, no settings overridden later."""
    kept = functools.cache(build)

    @functools.wraps(build)
    def copy() -> QuerySet[M]:
        return kept().all()

    return copy
