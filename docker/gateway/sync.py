"""Keep the gateway's config current from the ledger (the gateway-sync service).

    python docker/gateway/sync.py        # in the app's image, from /app

Every GATEWAY_SYNC_INTERVAL seconds (default 15) this runs ``render_gateway --output
GATEWAY_CONFIG`` (default /gateway/config.yaml), the volume the gateway reads.
render_gateway replaces the file only when its sha256 changes (written beside it, then
renamed, so a reader never sees half a file) and says ``written|unchanged PATH SHA256``.
Nothing here signals the gateway: its supervisor (docker/gateway/supervise.py) sees the
new sha256 and restarts the proxy.

One process for the whole loop, not ``manage.py render_gateway`` again each time:
starting Django took 17 s, 6 s of it CPU, on a busy 2-core machine: every 15 s, that
would keep a core busy. A render itself is a few queries. The database connection
is closed after each render, so a restarted PostgreSQL costs one failed render, and a
failed render keeps the last file: the gateway goes on routing as it did.
"""

from __future__ import annotations

import io
import os
import sys
import time
from pathlib import Path

# Run as a script, Python puts this folder on the path, not the project's.
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def render_once(output: str) -> str:
    """render_gateway's line (``written|unchanged PATH SHA256``)."""
    from django.core.management import call_command
    from django.db import connections

    out = io.StringIO()
    try:
        call_command("render_gateway", output=output, stdout=out)
    finally:
        connections.close_all()
    return out.getvalue().strip()


def main() -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    output = os.environ.get("GATEWAY_CONFIG", "/gateway/config.yaml")
    interval = float(os.environ.get("GATEWAY_SYNC_INTERVAL", "15"))
    while True:
        try:
            result = render_once(output)
        except Exception as exc:  # the database restarting, a full disk: try again next time
            print(
                f"gateway-sync: render_gateway failed ({type(exc).__name__}: {exc}); "
                "the gateway keeps the last config",
                file=sys.stderr,
                flush=True,
            )
        else:
            if result.startswith("written"):
                # The file holds no credential (only os.environ/NAME), and the proxy may
                # run as another user than this one: let every user read it.
                os.chmod(output, 0o644)
                print(f"gateway-sync: {result}", flush=True)
        time.sleep(interval)


if __name__ == "__main__":
    sys.exit(main())
