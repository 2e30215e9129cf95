"""Recompute the whole event chain and say whether anything was altered.

Exit status 0 with the count and head hash when every event matches; exit 1
naming the first event whose hash or link does not match. Run it from cron
or before an audit export.
"""

from __future__ import annotations

import sys

from django.core.management.base import BaseCommand

from ledger.chain import verify_chain


class Command(BaseCommand):
    help = "Verify the tamper-evident event chain; exit 1 naming the first bad event."

    def handle(self, *args, **options):
        report = verify_chain()
        if report.ok:
            self.stdout.write(
                self.style.SUCCESS(f"ledger intact: {report.count} events, head {report.head_hash}")
            )
            return
        self.stderr.write(
            self.style.ERROR(
                f"ledger broken at event #{report.first_bad_sequence}: {report.problem}. "
                f"{report.count} events before it verify; last good hash {report.head_hash}"
            )
        )
        sys.exit(1)
