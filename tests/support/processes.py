"""Start the project's real processes (web server, Celery worker) for tests."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def free_port() -> int:
    """A loopback port nothing listens on (the kernel's pick, released at once)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def database_url(settings_dict: dict) -> str:
    """The DATABASE_URL of a Django connection, for a child process to reach the same database."""
    user = quote(settings_dict.get("USER") or "")
    password = quote(settings_dict.get("PASSWORD") or "")
    auth = f"{user}:{password}@" if password else (f"{user}@" if user else "")
    host = settings_dict.get("HOST") or "127.0.0.1"
    port = settings_dict.get("PORT") or 5432
    return f"postgres://{auth}{host}:{port}/{settings_dict['NAME']}"


def child_env(**overrides: str | None) -> dict[str, str]:
    """This process's environment with overrides; None removes a variable."""
    env = dict(os.environ)
    for name, value in overrides.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


# What points a process at a server; without them it runs on the embedded defaults.
_SERVER_VARIABLES: dict[str, str | None] = dict.fromkeys(
    [
        "DATABASE_URL",
        "CELERY_BROKER_URL",
        "CELERY_RESULT_BACKEND",
        "SECRET_KEY",
        "AWS_STORAGE_BUCKET_NAME",
        "STATIC_MANIFEST",
    ]
)


def embedded_env(data_dir: Path, **overrides: str | None) -> dict[str, str]:
    """The environment of `make run`: SQLite, a filesystem broker, all under data_dir."""
    return child_env(
        **{**_SERVER_VARIABLES, "DEBUG": "true", "DATA_DIR": str(data_dir), **overrides}
    )


def run_manage(
    *args: str, env: dict[str, str], timeout: float = 900
) -> subprocess.CompletedProcess:
    # `timeout` only stops a command that hangs: a full `migrate` on SQLite took over
    # two minutes while four suites shared the machine's two cores.
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _stop(process: subprocess.Popen) -> str:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    output = process.stdout.read() if process.stdout else ""
    return output or ""


@contextlib.contextmanager
def web_server(env: dict[str, str], timeout: float = 180) -> Iterator[str]:
    """Run gunicorn on a free loopback port; yield its base URL once /healthz answers.

    `timeout` only bounds a server that never comes up: a busy machine may take
    many seconds to import Django, and each attempt waits for its answer.
    """
    port = free_port()
    process = subprocess.Popen(
        [
            str(BIN / "gunicorn"),
            "config.wsgi:application",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            "1",
            "--timeout",
            "60",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    try:
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"gunicorn exited early:\n{_stop(process)}")
            try:
                with urllib.request.urlopen(f"{base}/healthz", timeout=30):
                    break
            except OSError:  # refused while it binds, or a read that timed out
                if time.monotonic() > deadline:
                    raise RuntimeError(f"gunicorn did not answer:\n{_stop(process)}") from None
                time.sleep(0.05)
        yield base
    finally:
        _stop(process)


def http_get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


@contextlib.contextmanager
def celery_worker(
    env: dict[str, str], queue: str, pool: str = "solo", name: str | None = None
) -> Iterator[subprocess.Popen]:
    """A real Celery worker process consuming one queue; stopped with SIGTERM afterwards.

    ``name``: its node name (``name@host``; the queue's name by default): give each of
    several workers on one queue its own, so that each can be pinged.

    What it printed is `process.output` once the block has ended.
    """
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "config",
            "worker",
            "-P",
            pool,
            "-c",
            "1",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "-Q",
            queue,
            "-n",
            f"{name or queue}@%h",
            "--loglevel",
            "INFO",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        yield process
    finally:
        process.output = _stop(process)  # type: ignore[attr-defined]
