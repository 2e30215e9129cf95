#!/usr/bin/env python3
"""Rebuild the zh-hans catalog from the sources and report what is untranslated.

    .venv/bin/python scripts/translations.py [--only PATH_PREFIX ...]

Runs `manage.py makemessages` (GNU gettext's xgettext: `make messages` installs it)
to collect every marked string into locale/zh_Hans/LC_MESSAGES/django.po, keeping
the translations already there, then `compilemessages` into the .mo the site reads,
then lists the messages still without a translation — only those found under the
given path prefixes with --only (e.g. --only templates/ledger ledger/).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.pofile import read_po, write_po

ROOT = Path(__file__).resolve().parent.parent
CATALOG = ROOT / "locale" / "zh_Hans" / "LC_MESSAGES" / "django.po"
IGNORED = [
    "locale/*",
    "bench/*",
    "docs/*",
    "scripts/*",
    "staticfiles/*",
    "tests/*",
    "var/*",
    "docker/*",
]


def _manage(*args: str) -> None:
    env = {**os.environ, "DEBUG": "true"}
    subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, check=True)  # noqa: S603 - our own manage.py


def _read(path: Path) -> Catalog:
    with path.open("rb") as handle:
        return read_po(handle)


def _fix_header() -> None:
    """makemessages writes a fuzzy template header; msgfmt would drop its charset."""
    catalog = _read(CATALOG)
    catalog.fuzzy = False
    catalog.project = "Inference Release Ledger"
    with CATALOG.open("wb") as handle:
        write_po(handle, catalog, width=0, include_previous=False)


def rebuild() -> None:
    ignore = [arg for pattern in IGNORED for arg in ("--ignore", pattern)]
    _manage(
        "makemessages",
        "--locale",
        "zh_Hans",
        "--no-obsolete",
        "--no-wrap",
        "--add-location",
        "file",
        *ignore,
    )
    _fix_header()
    _manage("compilemessages", "--locale", "zh_Hans", "--ignore", ".venv")


def untranslated(prefixes: list[str]) -> list[tuple[str, str]]:
    with CATALOG.open("rb") as handle:
        catalog = read_po(handle)
    missing = []
    for message in catalog:
        if not message.id:
            continue
        strings = message.string if isinstance(message.string, tuple) else (message.string,)
        if all(strings) and not message.fuzzy:
            continue
        places = sorted({path for path, _line in message.locations})
        if prefixes and not any(place.startswith(tuple(prefixes)) for place in places):
            continue
        msgid = message.id if isinstance(message.id, str) else message.id[0]
        missing.append((", ".join(places), msgid))
    return missing


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", default=[], help="path prefixes to report on")
    parser.add_argument("--no-rebuild", action="store_true", help="only report")
    args = parser.parse_args()
    if not args.no_rebuild:
        rebuild()
    missing = untranslated(args.only)
    for places, msgid in missing:
        print(f"{places}: {msgid!r}")
    print(f"{len(missing)} untranslated", file=sys.stderr)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
