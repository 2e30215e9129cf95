"""Import a sample set from a JSON Lines file, the way teams keep them in version control.

The same verb as the import page and the API (`services.import_sample_set`, run as the
system): every line validated, all or nothing, a new version only when the content
differs from the latest one. `--starter` imports the sets that ship with the ledger.
"""

from __future__ import annotations

import sys
from pathlib import Path

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from replay.management.commands._common import messages
from replay.services import import_sample_set
from replay.starters import STARTER_DIR, starter_files, starter_name


class _DryRun(Exception):
    pass


class Command(BaseCommand):
    help = (
        "Import NAME from a JSONL FILE (one sample per line) as a new version of the set, or "
        "the starter sets with --starter."
    )

    def add_arguments(self, parser):
        parser.add_argument("name", nargs="?", help="The set's name, e.g. kb-smoke.")
        parser.add_argument("file", nargs="?", help="The JSONL file, or - for standard input.")
        parser.add_argument("--description", default="", help="What the set is for.")
        parser.add_argument(
            "--starter",
            action="store_true",
            help=f"Import every starter set in {STARTER_DIR.name}/ as starter-<category>.",
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="Validate and report; write nothing."
        )

    def handle(self, *args, **options):
        if options["starter"]:
            if options["name"] or options["file"]:
                raise CommandError("--starter takes no NAME or FILE")
            jobs = [(starter_name(path), path) for path in starter_files()]
        else:
            if not options["name"] or not options["file"]:
                raise CommandError("give NAME and FILE, or --starter")
            jobs = [(options["name"], options["file"])]
        try:
            with transaction.atomic():
                for name, path in jobs:
                    self._import(name, path, options["description"])
                if options["dry_run"]:
                    raise _DryRun
        except _DryRun:
            self.stdout.write(self.style.MIGRATE_HEADING("Dry run: nothing was written."))

    def _import(self, name: str, path, description: str) -> None:
        text = self._read(path)
        try:
            sample_set, created = import_sample_set(
                actor=None, name=name, jsonl=text, description=description
            )
        except ValidationError as error:
            for line in messages(error):
                self.stderr.write(f"{path}: {line.removeprefix('jsonl: ')}")
            raise CommandError(f"{path} was not imported; nothing was written.") from error
        count = sample_set.samples.count()
        if created:
            self.stdout.write(
                self.style.SUCCESS(f"Imported {sample_set} from {path}: {count} samples.")
            )
        else:
            self.stdout.write(f"{name} unchanged: {path} matches {sample_set} ({count} samples).")

    def _read(self, path) -> str:
        if str(path) == "-":
            return sys.stdin.read()
        try:
            return Path(path).read_text(encoding="utf-8-sig")
        except OSError as error:
            raise CommandError(f"cannot read {path}: {error.strerror or error}") from error
        except UnicodeDecodeError as error:
            raise CommandError(f"{path} is not UTF-8 text: {error}") from error
