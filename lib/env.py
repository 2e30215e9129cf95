"""Typed readers for settings that come from the environment.

Each helper refuses a malformed value with ImproperlyConfigured naming the
variable, and accepts ``<NAME>_FILE`` (a path whose content is the value) so
that secrets can come from Docker or Kubernetes secret files.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured
from dotenv import dotenv_values

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}
# Every variable the settings have read: names a backend may never use as its
# credential (replay.outbound), since they hold the ledger's own secrets.
READ_NAMES: set[str] = set()


def _raw(name: str) -> str | None:
    READ_NAMES.add(name)
    file_name = os.environ.get(f"{name}_FILE")
    if file_name:
        try:
            return Path(file_name).read_text().strip()
        except OSError as exc:
            raise ImproperlyConfigured(f"{name}_FILE={file_name!r} cannot be read: {exc}") from exc
    return os.environ.get(name)


def env_str(name: str, default: str = "") -> str:
    value = _raw(name)
    return default if value is None else value


def env_bool(name: str, default: bool = False) -> bool:
    value = _raw(name)
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ImproperlyConfigured(
        f"{name}={value!r} is not a boolean: use one of true/false, 1/0, yes/no"
    )


def env_int(name: str, default: int) -> int:
    value = _raw(name)
    if value is None or value.strip() == "":
        return default
    try:
        return int(value)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}={value!r} is not a whole number") from exc


def env_list(name: str, default: list[str]) -> list[str]:
    """A comma-separated list; blank items are dropped."""
    value = _raw(name)
    if value is None:
        return list(default)
    return [item.strip() for item in value.split(",") if item.strip()]


def env_list_or_none(name: str) -> list[str] | None:
    """A comma-separated list, or None when the variable is unset (set and empty is
    an empty list): for a list whose absence means something else."""
    value = _raw(name)
    if value is None:
        return None
    return [item.strip() for item in value.split(",") if item.strip()]


_RATE = re.compile(r"^\s*\d+\s*/\s*(s|sec|second|m|min|minute|h|hour|d|day)\s*$")


def env_rate(name: str, default: str) -> str:
    """A request rate as Django REST framework's throttles read it: "100/min"."""
    value = _raw(name)
    if value is None or value.strip() == "":
        return default
    if not _RATE.match(value):
        raise ImproperlyConfigured(
            f"{name}={value!r} is not a rate: use a number of requests per s, min, hour "
            "or day, e.g. 100/min"
        )
    return value.strip().replace(" ", "")


def load_local_env(path: Path) -> list[str]:
    """Set the variables of a local development file that the environment leaves unset.

    `make run` writes one (var/local.env: DEBUG=true and a generated SECRET_KEY), so
    the commands the README shows work in that checkout afterwards. Production has
    none: the image never contains var/. Returns the names it set.
    """
    if not path.is_file():
        return []
    set_here = []
    for name, value in dotenv_values(path).items():
        if value is not None and name not in os.environ:
            os.environ[name] = value
            set_here.append(name)
    return set_here
