"""Write the LiteLLM proxy config the ledger renders now, for a proxy beside it.

    manage.py render_gateway --output /etc/litellm/config.yaml

The file is replaced only when its sha256 changes (written beside it, then renamed,
so the proxy never reads half a file), and the command says which: exit status 0
either way, the sha256 on the last line, so a loop can restart the proxy when it
changes. Without --output the config goes to standard output.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from releases.gateway import litellm
from releases.gateway.queries import gateway, whole_config_text


class Command(BaseCommand):
    help = "Render the LiteLLM proxy config of every live service, with the rollouts' weights."

    def add_arguments(self, parser):
        parser.add_argument(
            "--output", help="Write the config to this file (replaced only when it changes)."
        )

    def handle(self, *args, **options):
        found = gateway()
        text = whole_config_text(found.routes)
        sha256 = litellm.config_sha256(text)
        for slug in found.unrouted:
            self.stderr.write(f"{slug}: live, but no routed backend serves it; not routed.")
        if not options["output"]:
            self.stdout.write(text, ending="")
            return
        path = Path(options["output"])
        if path.is_file() and litellm.config_sha256(path.read_text()) == sha256:
            self.stdout.write(f"unchanged {path} {sha256}")
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(
                "w", dir=path.parent, prefix=f".{path.name}.", delete=False
            ) as partial:
                partial.write(text)
            os.replace(partial.name, path)
        except OSError as exc:
            raise CommandError(f"--output {path}: {exc.strerror or exc}") from exc
        self.stdout.write(f"written {path} {sha256}")
