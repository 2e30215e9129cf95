"""pgtrigger's escape hatch for the test harness, on connections that bind on the server."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pgtrigger
import psycopg
from django.db import connections


@contextlib.contextmanager
def ignoring(*uris: str, using: str = "default") -> Iterator[None]:
    """`pgtrigger.ignore(*uris)` on the `using` connection. The hatch puts a second
    statement before each one, which a connection binding on the server (prepared
    statements: config/settings.py) refuses; it binds on the client meanwhile."""
    connection = connections[using]
    connection.ensure_connection()
    binding = connection.connection.cursor_factory
    connection.connection.cursor_factory = psycopg.ClientCursor
    try:
        with pgtrigger.ignore(*uris, databases=[using]):
            yield
    finally:
        connection.connection.cursor_factory = binding
