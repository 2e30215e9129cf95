"""A real S3-compatible server on loopback (moto's server mode) for storage tests."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from tests.support.processes import free_port

MOTO_SERVER = Path(sys.executable).parent / "moto_server"


@contextlib.contextmanager
def moto_s3_server() -> Iterator[str]:
    """Start moto_server on a free port; yield its endpoint URL once it answers."""
    port = free_port()
    process = subprocess.Popen(
        [str(MOTO_SERVER), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1).close()
                break
            except (urllib.error.URLError, ConnectionError):
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("moto_server did not start") from None
                time.sleep(0.05)
        yield endpoint
    finally:
        process.terminate()
        process.wait(timeout=10)
