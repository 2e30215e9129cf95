"""The gateway of docker-compose.yml, run as compose runs it, without Docker (it does not
run on the project's machines): docker/gateway/sync.py renders the config from the
ledger's database into a folder, and docker/gateway/supervise.py runs a real LiteLLM
proxy on that file and restarts it when the file changes. What compose adds around them
(the images, the shared volume, the environment) is checked as text in
tests/foundation/test_compose.py.

The database is shared with the sync loop, a process of its own, so these tests commit
(``transaction=True``).
"""

from __future__ import annotations

import contextlib
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml
from django.db import connection

from releases.gateway import litellm
from releases.gateway.queries import gateway
from replay.models import Backend
from tests.releases.factories import roll_out
from tests.support.litellm_proxy import GATEWAY_VENV, _env, gateway_python
from tests.support.processes import ROOT, child_env, database_url, free_port

pytestmark = pytest.mark.django_db(transaction=True)

SYNC = ROOT / "docker" / "gateway" / "sync.py"
SUPERVISE = ROOT / "docker" / "gateway" / "supervise.py"
WAIT_S = 120.0  # hang guards on a busy machine, not timing budgets
PROXY_START_GUARD_S = 300.0  # the proxy took 13 s here idle, 30 to 40 s on a busy 2-core machine


def _rendered() -> str:
    return litellm.render_yaml(litellm.render_config(gateway().routes))


def _tail(path: Path, lines: int = 60) -> str:
    if not path.exists():
        return f"({path.name}: nothing written)"
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


class SyncLoop:
    """docker/gateway/sync.py against the test database, its output in files."""

    def __init__(self, folder: Path, config: Path, database: str, interval: str = "0.3") -> None:
        self.stdout = folder / "sync.out"
        self.stderr = folder / "sync.err"
        env = child_env(
            DATABASE_URL=database,
            GATEWAY_CONFIG=str(config),
            GATEWAY_SYNC_INTERVAL=interval,
        )
        with self.stdout.open("w") as out, self.stderr.open("w") as err:
            self.process = subprocess.Popen(
                [sys.executable, str(SYNC)], cwd=ROOT, env=env, stdout=out, stderr=err
            )

    def written(self) -> list[tuple[str, str]]:
        """(path, sha256) of each `written` line so far."""
        return re.findall(
            r"^gateway-sync: written (\S+) ([0-9a-f]{64})$", self.stdout.read_text(), re.M
        )

    def wait_for(self, condition, what: str) -> None:
        deadline = time.monotonic() + WAIT_S
        while not condition():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(
                    f"gave up waiting for {what}:\n{_tail(self.stdout)}\n{_tail(self.stderr)}"
                )
            time.sleep(0.1)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=30)


@pytest.fixture
def sync_loop(tmp_path) -> Iterator:
    loops: list[SyncLoop] = []

    def start(config: Path, database: str | None = None, **options) -> SyncLoop:
        database = database or database_url(connection.settings_dict)
        loops.append(SyncLoop(tmp_path, config, database, **options))
        return loops[-1]

    yield start
    for loop in loops:
        loop.stop()


def test_a_failed_render_keeps_the_last_config_and_the_loop_goes_on(tmp_path, sync_loop):
    config = tmp_path / "gateway" / "config.yaml"
    config.parent.mkdir()
    config.write_text("model_list: []\n")
    settings = connection.settings_dict
    unreachable = database_url({**settings, "NAME": f"{settings['NAME']}_missing"})

    loop = sync_loop(config, database=unreachable)
    loop.wait_for(
        lambda: loop.stderr.read_text().count("render_gateway failed") >= 2, "two failed renders"
    )

    assert re.search(
        r"^gateway-sync: render_gateway failed \(OperationalError: .*\); "
        r"the gateway keeps the last config$",
        loop.stderr.read_text(),
        re.M,
    )
    assert config.read_text() == "model_list: []\n"
    assert loop.written() == []


def _deployment_ids(base_url: str, master_key: str) -> list[str] | None:
    """The deployments the running proxy holds (its /model/info), or None while it is down."""
    try:
        response = httpx.get(
            f"{base_url}/model/info",
            headers={"Authorization": f"Bearer {master_key}"},
            timeout=30,
        )
    except httpx.TransportError:
        return None
    if response.status_code != 200:
        return None
    return sorted(entry["model_info"]["id"] for entry in response.json()["data"])


