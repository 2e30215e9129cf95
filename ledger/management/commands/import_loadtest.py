"""Attach a load-test report to a revision from the command line.

For people and scripts with shell access instead of an API token: the same
verb as the upload form and the API (`services.import_loadtest_report`, run as
the system), the same checks, and the parsed summary printed as JSON. A bad
file exits non-zero with the error naming the file and the line or JSON path;
so does a file that measured another model, engine or GPU than the revision
(naming both sides), unless `--accept-mismatch "REASON"` records why it belongs
there anyway. `--metrics-before` and `--metrics-after` are two scrapes of the engine
(or its DCGM exporter) taken around the test, read for the GPU memory and KV-cache
peaks the file itself does not record.
"""

from __future__ import annotations

import json
from contextlib import ExitStack
from pathlib import Path
from typing import IO

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from ledger import queries, services
from ledger.importers import FORMATS
from ledger.models import LoadTestReport, Revision
from ledger.serializers import LoadTestReportDetailSerializer


def _messages(exc: ValidationError) -> str:
    if hasattr(exc, "error_dict"):
        return "; ".join(
            f"{field}: {message}"
            for field, errors in exc.message_dict.items()
            for message in errors
        )
    return "; ".join(exc.messages)


def _open(path: Path) -> IO[bytes]:
    try:
        return path.open("rb")
    except OSError as exc:
        raise CommandError(f"{path}: cannot be read: {exc.strerror}") from exc


class Command(BaseCommand):
    help = (
        "Import a load-test report FILE (vLLM, SGLang, GuideLLM, AIPerf, GenAI-Perf, "
        "inference-perf or the generic per-request format) as evidence for one workload "
        "class of a revision, and print the parsed summary as JSON."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", metavar="FILE", help="The report as the tool wrote it.")
        parser.add_argument("--revision", type=int, required=True, help="Revision id.")
        parser.add_argument(
            "--workload",
            required=True,
            choices=LoadTestReport.Workload.values,
            help="Workload class the file measured.",
        )
        parser.add_argument(
            "--format",
            choices=list(FORMATS),
            help="Force an importer instead of detecting the format from the content.",
        )
        parser.add_argument(
            "--accept-mismatch",
            metavar="REASON",
            default="",
            help="Attach the file although it measured another model, engine or GPU than "
            "the revision, recording REASON; the report is marked mismatched.",
        )
        parser.add_argument(
            "--metrics-before",
            metavar="BEFORE.txt",
            help="A scrape (Prometheus text) of the engine's or DCGM's /metrics taken "
            "before the test; with --metrics-after, read for GPU memory and KV-cache peaks.",
        )
        parser.add_argument(
            "--metrics-after",
            metavar="AFTER.txt",
            help="The same scrape taken after the test.",
        )
        parser.add_argument(
            "--dry-run",
            action="store_true",
            help="Parse and print the summary without storing or recording anything.",
        )

    def handle(self, *args, **options):
        path = Path(options["file"])
        try:
            revision = Revision.objects.select_related("service", "runtime", "model_asset").get(
                pk=options["revision"]
            )
        except Revision.DoesNotExist:
            raise CommandError(f"There is no revision with id {options['revision']}.") from None
        with ExitStack() as stack:
            stream = stack.enter_context(_open(path))
            before, after = (
                stack.enter_context(_open(Path(name))) if name else None
                for name in (options["metrics_before"], options["metrics_after"])
            )
            try:
                if options["dry_run"]:
                    preview = services.preview_loadtest_report(
                        stream,
                        filename=path.name,
                        format=options["format"],
                        metrics_before=before,
                        metrics_after=after,
                    )
                    match = queries.match_evidence(revision, preview["meta"])
                    self._print(
                        {
                            "dry_run": True,
                            "created": False,
                            "report": preview,
                            "mismatch": match.differences or None,
                        }
                    )
                    return
                report, created = services.import_loadtest_report(
                    revision,
                    actor=None,
                    workload=options["workload"],
                    file=stream,
                    filename=path.name,
                    format=options["format"],
                    accept_mismatch=options["accept_mismatch"],
                    metrics_before=before,
                    metrics_after=after,
                )
            except ValidationError as exc:
                raise CommandError(_messages(exc)) from exc
        report = LoadTestReport.objects.with_context().get(pk=report.pk)
        data = LoadTestReportDetailSerializer(report, context={"now": timezone.now()}).data
        self._print({"dry_run": False, "created": created, "report": data})
        if created:
            self.stderr.write(self.style.SUCCESS(f"Imported {path.name} as report {report.pk}."))
        else:
            self.stderr.write(
                self.style.WARNING(
                    f"{path.name} was already imported for this revision: report {report.pk}."
                )
            )

    def _print(self, data) -> None:
        self.stdout.write(json.dumps(data, indent=2, ensure_ascii=False))
