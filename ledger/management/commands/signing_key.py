"""Print the ledger's public signing key, so an auditor can pin it out of band."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from ledger import signing


class Command(BaseCommand):
    help = "Print the ledger's Ed25519 public key (PEM) and its key id."

    def handle(self, *args, **options):
        self.stderr.write(f"key id {signing.public_key().keyid}")
        self.stdout.write(signing.public_key_pem(), ending="")
