"""The apps are stacked ledger ← replay ← releases: a lower app never imports a higher one.

Every module's imports are read with `ast` (top-level and inside functions,
`TYPE_CHECKING` blocks included), so a late import cannot hide an upward
dependency. `lib/` holds shared machinery and imports none of the apps.
"""

from __future__ import annotations

import ast
import graphlib
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


# Inside releases/: the base (tables and the rules every room reads), then the rooms,
# each reading only those before it, then the wiring (URLs, tasks, admin, tags, demo,
# commands) that may read them all.
ROOM_ORDER = [
    "base",
    "cost",
    "governance",
    "gateway",
    "analysis",
    "reviews",
    "audit",
    "overview",
    "wiring",
]
BASE = {"models", "permissions", "policy", "schemas", "guards", "transitions", "locks"}
BASE |= {"event_actions", "checks", "histogram_shift", "stage_analysis", "__init__"}


def room_of(module: str) -> str:
    """The room of a module under releases/ ("releases.governance.gates" → governance)."""
    parts = module.split(".")[1:] or ["__init__"]
    if parts[0] in ROOM_ORDER:
        return parts[0]
    return "base" if parts[0] in BASE else "wiring"


def releases_imports(path: Path) -> set[tuple[str, int]]:
    """(module, line) of every import of a releases module, names included:
    `from releases.governance import services` imports releases.governance.services."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update((a.name, node.lineno) for a in node.names if a.name.startswith("releases"))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "releases":
                found.update((f"releases.{a.name}", node.lineno) for a in node.names)
            elif node.module.startswith("releases."):
                found.add((node.module, node.lineno))
    return found


def rooms_read_backwards() -> list[str]:
    found = []
    for path in sorted((ROOT / "releases").rglob("*.py")):
        if "migrations" in path.parts:
            continue
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        room = room_of(module)
        for imported, line in sorted(releases_imports(path)):
            if ROOM_ORDER.index(room_of(imported)) > ROOM_ORDER.index(room):
                found.append(f"{path.relative_to(ROOT)}:{line} ({room}) imports {imported}")
    return found


def test_a_room_of_releases_reads_only_the_rooms_before_it():
    assert rooms_read_backwards() == []


def test_each_room_is_placed():
    assert room_of("releases.governance.services.lifecycle") == "governance"
    assert room_of("releases.models") == "base"
    assert room_of("releases.permissions") == "base"
    assert room_of("releases.urls") == "wiring"
    assert room_of("releases") == "base"
    # A new module at the top of the app is wiring until it is placed: the base is a list.
    assert room_of("releases.something_new") == "wiring"


def releases_modules() -> dict[str, Path]:
    modules = {}
    for path in sorted((ROOT / "releases").rglob("*.py")):
        if "migrations" in path.parts:
            continue
        parts = path.relative_to(ROOT).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def module_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Each module of releases/ and the modules of releases/ it imports, wherever the
    import stands: `from releases.x import y` is releases.x.y when that is a module."""
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        deps = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                deps.update(a.name for a in node.names if a.name in modules)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in modules:
                for alias in node.names:
                    name = f"{node.module}.{alias.name}"
                    deps.add(name if name in modules else node.module)
        graph[module] = deps - {module}
    return graph


def test_no_circle_among_the_modules_of_releases():
    graph = module_graph(releases_modules())

    assert "releases.governance.services.base" in graph["releases.governance.services.lifecycle"]
    graphlib.TopologicalSorter(graph).prepare()  # raises CycleError naming the circle


def test_the_circle_check_can_fail():
    graph = module_graph(releases_modules())
    graph["releases.transitions"] = {"releases.governance.services.lifecycle"}

    with pytest.raises(graphlib.CycleError):
        graphlib.TopologicalSorter(graph).prepare()
