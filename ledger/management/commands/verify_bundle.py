"""Check an evidence bundle as an auditor would: the same code as scripts/verify_bundle.py,
which runs without Django."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError


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
    help = "Verify an evidence bundle: signature, file digests, chain segment, chain head."

    def add_arguments(self, parser):
        parser.add_argument("bundle")
        parser.add_argument("--key", help="The pinned public key (PEM).")

    def handle(self, *args, bundle: str, key: str | None, **options):
        check = verifier()
        try:
            summary = check.verify(Path(bundle), Path(key).read_bytes() if key else None)
        except (check.Mismatch, check.Unreadable, OSError) as error:
            raise CommandError(f"NOT VERIFIED: {error}") from None
        self.stdout.write(self.style.SUCCESS(summary))
