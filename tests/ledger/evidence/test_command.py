"""`manage.py import_loadtest`: the parsed summary as JSON, a clear error and a non-zero exit on bad input."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from ledger.models import Event, LoadTestReport
from tests.ledger.evidence.conftest import fixture_path


def _run(*args: str) -> tuple[dict, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("import_loadtest", *args, stdout=out, stderr=err)
    return json.loads(out.getvalue()), err.getvalue()


def test_import_prints_the_parsed_summary_as_json(revision):
    path = fixture_path("guidellm", "rate-sweep", "benchmarks.json")

    data, err = _run("--revision", str(revision.pk), "--workload", "batch", str(path))

    report = LoadTestReport.objects.get()
    assert data["created"] is True
    assert data["report"]["id"] == report.pk
    assert data["report"]["workload"] == "batch"
    assert data["report"]["tool"] == "guidellm"
    assert data["report"]["status"] == "current"
    assert [lv["name"] for lv in data["report"]["results"]["levels"]] == [
        "constant@0.20",
        "constant@0.50",
        "constant@1.00",
    ]
    assert data["report"]["capacity"]["level"] == "constant@1.00"
    assert f"report {report.pk}" in err
    event = Event.objects.get(action="loadtest_report.imported")
    assert event.actor_label == "system"


def test_importing_the_same_file_again_prints_the_existing_report(revision):
    path = str(fixture_path("vllm", "vllm_c2_n20_detailed.json"))
    first, _ = _run("--revision", str(revision.pk), "--workload", "short", path)

    again, err = _run("--revision", str(revision.pk), "--workload", "short", path)

    assert again["created"] is False
    assert again["report"]["id"] == first["report"]["id"]
    assert "already imported" in err
    assert LoadTestReport.objects.count() == 1


def test_dry_run_prints_the_summary_and_writes_nothing(revision):
    path = str(fixture_path("aiperf", "profile_export.jsonl"))

    data, _ = _run("--revision", str(revision.pk), "--workload", "short", "--dry-run", path)

    assert data["dry_run"] is True
    assert data["report"]["tool"] == "aiperf"
    assert len(data["report"]["sha256"]) == 64
    assert LoadTestReport.objects.count() == 0
    assert not Event.objects.filter(action="loadtest_report.imported").exists()


def test_forced_format_is_passed_on(revision):
    path = str(fixture_path("vllm", "vllm_c2_n20_detailed.json"))

    with pytest.raises(CommandError, match="not a sglang report"):
        _run("--revision", str(revision.pk), "--workload", "short", "--format", "sglang", path)


def test_a_bad_file_exits_non_zero_naming_the_file_and_location(revision):
    path = str(fixture_path("broken", "aiperf_records_missing_latency.jsonl"))

    with pytest.raises(CommandError) as excinfo:
        _run("--revision", str(revision.pk), "--workload", "short", path)

    assert excinfo.value.returncode == 1
    message = str(excinfo.value)
    assert message.startswith("file: aiperf_records_missing_latency.jsonl: line 5")
    assert "request_latency" in message
    assert LoadTestReport.objects.count() == 0


def test_an_unknown_revision_or_missing_file_is_a_clear_error(revision, tmp_path):
    with pytest.raises(CommandError, match="There is no revision with id 999999"):
        _run("--revision", "999999", "--workload", "short", str(tmp_path / "x.json"))

    with pytest.raises(CommandError, match=r"x\.json: cannot be read"):
        _run("--revision", str(revision.pk), "--workload", "short", str(tmp_path / "x.json"))
