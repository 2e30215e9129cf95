"""Write the registry as a YAML document in the format `apply` reads.

Deterministic (sorted, defaults left out), so the export can live in git and
diff cleanly: export → apply on an empty database → export gives the same
bytes, and applying an export to the database it came from changes nothing.
"""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from ledger.declarative import dump_document, export_document


class Command(BaseCommand):
    help = "Export teams, licenses, model assets, runtimes and services as a registry document."

    def add_arguments(self, parser):
        parser.add_argument(
            "--output",
            "-o",
            metavar="FILE",
            help="Write the document to this file (default: standard output).",
        )

    def handle(self, *args, **options):
        document = export_document()
        text = dump_document(document)
        output = options["output"]
        if not output:
            self.stdout.write(text, ending="")
            return
        try:
            Path(output).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise CommandError(f"cannot write {output}: {exc.strerror or exc}") from exc
        counts = ", ".join(
            f"{len(document.get(key, []))} {key.replace('_', ' ')}"
            for key in ("teams", "licenses", "model_assets", "runtimes", "services")
        )
        self.stdout.write(self.style.SUCCESS(f"Wrote {output}: {counts}."))
