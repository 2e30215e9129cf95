"""A real Prometheus on loopback for tests: Debian's /usr/bin/prometheus (`make prometheus`).

``PrometheusServer(folder, targets=["127.0.0.1:8001", ...])`` writes a prometheus.yml
that scrapes each target's /metrics every ``scrape_interval`` (job ``engines``), starts
Prometheus on a free loopback port (never 9090, where a packaged service may listen)
with its TSDB in ``folder``, and waits for ``/-/ready``. Tests ask it what it scraped
through its HTTP API: ``query(promql)`` and ``wait_for(promql, predicate)``, which polls
until Prometheus itself reports what the test waits for (no sleeps).

``stop()`` ends it (a test can take Prometheus away mid-stage); ``start()`` brings it
back on the same port and the same data, as a restarted server would. The process
runs in a session of its own and is killed with its group at exit, whatever happens.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tests.support.processes import free_port

PROMETHEUS = Path(os.environ.get("PROMETHEUS_BIN", "/usr/bin/prometheus"))
# Hang guards, not timing budgets: a busy shared machine can take long to start it.
START_GUARD_S = 120.0
STOP_GUARD_S = 30.0
_LIVE: set[PrometheusServer] = set()


class PrometheusUnavailable(ConnectionError):
    """The query API did not answer (Prometheus is stopped, or not yet listening)."""


class PrometheusServer:
    """One Prometheus process scraping ``targets``; see the module docstring."""

    def __init__(
        self,
        folder: Path,
        targets: Sequence[str],
        scrape_interval: str = "1s",
        evaluation_interval: str = "1s",
    ) -> None:
        if not PROMETHEUS.exists():
            raise RuntimeError(f"{PROMETHEUS} is missing: run `make prometheus`")
        self.folder = Path(folder)
        self.targets = list(targets)
        self.scrape_interval = scrape_interval
        self.evaluation_interval = evaluation_interval
        self.config_path = self.folder / "prometheus.yml"
        self.data_path = self.folder / "data"
        self.log_path = self.folder / "prometheus.log"
        self.port = free_port()
        self.process: subprocess.Popen | None = None
        self.starts: list[float] = []  # seconds each start took to answer /-/ready

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def config_text(self) -> str:
        # JSON is YAML: no YAML writer needed, and the file reads back exactly.
        config = {
            "global": {
                "scrape_interval": self.scrape_interval,
                "scrape_timeout": self.scrape_interval,
                "evaluation_interval": self.evaluation_interval,
            },
            "scrape_configs": [
                {
                    "job_name": "engines",
                    "metrics_path": "/metrics",
                    "static_configs": [{"targets": self.targets}],
                }
            ],
        }
        return json.dumps(config, indent=2) + "\n"

    # -- the process ----------------------------------------------------------------
    def start(self) -> PrometheusServer:
        """Start it (again) and return once /-/ready answers 200."""
        if self.running:
            return self
        self.folder.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(self.config_text())
        begun = time.monotonic()
        self._spawn()
        deadline = begun + START_GUARD_S
        while True:
            process = self.process
            assert process is not None
            if process.poll() is not None:
                log = self.log_tail()
                if "address already in use" in log and time.monotonic() < deadline:
                    # Someone took the port while it was stopped: take another.
                    self.port = free_port()
                    self._spawn()
                    continue
                self.process = None
                _LIVE.discard(self)
                raise RuntimeError(f"prometheus exited with {process.returncode}:\n{log}")
            if self._ready():
                break
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(
                    f"prometheus was not ready in {START_GUARD_S} s:\n{self.log_tail()}"
                )
            time.sleep(0.1)
        self.starts.append(time.monotonic() - begun)
        return self

    def _spawn(self) -> None:
        with self.log_path.open("a") as log:
            log.write(f"\n===== prometheus on 127.0.0.1:{self.port}\n")
            log.flush()
            self.process = subprocess.Popen(
                [
                    str(PROMETHEUS),
                    f"--config.file={self.config_path}",
                    f"--storage.tsdb.path={self.data_path}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--web.enable-lifecycle",
                ],
                cwd=self.folder,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                # Its own process group: stop() and the exit hook end the group.
                start_new_session=True,
            )
        _LIVE.add(self)

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=10) as response:
                return response.status == 200
        except (urllib.error.URLError, OSError):
            return False  # refused while it binds; 503 while it replays its WAL

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        """End it (SIGTERM to its group, SIGKILL after STOP_GUARD_S); the data stays."""
        process, self.process = self.process, None
        _LIVE.discard(self)
        if process is None:
            return
        _signal_group(process, signal.SIGTERM)
        try:
            process.wait(timeout=STOP_GUARD_S)
        except subprocess.TimeoutExpired:
            _signal_group(process, signal.SIGKILL)
            process.wait()

    def __enter__(self) -> PrometheusServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def log_tail(self, lines: int = 60) -> str:
        if not self.log_path.exists():
            return "(no log)"
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    # -- the HTTP API ---------------------------------------------------------------
    def query(self, promql: str, *, at: float | None = None) -> list[dict[str, Any]]:
        """The ``data.result`` of an instant query (a vector: ``[{"metric", "value"}]``).

        Raises ``PrometheusUnavailable`` when nothing answers, ``RuntimeError`` with
        Prometheus' own words when it refuses the query (bad PromQL).
        """
        params = {"query": promql}
        if at is not None:
            params["time"] = f"{at:.3f}"
        url = f"{self.url}/api/v1/query?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=30) as response:
                answer = json.load(response)
        except urllib.error.HTTPError as error:  # 400/422/503 carry a JSON error
            body = error.read().decode(errors="replace")
            raise RuntimeError(f"prometheus refused {promql!r}: {error.code} {body}") from None
        except (urllib.error.URLError, OSError) as error:
            raise PrometheusUnavailable(f"{self.url}: {error}") from error
        if answer.get("status") != "success":
            raise RuntimeError(f"prometheus refused {promql!r}: {answer}")
        return answer["data"]["result"]

    def values(self, promql: str, label: str) -> dict[str, float]:
        """An instant vector as {value of ``label``: number}, e.g. by ``model_name``."""
        return {
            sample["metric"].get(label, ""): float(sample["value"][1])
            for sample in self.query(promql)
        }

    def wait_for(
        self,
        promql: str,
        predicate: Callable[[list[dict[str, Any]]], bool],
        timeout: float = 90.0,
        interval: float = 0.25,
    ) -> list[dict[str, Any]]:
        """Poll ``query(promql)`` until ``predicate(result)`` holds; return that result.

        ``timeout`` is a hang guard: a test waits on what Prometheus reports, and a
        busy machine only makes it take longer. On timeout the assertion shows the
        last answer and the log's tail.
        """
        deadline = time.monotonic() + timeout
        last: Any = None
        while True:
            try:
                last = self.query(promql)
                if predicate(last):
                    return last
            except PrometheusUnavailable as error:
                last = error
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"after {timeout} s, {promql!r} still answers {last!r}\n{self.log_tail(20)}"
                )
            time.sleep(interval)

    def targets_health(self) -> dict[str, str]:
        """Each scrape target's health as Prometheus reports it (``/api/v1/targets``)."""
        with urllib.request.urlopen(f"{self.url}/api/v1/targets", timeout=30) as response:
            active = json.load(response)["data"]["activeTargets"]
        return {target["labels"]["instance"]: target["health"] for target in active}


def _signal_group(process: subprocess.Popen, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, sig)


@atexit.register
def _kill_strays() -> None:
    """A session that ends without its fixtures' finalizers still leaves no Prometheus."""
    for server in list(_LIVE):
        if server.process is not None:
            _signal_group(server.process, signal.SIGKILL)