def _expected_ids() -> list[str]:
    return sorted(entry["model_info"]["id"] for entry in yaml.safe_load(_rendered())["model_list"])


def _weights(config: Path) -> dict[str, int]:
    """Backend name -> the weight the file gives it."""
    names = dict(Backend.objects.values_list("pk", "name"))
    return {
        names[int(entry["model_info"]["id"].rsplit("-", 1)[1])]: entry["litellm_params"]["weight"]
        for entry in yaml.safe_load(config.read_text())["model_list"]
    }


def test_a_rollout_reaches_a_real_proxy_through_sync_and_the_supervisor(
    world, release, owner, signers, fake_backends, tmp_path, sync_loop
):
    """One test for the chain, as it is slow (a proxy start is 13 to 40 s, twice): what
    sync writes, when it writes again, and what the proxy then holds and serves."""
    gateway_python()  # says `make install-gateway` when LiteLLM is missing
    for backend, fake in zip(
        (world.live_backend, world.candidate_backend), fake_backends, strict=True
    ):
        # Real servers behind the deployments: the proxy asks each for /v1/models as it starts.
        Backend.objects.filter(pk=backend.pk).update(
            base_url=fake.base, model_name=fake.served_model
        )
    config = tmp_path / "gateway" / "config.yaml"
    loop = sync_loop(config)
    loop.wait_for(lambda: len(loop.written()) == 1, "the first render")

    [(path, first)] = loop.written()
    assert path == str(config)
    assert config.read_text() == _rendered()
    assert first == litellm.config_sha256(config.read_text())
    # The proxy may run as another user: the file (no credential in it) is readable by all.
    assert config.stat().st_mode & 0o044 == 0o044
    assert _weights(config) == {"kb-assistant-live": 10000}

    master_key = "sk-compose-test-key"
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    log = tmp_path / "supervise.log"
    with log.open("w") as out:
        supervisor = subprocess.Popen(
            [
                sys.executable,
                str(SUPERVISE),
                *("--config", str(config), "--interval", "0.2"),
                "--",
                str(GATEWAY_VENV / "bin" / "litellm"),
                *("--config", str(config), "--host", "127.0.0.1", "--port", str(port)),
            ],
            cwd=tmp_path,
            env=_env(master_key, {}),
            stdout=out,
            stderr=subprocess.STDOUT,
        )

    def proxy_holds(expected: list[str], what: str) -> None:
        deadline = time.monotonic() + PROXY_START_GUARD_S
        while _deployment_ids(base_url, master_key) != expected:
            if supervisor.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"gave up waiting for {what}:\n{_tail(log)}")
            time.sleep(0.5)

    try:
        proxy_holds(_expected_ids(), "the proxy on the first config")
        # The ledger did not change while the proxy started: many renders, no new file.
        assert len(loop.written()) == 1

        roll_out(release, owner, signers)  # the candidate takes stage 1's share
        loop.wait_for(lambda: len(loop.written()) == 2, "the render after the rollout")
        second = loop.written()[1][1]
        assert second == litellm.config_sha256(config.read_text()) != first
        assert _weights(config) == {"kb-assistant-live": 9500, "kb-assistant-canary": 500}
        proxy_holds(_expected_ids(), "the proxy restarted on the new config")

        with httpx.Client(
            base_url=base_url, headers={"Authorization": f"Bearer {master_key}"}, timeout=120
        ) as client:
            codes = [
                client.post(
                    "/v1/chat/completions",
                    json={"model": "kb-assistant", "messages": [{"role": "user", "content": "hi"}]},
                ).status_code
                for _ in range(10)
            ]
        assert codes == [200] * 10, _tail(log)
        assert f"changed: sha256 {first} -> {second}; restarting" in log.read_text()
    finally:
        with contextlib.suppress(ProcessLookupError):
            supervisor.send_signal(signal.SIGTERM)
        try:
            supervisor.wait(timeout=60)
        except subprocess.TimeoutExpired:
            supervisor.kill()
            supervisor.wait()
    assert supervisor.returncode == 0, _tail(log)
