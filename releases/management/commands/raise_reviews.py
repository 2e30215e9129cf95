"""Run the daily review sweep once, now, and say what it raised.

The beat task `raise_reviews` runs the same sweep every day; this is for a first run on
a new installation, after changing a threshold, or to see what the sweep would do
(`--dry-run` judges every service and writes nothing).
"""

from __future__ import annotations

from django.core.management.base import BaseCommand

from releases.reviews.services.periodic_reviews import SWEEP_BATCH, sweep_reviews


class Command(BaseCommand):
    help = (
        "Mark reviews past due overdue and raise a review of each service whose cadence is "
        "due or that drifted; print what was raised."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--dry-run", action="store_true", help="Judge every service; write nothing."
        )
        parser.add_argument(
            "--batch-size",
            type=int,
            default=SWEEP_BATCH,
            help=f"Services read per batch (default {SWEEP_BATCH}).",
        )

    def handle(self, *args, **options):
        dry_run = options["dry_run"]
        report = sweep_reviews(dry_run=dry_run, batch_size=max(1, options["batch_size"]))
        if report.skipped:
            self.stdout.write(self.style.WARNING("Another sweep is running; nothing done."))
            return
        would = "would be " if dry_run else ""
        for review_pk, slug, due_on in report.overdue:
            self.stdout.write(
                self.style.WARNING(
                    f"review #{review_pk} of {slug} {would}marked overdue (due {due_on:%Y-%m-%d})"
                )
            )
        for raised in report.raised:
            where = f"review #{raised.review}" if raised.review else "a review"
            verb = "raised" if raised.new else "added to"
            self.stdout.write(f"{raised.service}: {where} {would}{verb}")
            for finding in raised.findings:
                self.stdout.write(f"  {finding.kind}: {finding.summary}")
        new = sum(1 for raised in report.raised if raised.new)
        added = len(report.raised) - new
        self.stdout.write(
            self.style.SUCCESS(
                f"{report.scanned} services judged in {report.batches} batches: "
                f"{new} review{_s(new)} {would}raised, {added} {would}added to, "
                f"{len(report.overdue)} {would}marked overdue."
            )
        )


def _s(count: int) -> str:
    return "" if count == 1 else "s"
