"""Print the ledger's public signing key, so an auditor can pin it out of band."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from ledger import signing


class Command(BaseCommand):
    help = (
        "Print the ledger's Ed25519 public key (PEM) on stdout and its fingerprint on "
        "stderr; --with-retired adds the keys a rotation retired."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--with-retired",
            action="store_true",
            help="Also print the retired keys (LEDGER_RETIRED_PUBLIC_KEYS), which older "
            "events and bundles are signed with.",
        )

    def handle(self, *args, with_retired: bool, **options):
        self.stderr.write(f"fingerprint {signing.public_key().keyid}")
        self.stdout.write(signing.public_key_pem(), ending="")
        if with_retired:
            for key_id, pem in signing.retired_keys_pem():
                self.stderr.write(f"retired key, fingerprint {key_id}")
                self.stdout.write(pem, ending="")
