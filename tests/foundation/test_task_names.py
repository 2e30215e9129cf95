"""Every task a verb queues by name (`lib.tasks.send_on_commit`) is a registered task.

The verbs name their tasks rather than import them (the tasks import the verbs), so a
misspelt name would only show when a worker refused the message: this reads every
call and asks Celery's registry instead.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

from config.celery import app

ROOT = Path(__file__).resolve().parents[2]
APPS = ("ledger", "replay", "releases", "lib")


def sent_names(paths: Iterable[Path]) -> list[tuple[str, str]]:
    """(where, task name) of every `send_on_commit(...)` call; a name that is not a
    string literal is given as its source text, which no task is called."""
    found = []
    for path in paths:
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "send_on_commit"
            ):
                first = node.args[0]
                name = first.value if isinstance(first, ast.Constant) else ast.unparse(first)
                found.append((f"{path.name}:{node.lineno}", name))
    return found


def unregistered(calls: list[tuple[str, str]]) -> list[tuple[str, str]]:
    app.loader.import_default_modules()
    return [(where, name) for where, name in calls if name not in app.tasks]


def test_every_task_sent_by_name_is_registered():
    calls = sent_names(path for package in APPS for path in sorted((ROOT / package).rglob("*.py")))

    assert {name for _, name in calls} >= {"verify_rollback", "build_export", "deliver_webhook"}
    assert unregistered(calls) == []


def test_a_misspelt_or_computed_name_is_reported(tmp_path):
    module = tmp_path / "verb.py"
    module.write_text(
        'send_on_commit("build_export", 1)\n'
        'send_on_commit("build_exports", 2)\n'
        "send_on_commit(task_name, 3)\n"
    )

    assert unregistered(sent_names([module])) == [
        ("verb.py:2", "build_exports"),
        ("verb.py:3", "task_name"),
    ]
