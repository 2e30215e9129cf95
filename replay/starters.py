"""The starter sample sets that ship with the ledger (`replay/starter/*.jsonl`)."""

from __future__ import annotations

from pathlib import Path

STARTER_DIR = Path(__file__).resolve().parent / "starter"


def starter_files() -> list[Path]:
    return sorted(STARTER_DIR.glob("*.jsonl"))


def starter_name(path: Path) -> str:
    """The sample set a starter file becomes: starter-<category>."""
    return f"starter-{path.stem.replace('_', '-')}"
