"""`make run` installs only what running needs; the test extras are `make test`'s (and
every other target's that uses their tools), from a clean clone too (issue 27 item 8f).

Read through `make -n` (what make would run) against a scratch virtualenv path: the
real install takes minutes and is what CI's `make test` does anyway.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs GNU make")


def planned(target: str, venv: Path) -> list[str]:
    """The commands `make <target>` would run, with the virtualenv at `venv`."""
    # Run under `make test`, make passes its own flags down (MAKEFLAGS, MAKELEVEL) and a
    # sub-make then prints "Entering/Leaving directory": plan as a make of its own.
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    result = subprocess.run(
        # The gateway's own virtualenv beside the scratch one: a clean clone has neither.
        ["make", "--no-print-directory", "-n", target, f"VENV={venv}", f"GATEWAY_VENV={venv}-gw"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    return result.stdout.splitlines()


def installs(lines: list[str]) -> list[str]:
    """The app's installs (the gateway's virtualenv is `gateway_installs`)."""
    return [line for line in lines if "pip install" in line and "requirements-gateway" not in line]


def gateway_installs(lines: list[str]) -> list[str]:
    return [line for line in lines if "pip install" in line and "requirements-gateway" in line]


def test_make_run_from_a_clean_clone_installs_the_app_without_the_test_extras(tmp_path):
    lines = planned("run", tmp_path / "venv")

    (install,) = installs(lines)
    assert install.endswith(" -e .")
    assert "[test]" not in "\n".join(lines)
    assert any(line.startswith(f"touch {tmp_path / 'venv'}/.installed-run") for line in lines)
    assert "scripts/run-embedded.sh" in lines[-1]


@pytest.mark.parametrize("target", ["test", "lint", "format", "messages", "plotly-css"])
def test_the_targets_using_the_tools_install_the_test_extras(tmp_path, target):
    (install,) = installs(planned(target, tmp_path / "venv"))

    assert install.endswith(' -e ".[test]"')


def test_make_test_installs_litellm_in_its_own_virtualenv_and_make_run_does_not(tmp_path):
    venv = tmp_path / "venv"

    (install,) = gateway_installs(planned("test", venv))
    assert install.startswith(f"{venv}-gw/bin/python -m pip install")
    assert f"{venv}-gw/bin/uv pip install --quiet --python {venv}-gw/bin/python" in install
    assert install.endswith("-r requirements-gateway.txt -c requirements-gateway.lock")
    assert gateway_installs(planned("run", venv)) == []
    assert "litellm[proxy]==1.108.7" in (ROOT / "requirements-gateway.txt").read_text()
    assert "litellm==1.108.7" in (ROOT / "requirements-gateway.lock").read_text().splitlines()


def test_installs_go_through_a_pinned_uv_into_the_virtualenv_they_name(tmp_path):
    venv = tmp_path / "venv"

    (install,) = installs(planned("test", venv))

    bootstrap, _, uv = install.partition(" && ")
    assert bootstrap.startswith(f"{venv}/bin/python -m pip install")
    assert bootstrap.endswith(" uv==0.13.9")  # pinned: a new uv cannot change what lands
    assert uv.startswith(f"{venv}/bin/uv pip install --quiet --python {venv}/bin/python")
    assert " -c requirements.lock " in uv


def test_after_make_test_make_run_installs_nothing_more(tmp_path):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    # What the [test] install leaves: both stamps, newer than pyproject.toml.
    (venv / ".installed-run").touch()
    (venv / ".installed-test").touch()

    assert installs(planned("run", venv)) == []
    assert installs(planned("test", venv)) == []


def test_after_make_run_make_test_still_installs_the_test_extras(tmp_path):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / ".installed-run").touch()

    assert installs(planned("run", venv)) == []
    (install,) = installs(planned("test", venv))
    assert install.endswith(' -e ".[test]"')


def _runtime_imports() -> set[str]:
    """Top-level modules the app's code imports when it runs (not under TYPE_CHECKING)."""
    import ast

    names: set[str] = set()
    for folder in ("config", "ledger", "lib", "releases", "replay"):
        for path in (ROOT / folder).rglob("*.py"):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            skipped = {
                id(node)
                for block in ast.walk(tree)
                if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
                for node in ast.walk(block)
            }
            for node in ast.walk(tree):
                if id(node) in skipped:
                    continue
                if isinstance(node, ast.Import):
                    names.update(alias.name.split(".")[0] for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names.add(node.module.split(".")[0])
    return names


def test_nothing_the_app_imports_at_run_time_comes_only_with_the_test_extras():
    """`make run` installs no test extras: django-stubs-ext, imported by views, forms
    and template tags, was one of them, and the run-only install failed on it."""
    import tomllib
    from importlib.metadata import packages_distributions

    from packaging.requirements import Requirement

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    base = {Requirement(r).name.lower() for r in project["dependencies"]}
    test_only = {
        Requirement(r).name.lower() for r in project["optional-dependencies"]["test"]
    } - base
    provided = packages_distributions()
    needs_test_extras = {
        module: dists
        for module in _runtime_imports()
        if (dists := {d.lower() for d in provided.get(module, [])}) and dists <= test_only
    }
    assert needs_test_extras == {}


@pytest.mark.parametrize("target", ["test", "coverage"])
def test_make_test_installs_debians_prometheus_only_when_it_is_missing(tmp_path, target):
    """The rollout-analysis tests run a real Prometheus (tests/support/prometheus.py)."""
    lines = planned(target, tmp_path / "venv")

    (install,) = [line for line in lines if "/usr/bin/prometheus" in line]
    guard, _, command = install.partition(" || ")
    assert guard == "test -x /usr/bin/prometheus"
    assert "apt-get install -y -qq --no-install-recommends prometheus" in command
    # The service the package starts under systemd is stopped: the tests never use :9090.
    assert "systemctl disable --now prometheus.service" in command
    assert not [line for line in planned("run", tmp_path / "venv") if "apt-get" in line]
