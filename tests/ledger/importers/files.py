"""Where the load-test fixtures are, and a parse call that names the file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ledger.importers import ParsedReport, parse_report

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "loadtest"


def fixture(*parts: str) -> Path:
    return FIXTURES.joinpath(*parts)


def parse(*parts: str, **kwargs: Any) -> ParsedReport:
    path = fixture(*parts)
    return parse_report(path, filename=path.name, **kwargs)


def parse_bytes(data: bytes, filename: str = "report", **kwargs: Any) -> ParsedReport:
    return parse_report(data, filename=filename, **kwargs)


def load_json(*parts: str) -> Any:
    return json.loads(fixture(*parts).read_text())


def load_jsonl(*parts: str) -> list[Any]:
    return [json.loads(line) for line in fixture(*parts).read_text().splitlines() if line]
