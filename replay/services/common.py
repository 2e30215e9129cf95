"""Small helpers the replay verbs share."""

from __future__ import annotations

import zlib

from django.db import connection


def try_singleton_lock(name: str) -> bool:
    """Take a transaction-scoped lock named ``name``; False when another holder has it.

    A PostgreSQL advisory lock, released at commit or rollback, so a periodic task
    that two beat ticks (or two beats by mistake) start twice runs once. SQLite's
    IMMEDIATE transactions (see settings) already admit one writer at a time.
    """
    if not connection.in_atomic_block:
        raise RuntimeError("try_singleton_lock must run inside transaction.atomic()")
    if connection.vendor != "postgresql":
        return True
    key = zlib.crc32(f"replay:{name}".encode())
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", [key])
        return bool(cursor.fetchone()[0])
