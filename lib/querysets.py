"""Querysets whose shape never changes, built once per process.

Building a queryset with joins and subqueries (resolving each name, each OuterRef,
each annotation) can cost as long as running it: on the incident screen it did.
A read that differs from one request to the next only by a final filter can build
the rest once and copy it each time.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable
from typing import TypeVar

from django.db.models import Model, QuerySet

M = TypeVar("M", bound=Model)


def built_once(build: Callable[..., QuerySet[M]]) -> Callable[..., QuerySet[M]]:
    """`build`'s queryset, built on the first call with given arguments (hashable, a
    handful of shapes) and handed out as a fresh copy each time: a copy's results
    never stick to the one kept. `build` must read nothing that changes while the
    process runs: no clock, no settings overridden later.

    The copies share the kept queryset's resolved subqueries, which compiling
    touches: safe in one thread per process (gunicorn's sync workers, Celery's
    prefork pool), a harmless race at worst under threads."""
    kept = functools.cache(build)

    @functools.wraps(build)
    def copy(*shape: Hashable) -> QuerySet[M]:
        return kept(*shape).all()

    return copy
