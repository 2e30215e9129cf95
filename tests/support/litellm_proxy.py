"""A real LiteLLM proxy on loopback, started from .venv-litellm/ (`make install-gateway`).

The proxy reads the config the ledger rendered (releases/gateway/litellm.py) and runs
offline: its model-cost map from the package (LITELLM_LOCAL_MODEL_COST_MAP), telemetry
vetoed (LITELLM_TELEMETRY_DISABLED, litellm/proxy/telemetry/settings.py), no database
(DATABASE_URL is not passed on: LiteLLM would reach for Prisma, whose binaries it
downloads at run time). It cannot re-read a config file without its database (its
periodic reload reads the database: proxy_server.py, ``check_periodic_reloads``), so a
new config means a restart: ``LiteLLMProxy.use`` restarts only when the text changed.

Startup took 13 s here and 30 to 40 s on a busy 2-core machine: the wait polls /health/liveliness until
it answers, and gives up only after minutes (a hang guard, not a timing budget).
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx

from tests.support.processes import ROOT, free_port

GATEWAY_VENV = Path(os.environ.get("GATEWAY_VENV", ROOT / ".venv-litellm"))
START_GUARD_S = 300.0
KEYLESS_VALUE = "no-key"  # what a keyless backend's placeholder variable holds


def gateway_python() -> Path:
    python = GATEWAY_VENV / "bin" / "python"
    if not python.exists():
        raise RuntimeError(f"{python} is missing: run `make install-gateway`")
    return python


def _env(master_key: str, extra: dict[str, str]) -> dict[str, str]:
    """A small environment of its own: nothing of the suite's (DATABASE_URL, REDIS_*)."""
    from releases.gateway.litellm import KEYLESS_API_KEY_ENV, MASTER_KEY_ENV

    env = {
        name: os.environ[name] for name in ("PATH", "HOME", "LANG", "TMPDIR") if name in os.environ
    }
    env |= {
        MASTER_KEY_ENV: master_key,
        KEYLESS_API_KEY_ENV: KEYLESS_VALUE,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LITELLM_TELEMETRY_DISABLED": "true",
        "NO_PROXY": "127.0.0.1,localhost",
        "PYTHONUNBUFFERED": "1",
    }
    return env | extra


class LiteLLMProxy:
    """One proxy process at a time in ``folder``; ``use(text)`` (re)starts it on a config."""

    def __init__(self, folder: Path, env: dict[str, str] | None = None) -> None:
        self.folder = folder
        self.extra_env = env or {}
        self.master_key = "sk-test-" + secrets.token_hex(16)
        self.config_text: str | None = None
        self.process: subprocess.Popen | None = None
        self.base_url = ""
        self.log_path = folder / "litellm.log"
        self.starts: list[float] = []  # seconds each start took to answer /health/liveliness

    def use(self, config_text: str) -> None:
        if (
            self.process is not None
            and self.process.poll() is None
            and config_text == self.config_text
        ):
            return
        self.stop()
        self.start(config_text)

    def start(self, config_text: str) -> None:
        config = self.folder / "config.yaml"
        config.write_text(config_text)
        self.config_text = config_text
        port = free_port()
        self.base_url = f"http://127.0.0.1:{port}"
        begun = time.monotonic()
        with self.log_path.open("a") as log:
            log.write(f"\n===== litellm --config {config} --port {port}\n")
            log.flush()
            self.process = subprocess.Popen(
                [
                    str(GATEWAY_VENV / "bin" / "litellm"),
                    *("--config", str(config), "--host", "127.0.0.1", "--port", str(port)),
                ],
                cwd=self.folder,
                env=_env(self.master_key, self.extra_env),
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = begun + START_GUARD_S
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"litellm exited with {self.process.returncode}:\n{self.log_tail()}"
                )
            try:
                if httpx.get(f"{self.base_url}/health/liveliness", timeout=30).status_code == 200:
                    break
            except httpx.TransportError:
                pass  # refused while it imports and binds
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(
                    f"litellm did not answer in {START_GUARD_S} s:\n{self.log_tail()}"
                )
            time.sleep(0.25)
        self.starts.append(time.monotonic() - begun)

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def log_tail(self, lines: int = 80) -> str:
        if not self.log_path.exists():
            return "(no log)"
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def client(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.base_url,
            headers={"Authorization": f"Bearer {self.master_key}"},
            timeout=120,
        )


class FakeBackend:
    """One fake OpenAI-compatible server process (tests/support/fake_openai.py) and its count.

    Each backend is its own process on its own port, serving one model name; it keeps
    its own record of the requests it received (GET /_fake/stats), so what a backend
    got is read from the backend, not inferred from the proxy.
    """

    def __init__(self, base: str, served_model: str) -> None:
        self.base = base
        self.api_base = f"{base}/v1"
        self.served_model = served_model

    def received(self) -> int:
        return httpx.get(f"{self.base}/_fake/stats", timeout=30).json()["requests"]

    def reset(self) -> None:
        httpx.post(f"{self.base}/_fake/reset", timeout=30).raise_for_status()


_VALIDATE = """
import json, sys
from litellm.proxy._types import GenerateKeyRequest, NewTeamRequest
models = {"NewTeamRequest": NewTeamRequest, "GenerateKeyRequest": GenerateKeyRequest}
found = {}
for name, bodies in json.load(sys.stdin).items():
    if name == "config":
        # A rendered config: each deployment's params as LiteLLM's own model reads them, and a
        # Router built from it as the proxy builds one (router_settings are its arguments).
        from litellm import Router
        from litellm.types.router import LiteLLM_Params
        problems = []
        for config in bodies:
            try:
                for entry in config["model_list"]:
                    LiteLLM_Params.model_validate(entry["litellm_params"])
                router = Router(model_list=config["model_list"], **config["router_settings"])
                ids = [d["model_info"]["id"] for d in router.get_model_list()]
                expected = [entry["model_info"]["id"] for entry in config["model_list"]]
                if ids != expected:
                    problems.append(f"the router holds {ids}, not {expected}")
            except Exception as error:
                problems.append(f"{type(error).__name__}: {error}")
        found[name] = problems
        continue
    model = models[name]
    problems = []
    for body in bodies:
        # pydantic ignores unknown keys here: a misspelt field would pass silently.
        problems += [f"{key}: not a field of {name}" for key in body if key not in model.model_fields]
        try:
            parsed = model.model_validate(body)
        except Exception as error:
            problems.append(str(error))
            continue
        for key, value in body.items():
            if key in model.model_fields and getattr(parsed, key) != value:
                problems.append(f"{key}: {value!r} became {getattr(parsed, key)!r}")
    found[name] = problems
print(json.dumps(found))
"""


def validate_with_litellm(bodies: dict[str, list[dict[str, Any]]]) -> dict[str, list[str]]:
    """Each body against LiteLLM's own request model, in its virtualenv: problems by model."""
    result = subprocess.run(
        [str(gateway_python()), "-c", _VALIDATE],
        input=json.dumps(bodies),
        capture_output=True,
        text=True,
        timeout=300,
        env=_env("sk-unused", {}),
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(result.stderr)
    return json.loads(result.stdout.strip().splitlines()[-1])
