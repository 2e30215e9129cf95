"""The apps are stacked ledger ← replay ← releases: a lower app never imports a higher one.

Every module's imports are read with `ast` (top-level and inside functions,
`TYPE_CHECKING` blocks included), so a late import cannot hide an upward
dependency. `lib/` holds shared machinery and imports none of the apps.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Each package, and the packages it must not import.
FORBIDDEN = {
    "lib": {"ledger", "replay", "releases"},
    "ledger": {"replay", "releases"},
    "replay": {"releases"},
    "releases": set(),
}


def imported_packages(path: Path) -> set[tuple[str, int]]:
    """(top-level package, line) of every absolute import in a module."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update((alias.name.split(".")[0], node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add((node.module.split(".")[0], node.lineno))
    return found


def upward_imports(package: str) -> list[str]:
    forbidden = FORBIDDEN[package]
    return [
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for path in sorted((ROOT / package).rglob("*.py"))
        for name, line in sorted(imported_packages(path))
        if name in forbidden
    ]


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_no_package_imports_one_above_it(package):
    assert upward_imports(package) == []


def test_the_walk_sees_imports_inside_functions(tmp_path):
    # The check itself must be able to fail.
    module = tmp_path / "late.py"
    module.write_text(
        "def f():\n    from releases.views import service\n    import replay.queries\n"
    )

    assert imported_packages(module) == {("releases", 2), ("replay", 3)}
