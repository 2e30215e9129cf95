"""Write a sample set version as JSON Lines, to keep it in version control or edit it.

One sample per line in key order, defaults left out: importing the file again
changes nothing, and a diff of two exports shows what changed between versions.
"""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from replay.management.commands._common import sample_set_arg
from replay.services import export_sample_set


class Command(BaseCommand):
    help = "Export a sample set (NAME for its latest version, or NAME@VERSION) as JSONL."

    def add_arguments(self, parser):
        parser.add_argument("sample_set", metavar="NAME[@VERSION]")
        parser.add_argument(
            "--output", "-o", metavar="FILE", help="Write to FILE (default: standard output)."
        )

    def handle(self, *args, **options):
        sample_set = sample_set_arg(options["sample_set"])
        text = export_sample_set(sample_set)
        output = options["output"]
        if not output:
            self.stdout.write(text, ending="")
            return
        try:
            Path(output).write_text(text, encoding="utf-8")
        except OSError as error:
            raise CommandError(f"cannot write {output}: {error.strerror or error}") from error
        count = text.count("\n")
        self.stdout.write(self.style.SUCCESS(f"Wrote {sample_set} to {output}: {count} samples."))
