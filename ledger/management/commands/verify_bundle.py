"""Check an evidence bundle as an auditor would: the same code as scripts/verify_bundle.py,
which runs without Django."""

from __future__ import annotations

import importlib.util
import sys
import zipfile
from pathlib import Path
from types import ModuleType

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from ledger import signing


def verifier() -> ModuleType:
    if (loaded := sys.modules.get("verify_bundle")) is not None:
        return loaded
    path = Path(settings.BASE_DIR) / "scripts" / "verify_bundle.py"
    spec = importlib.util.spec_from_file_location("verify_bundle", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # Registered before it runs, as an import would: its dataclasses look themselves up.
    sys.modules["verify_bundle"] = module
    spec.loader.exec_module(module)
    return module


class Command(BaseCommand):
    help = (
        "Verify an evidence bundle: the zip's entries, signature, file digests, chain "
        "segment and each event's signature, chain head. Without --key, against this "
        "ledger's own keys (the signing key and the retired ones), never the bundle's."
    )

    def add_arguments(self, parser):
        parser.add_argument("bundle")
        parser.add_argument(
            "--key",
            action="append",
            help="A pinned public key (PEM); repeat it for retired keys. Default: this "
            "ledger's keys.",
        )

    def handle(self, *args, bundle: str, key: list[str] | None, **options):
        check = verifier()
        try:
            keys = (
                [Path(path).read_bytes() for path in key]
                if key
                else [signing.trusted_keys_pem().encode()]
            )
            summary = check.verify(Path(bundle), keys)
        except (check.Mismatch, check.Unreadable, OSError, zipfile.BadZipFile) as error:
            raise CommandError(f"NOT VERIFIED: {error}") from None
        self.stdout.write(self.style.SUCCESS(summary))
