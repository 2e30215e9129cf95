"""Recompute the whole event chain and say whether anything was altered or cut off.

Exit status 0 with the count and head hash when every event matches, carries
the application's signature, and the chain still reaches the newest signed
checkpoint; exit 1 naming the first event whose hash, link or signature does
not match, or the events missing since the checkpoint. Run it from cron or before an audit export.
"""

from __future__ import annotations

import sys

from django.core.management.base import BaseCommand

from ledger.checkpoints import verify_ledger


class Command(BaseCommand):
    help = (
        "Verify the tamper-evident event chain against its newest checkpoint; exit 1 naming "
        "the first bad or missing event."
    )

    def handle(self, *args, **options):
        report = verify_ledger()
        chain, checkpoint = report.chain, report.checkpoint
        if not chain.ok:
            self.stderr.write(
                self.style.ERROR(
                    f"ledger broken at event #{chain.first_bad_sequence}: {chain.problem}. "
                    f"{chain.count} events before it verify; last good hash {chain.head_hash}"
                )
            )
        if not checkpoint.ok:
            self.stderr.write(self.style.ERROR(f"ledger cut short: {checkpoint.problem}"))
        if not report.ok:
            sys.exit(1)
        self.stdout.write(
            self.style.SUCCESS(f"ledger intact: {chain.count} events, head {chain.head_hash}")
        )
        if chain.signatures_from > 1:
            self.stdout.write(
                f"signatures checked from #{chain.signatures_from}; those before were checked "
                "when the newest checkpoint was taken"
            )
        if checkpoint.checkpoint is None:
            self.stdout.write(
                "no checkpoint yet: take one with manage.py checkpoint_ledger (beat does hourly)"
            )
        else:
            cp = checkpoint.checkpoint
            self.stdout.write(
                f"reaches the newest checkpoint: #{cp.sequence} of {cp.taken_at:%Y-%m-%d %H:%M:%S %Z}"
                f" (key {cp.key_id[:16]}…)"
            )
