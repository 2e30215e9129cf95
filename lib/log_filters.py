"""Logging filters named in LOGGING (config/settings.py).

Loaded while Django configures logging, before the apps: import nothing heavy.
"""

from __future__ import annotations

import logging

from django.core.exceptions import PermissionDenied


class OneLineRefusals(logging.Filter):
    """django.request logs PermissionDenied with its traceback; make it one line.

    "Forbidden (Permission denied): /path" becomes
    "Forbidden (Permission denied): GET /path: Only model owners of team 'x' can change this."
    A refusal is the permission rules working, not a bug: the reason is what
    someone reading the log needs. Everything else passes unchanged.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, PermissionDenied):
            request = getattr(record, "request", None)
            method = getattr(request, "method", "")
            path = record.args[0] if isinstance(record.args, tuple) and record.args else ""
            where = f"{method} {path}".strip()
            reason = str(exc).encode("unicode_escape").decode("ascii") or "no reason given"
            record.msg = "Forbidden (Permission denied): %s: %s"
            record.args = (where, reason)
            record.exc_info = None
            record.exc_text = None
        return True
