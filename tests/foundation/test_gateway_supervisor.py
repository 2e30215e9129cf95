"""docker/gateway/supervise.py, the gateway container's entrypoint, run for real.

The supervisor is run as compose runs it (its own process, a config file, a command
after ``--``) in front of a small stand-in that records each start with the sha256 of
the file it read, so each test reads what the supervisor did from what its child saw.
tests/releases/gateway/test_compose_gateway.py runs it in front of a real LiteLLM proxy.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SUPERVISE = ROOT / "docker" / "gateway" / "supervise.py"
WAIT_S = 30.0  # a hang guard on a busy machine, not a timing budget
V1, V2 = "version: 1\n", "version: 2\n"

# The stand-in proxy: records "start <sha256 of the config>" and, on SIGTERM, "stop".
CHILD = """
import hashlib, signal, sys, time
config, log, mode = sys.argv[1:4]
def record(line):
    with open(log, "a") as file:
        file.write(line + "\\n")
def stop(signum, frame):
    record("stop")
    sys.exit(0)
signal.signal(signal.SIGTERM, signal.SIG_IGN if mode == "stubborn" else stop)
record("start " + hashlib.sha256(open(config, "rb").read()).hexdigest())
if mode.startswith("exit"):
    sys.exit(int(mode[4:]))
while True:
    time.sleep(0.05)
"""


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.05)


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def replace(path: Path, text: str) -> None:
    """As render_gateway writes: beside the file, then renamed over it."""
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text)
    os.replace(partial, path)


class Run:
    def __init__(self, tmp_path: Path, mode: str = "serve", grace: float = 5) -> None:
        self.config = tmp_path / "gateway" / "config.yaml"
        self.config.parent.mkdir()
        self.log = tmp_path / "child.log"
        child = tmp_path / "child.py"
        child.write_text(CHILD)
        self.process = subprocess.Popen(
            [
                sys.executable,
                str(SUPERVISE),
                *("--config", str(self.config), "--interval", "0.1", "--grace", str(grace)),
                *("--", sys.executable, str(child), str(self.config), str(self.log), mode),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            # A group of its own, the proxy it starts included: the teardown ends both.
            start_new_session=True,
        )

    def lines(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []

    def starts(self) -> list[str]:
        return [line.split()[1] for line in self.lines() if line.startswith("start")]

    def finish(self) -> tuple[int, str]:
        status = self.process.wait(timeout=WAIT_S)
        assert self.process.stdout is not None
        return status, self.process.stdout.read()


@pytest.fixture
def run(tmp_path) -> Iterator[Callable[..., Run]]:
    runs: list[Run] = []

    def start(**options) -> Run:
        runs.append(Run(tmp_path, **options))
        return runs[-1]

    yield start
    for each in runs:
        # The whole group: killing only the supervisor would leave its proxy running.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(each.process.pid, signal.SIGKILL)
        each.process.wait()


def test_the_proxy_starts_once_gateway_sync_has_written_the_file(run):
    supervisor = run()
    time.sleep(0.5)
    assert supervisor.starts() == [], "started with no config"
    replace(supervisor.config, "model_list: []\n")

    wait_for(lambda: supervisor.starts() == [sha256("model_list: []\n")], "the first start")


def test_a_new_sha256_restarts_the_proxy_on_the_new_file_and_the_same_bytes_do_not(run):
    supervisor = run()
    replace(supervisor.config, V1)
    wait_for(lambda: len(supervisor.starts()) == 1, "the first start")

    replace(supervisor.config, V1)  # rewritten, same bytes: a new inode and mtime
    time.sleep(0.5)
    assert len(supervisor.starts()) == 1

    replace(supervisor.config, V2)
    wait_for(lambda: len(supervisor.starts()) == 2, "the restart")
    # The old proxy was stopped before the new one started, on the new file.
    assert supervisor.lines() == [f"start {sha256(V1)}", "stop", f"start {sha256(V2)}"]


def test_a_removed_file_keeps_the_proxy_running_on_what_it_read(run):
    supervisor = run()
    replace(supervisor.config, V1)
    wait_for(lambda: len(supervisor.starts()) == 1, "the first start")

    supervisor.config.unlink()
    time.sleep(0.5)

    assert supervisor.lines() == [f"start {sha256(V1)}"]
    assert supervisor.process.poll() is None


def test_sigterm_stops_the_proxy_and_then_the_supervisor(run):
    supervisor = run()
    replace(supervisor.config, V1)
    wait_for(lambda: len(supervisor.starts()) == 1, "the first start")

    supervisor.process.send_signal(signal.SIGTERM)
    status, output = supervisor.finish()

    assert status == 0
    assert supervisor.lines()[-1] == "stop"
    assert "supervise: stopping the proxy" in output


def test_a_proxy_that_ignores_sigterm_is_killed_after_the_grace_period(run):
    supervisor = run(mode="stubborn", grace=0.5)
    replace(supervisor.config, V1)
    wait_for(lambda: len(supervisor.starts()) == 1, "the first start")

    supervisor.process.send_signal(signal.SIGTERM)
    status, output = supervisor.finish()

    assert status == 0
    assert "did not stop within 0.5 s; killing it" in output


@pytest.mark.parametrize(("mode", "status"), [("exit3", 3), ("exit0", 1)])
def test_a_proxy_that_exits_ends_the_supervisor_with_a_failure(run, mode, status):
    """Compose's restart policy then starts the container again."""
    supervisor = run(mode=mode)
    replace(supervisor.config, V1)

    got, output = supervisor.finish()

    assert got == status
    assert f"the proxy exited with status {mode[4:]}" in output


def test_the_proxys_command_is_required(tmp_path):
    result = subprocess.run(
        [sys.executable, str(SUPERVISE), "--config", str(tmp_path / "config.yaml")],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        check=False,
    )
    assert result.returncode == 2
    assert "give the proxy's command after --" in result.stderr
