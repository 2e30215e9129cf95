"""Record the chain head now, signed, outside the database (see ledger/checkpoints.py).

Beat does this every LEDGER_CHECKPOINT_EVERY_MINUTES; run it by hand before
maintenance on the database, or after restoring a backup.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand

from ledger.checkpoints import take_checkpoint


class Command(BaseCommand):
    help = "Take a signed checkpoint of the event chain's head and store it outside the database."

    def add_arguments(self, parser):
        parser.add_argument("--reason", default="manage.py checkpoint_ledger")

    def handle(self, *args, **options):
        checkpoint = take_checkpoint(reason=options["reason"])
        self.stdout.write(
            self.style.SUCCESS(
                f"checkpoint of #{checkpoint.sequence} ({checkpoint.hash}) stored as "
                f"{checkpoint.name}, signed by key {checkpoint.key_id}"
            )
        )
