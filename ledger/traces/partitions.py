"""The day partitions of `ledger_modelcallspan` on PostgreSQL.

A day's partition (`ledger_modelcallspan_p20261207`, UTC days) is created when the
first span of that day arrives; the retention sweep drops whole partitions. Creating
one is serialised by a transaction-scoped advisory lock, so two ingesting processes
never race on the same name. On SQLite there are no partitions: every function here
answers as if the table were one.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable

from django.db import connection

TABLE = "ledger_modelcallspan"
_NAME = re.compile(rf"^{TABLE}_p(\d{{8}})$")
# pg_advisory_xact_lock's key: "ledger_modelcallspan partitions" hashed once, fixed.
_LOCK_KEY = 0x6C6D6373


def partitioned() -> bool:
    return connection.vendor == "postgresql"


def name_of(day: dt.date) -> str:
    return f"{TABLE}_p{day:%Y%m%d}"


def existing() -> dict[dt.date, str]:
    """The day partitions there are, by day."""
    if not partitioned():
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = %s::regclass",
            [TABLE],
        )
        names = [row[0] for row in cursor.fetchall()]
    days = {}
    for name in names:
        if match := _NAME.match(name):
            days[dt.datetime.strptime(match.group(1), "%Y%m%d").date()] = name
    return days


def ensure(days: Iterable[dt.date]) -> list[dt.date]:
    """Create the partitions of these days that do not exist; the days created.
    Must run inside the caller's transaction (the lock is released at its end)."""
    wanted = sorted(set(days))
    if not partitioned() or not wanted:
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT d FROM unnest(%s::date[]) d WHERE to_regclass(%s || to_char(d, 'YYYYMMDD')) "
            "IS NULL",
            [wanted, f"{TABLE}_p"],
        )
        missing = [row[0] for row in cursor.fetchall()]
        if not missing:
            return []
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_LOCK_KEY])
        created = []
        for day in missing:
            cursor.execute("SELECT to_regclass(%s)", [name_of(day)])
            if cursor.fetchone()[0] is not None:
                continue  # another process made it while this one waited for the lock
            # DDL takes no bound parameters: the bounds are written from a date's digits.
            cursor.execute(
                f'CREATE TABLE "{name_of(day)}" PARTITION OF "{TABLE}" FOR VALUES FROM '
                f"('{_midnight(day)}') TO ('{_midnight(day + dt.timedelta(days=1))}')"
            )
            created.append(day)
    return created


def drop_before(day: dt.date) -> list[dt.date]:
    """Drop the partitions of the days before `day`; the days dropped."""
    old = {d: name for d, name in existing().items() if d < day}
    if not old:
        return []
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_LOCK_KEY])
        for name in old.values():
            cursor.execute(f'DROP TABLE IF EXISTS "{name}"')
    return sorted(old)


def _midnight(day: dt.date) -> str:
    return f"{day.isoformat()} 00:00:00+00"
