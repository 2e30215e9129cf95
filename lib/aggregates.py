"""Aggregates that run on both databases the ledger supports (PostgreSQL in production,
SQLite on the embedded default): django.contrib.postgres's ArrayAgg does not run on
SQLite, and Django 5.2 has no portable string aggregate."""

from __future__ import annotations

from typing import Any

from django.db.models import Aggregate, CharField, Value

SEPARATOR = "\x1f"  # the ASCII unit separator: never inside a slug or a name


class ListAgg(Aggregate):
    """The values of a text column joined in one string, `SEPARATOR` between them;
    `split` turns it back into a list (empty when there were none)."""

    function = "STRING_AGG"
    output_field = CharField()

    def __init__(self, expression: Any, **extra: Any) -> None:
        super().__init__(expression, Value(SEPARATOR), **extra)

    def as_sqlite(self, compiler, connection, **extra_context):
        return super().as_sql(compiler, connection, function="GROUP_CONCAT", **extra_context)


def split(joined: str | None) -> list[str]:
    return sorted(joined.split(SEPARATOR)) if joined else []
