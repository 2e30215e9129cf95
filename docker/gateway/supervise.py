"""Run the LiteLLM proxy on its config file, and restart it when the file's sha256 changes.

    python3 supervise.py --config /gateway/config.yaml -- litellm --config /gateway/config.yaml ...

The gateway service of docker-compose.yml runs this as its entrypoint, inside the
LiteLLM image (standard library only: that image has no packages of ours). The
gateway-sync service writes the file (``manage.py render_gateway --output``, replaced
whole, by a rename, only when its sha256 changes); this process notices the new
sha256 and restarts the proxy on it.

Why a restart, and why here: a proxy without its own database does not re-read its
config file (its periodic reload reads the database: ``check_periodic_reloads`` in
``litellm/proxy/proxy_server.py``), and the one file watcher it has, ``litellm
--reload``, is uvicorn's development reloader (its help says "dev only"; it also
watches every ``*.py`` of the working folder). Restarting from the sync container
would need the Docker socket there, which is root on the host; a supervisor beside the
proxy needs nothing but the shared volume. The cost is the proxy's start (13 to 40 s
measured) with no gateway answering, once per change of the config.

Standard output says what happened (``supervise: ...``). The proxy's own exit ends this
process with the proxy's status, so Compose's restart policy starts both again; a
SIGTERM or SIGINT is passed on to the proxy, which gets ``--grace`` seconds to stop.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import signal
import subprocess
import sys
import time

TICK_S = 0.1  # how often the loop looks at the stop flag between checks of the file


def file_sha256(path: str) -> str | None:
    """The sha256 of the file's bytes, or None while there is no file."""
    try:
        with open(path, "rb") as file:
            return hashlib.sha256(file.read()).hexdigest()
    except FileNotFoundError:
        return None


def say(message: str) -> None:
    print(f"supervise: {message}", flush=True)


class Supervisor:
    def __init__(self, config: str, command: list[str], interval: float, grace: float) -> None:
        self.config = config
        self.command = command
        self.interval = interval
        self.grace = grace
        self.stopping = False
        self.child: subprocess.Popen | None = None
        self.running_sha: str | None = None

    def request_stop(self, signum: int, _frame: object) -> None:
        self.stopping = True

    def pause(self, seconds: float) -> None:
        """Sleep, but wake at once when a stop was asked for."""
        deadline = time.monotonic() + seconds
        while not self.stopping and time.monotonic() < deadline:
            time.sleep(min(TICK_S, max(0.0, deadline - time.monotonic())))

    def start(self, sha256: str) -> None:
        say(f"starting the proxy on {self.config} sha256 {sha256}")
        self.running_sha = sha256
        # The command is the compose file's, not input from a request.
        self.child = subprocess.Popen(self.command)  # noqa: S603

    def stop_child(self) -> int:
        child, self.child = self.child, None
        if child is None:
            return 0
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
            try:
                child.wait(timeout=self.grace)
            except subprocess.TimeoutExpired:
                say(f"the proxy did not stop within {self.grace:g} s; killing it")
                child.kill()
                child.wait()
        return child.returncode

    def run(self) -> int:
        sha256 = file_sha256(self.config)
        if sha256 is None:
            say(f"waiting for {self.config} (written by gateway-sync)")
        while sha256 is None:
            self.pause(self.interval)
            if self.stopping:
                return 0
            sha256 = file_sha256(self.config)
        self.start(sha256)
        while True:
            self.pause(self.interval)
            if self.stopping:
                say("stopping the proxy")
                self.stop_child()
                return 0
            assert self.child is not None
            status = self.child.poll()
            if status is not None:
                say(f"the proxy exited with status {status}")
                # A proxy that ends on its own has failed, even with status 0.
                return status or 1
            sha256 = file_sha256(self.config)
            # A missing file (someone removed it) keeps the proxy on what it read.
            if sha256 is not None and sha256 != self.running_sha:
                say(f"{self.config} changed: sha256 {self.running_sha} -> {sha256}; restarting")
                self.stop_child()
                self.start(sha256)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True, help="The file to watch.")
    parser.add_argument(
        "--interval",
        type=float,
        default=float(os.environ.get("GATEWAY_WATCH_INTERVAL", "5")),
        help="Seconds between two looks at the file (GATEWAY_WATCH_INTERVAL, default 5).",
    )
    parser.add_argument("--grace", type=float, default=30.0, help="Seconds the proxy gets to stop.")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the proxy's command.")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the proxy's command after --")
    supervisor = Supervisor(args.config, command, args.interval, args.grace)
    signal.signal(signal.SIGTERM, supervisor.request_stop)
    signal.signal(signal.SIGINT, supervisor.request_stop)
    return supervisor.run()


if __name__ == "__main__":
    sys.exit(main())
