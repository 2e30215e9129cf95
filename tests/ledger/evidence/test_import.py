"""Importing a load-test report: raw file kept as written, parsed, recorded once, nothing half written."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

import pytest
from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import DatabaseError

from ledger import services
from ledger.importers import parse_report
from ledger.models import Event, LoadTestReport, LoadTestRequestData
from ledger.services import evidence as evidence_services
from lib import s3
from tests.factories import UserFactory
from tests.ledger.evidence.conftest import fixture_path, import_file, upload
from tests.ledger.factories import TeamFactory

SAMPLES = [
    # (path parts, tool, source, has per-request data, levels)
    (("vllm", "vllm_c2_n20_detailed.json"), "vllm", "computed", True, 1),
    (("guidellm", "rate-sweep", "benchmarks.json"), "guidellm", "computed", True, 3),
    (("aiperf", "profile_export.jsonl"), "aiperf", "computed", True, 1),
    (("sglang", "sglang_c2_n16_details.jsonl"), "sglang", "tool", True, 1),
    (("inference_perf", "summary_lifecycle_metrics.json"), "inference-perf", "tool", False, 1),
]


def _bucket_keys(bucket: str) -> list[str]:
    listing = s3.client().list_objects_v2(Bucket=bucket, Prefix="loadtest/")
    return [item["Key"] for item in listing.get("Contents", [])]


def _local_files() -> list[Path]:
    root = Path(settings.MEDIA_ROOT)
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []


def _events() -> int:
    return Event.objects.filter(action="loadtest_report.imported").count()


# ---------------------------------------------------------------- the real sample files


@pytest.mark.parametrize(("parts", "tool", "source", "per_request", "levels"), SAMPLES)
def test_each_sample_file_imports_with_its_numbers(
    revision, owner, parts, tool, source, per_request, levels
):
    parsed = parse_report(fixture_path(*parts), filename=parts[-1])

    report, created = import_file(revision, *parts, actor=owner, workload="high_concurrency")

    assert created is True
    report.refresh_from_db()
    assert (report.tool, report.source, report.level_count) == (tool, source, levels)
    assert report.has_request_data is per_request
    assert LoadTestRequestData.objects.filter(report=report).exists() is per_request
    first = parsed.levels[0]
    assert report.ttft_p95_ms == first.ttft.p95
    assert report.ttft_p99_ms == first.ttft.p99
    assert report.tpot_p95_ms == first.tpot.p95
    assert report.requests == first.conditions.requests
    assert report.error_rate == first.conditions.error_rate
    assert report.results == parsed.to_json()
    assert report.fingerprint == revision.fingerprint
    assert report.hardware == {
        "gpu_model": "H100-80GB",
        "gpu_count": 2,
        "gpu_memory_gb": None,
        "source": "runtime",
    }
    assert report.uploaded_by == owner
    assert report.workload == "high_concurrency"
    event = Event.objects.get(action="loadtest_report.imported")
    assert (event.subject_type, event.subject_id) == ("ledger.loadtestreport", str(report.pk))
    assert event.actor == owner
    assert event.payload_data["raw_sha256"] == report.raw_sha256
    assert event.payload_data["revision"] == revision.pk


def test_the_tool_version_is_recorded(revision):
    report, _ = import_file(revision, "guidellm", "rate-sweep", "benchmarks.json")

    assert report.tool_version == "0.8.1"
    assert report.format == "guidellm"
    assert report.variant == "benchmarks-json"


def test_uploading_the_same_file_twice_returns_the_existing_report(revision, owner):
    first, created = import_file(revision, "vllm", "vllm_c2_n20_detailed.json", actor=owner)
    events = _events()

    again, created_again = import_file(revision, "vllm", "vllm_c2_n20_detailed.json", actor=owner)

    assert created is True
    assert created_again is False
    assert again.pk == first.pk
    assert LoadTestReport.objects.count() == 1
    assert _events() == events == 1
    assert len(_local_files()) == 1


def test_the_same_file_for_another_revision_is_other_evidence(revision, service):
    from tests.ledger.factories import RevisionFactory

    other = RevisionFactory(
        service=service, runtime=revision.runtime, model_asset=revision.model_asset
    )

    first, _ = import_file(revision, "vllm", "vllm_c2_n20_detailed.json")
    second, created = import_file(other, "vllm", "vllm_c2_n20_detailed.json")

    assert created is True
    assert first.pk != second.pk
    assert first.raw_sha256 == second.raw_sha256
    assert first.raw_file.name != second.raw_file.name


# ---------------------------------------------------------------- the raw file, stored as written


def test_raw_file_lands_in_s3_byte_identical(revision, s3_storage):
    parts = ("guidellm", "rate-sweep", "benchmarks.json")
    raw = fixture_path(*parts).read_bytes()
    sha = hashlib.sha256(raw).hexdigest()

    report, _ = import_file(revision, *parts)

    key = f"loadtest/{revision.pk}/{sha}/benchmarks.json"
    assert report.raw_file.name == key
    assert (report.raw_sha256, report.raw_size) == (sha, len(raw))
    assert _bucket_keys(s3_storage) == [key]
    stored = s3.client().get_object(Bucket=s3_storage, Key=key)["Body"].read()
    assert stored == raw
    assert hashlib.sha256(stored).hexdigest() == sha


def test_raw_file_lands_in_the_local_folder_byte_identical(revision):
    parts = ("aiperf", "profile_export.jsonl")
    raw = fixture_path(*parts).read_bytes()
    sha = hashlib.sha256(raw).hexdigest()

    report, _ = import_file(revision, *parts)

    assert report.raw_file.name == f"loadtest/{revision.pk}/{sha}/profile_export.jsonl"
    path = Path(settings.MEDIA_ROOT) / report.raw_file.name
    assert path.read_bytes() == raw
    assert _local_files() == [path]
    with report.raw_file.open("rb") as stored:
        assert hashlib.sha256(stored.read()).hexdigest() == report.raw_sha256


def test_a_file_name_with_a_path_and_spaces_is_kept_but_made_safe_in_the_key(revision):
    file = upload("vllm", "vllm_c2_n20_detailed.json", name="../ci runs/vllm result.json")

    report, _ = services.import_loadtest_report(
        revision, actor=None, workload="short", file=file, filename="../ci runs/vllm result.json"
    )

    assert report.filename == "../ci runs/vllm result.json"
    assert report.raw_file.name.endswith(f"/{report.raw_sha256}/vllm_result.json")
    assert report.raw_file.name.startswith(f"loadtest/{revision.pk}/")


# ---------------------------------------------------------------- failures leave nothing behind


def _break_row_insert(monkeypatch):
    real_save = LoadTestReport.save

    def failing_save(self, *args, **kwargs):
        if self._state.adding:
            raise DatabaseError("insert refused (test)")
        return real_save(self, *args, **kwargs)

    monkeypatch.setattr(LoadTestReport, "save", failing_save)


def _break_event_append(monkeypatch):
    def failing_append(**kwargs):
        raise DatabaseError("chain unavailable (test)")

    monkeypatch.setattr(evidence_services, "append_event", failing_append)


@pytest.mark.parametrize("breaker", [_break_row_insert, _break_event_append])
def test_failed_import_leaves_no_row_and_no_object_in_s3(
    revision, s3_storage, monkeypatch, breaker
):
    breaker(monkeypatch)

    with pytest.raises(DatabaseError):
        import_file(revision, "vllm", "vllm_c2_n20_detailed.json")

    assert LoadTestReport.objects.count() == 0
    assert LoadTestRequestData.objects.count() == 0
    assert _events() == 0
    assert _bucket_keys(s3_storage) == []


@pytest.mark.parametrize("breaker", [_break_row_insert, _break_event_append])
def test_failed_import_leaves_no_row_and_no_file_in_the_local_folder(
    revision, monkeypatch, breaker
):
    breaker(monkeypatch)

    with pytest.raises(DatabaseError):
        import_file(revision, "vllm", "vllm_c2_n20_detailed.json")

    assert LoadTestReport.objects.count() == 0
    assert _events() == 0
    assert _local_files() == []


@pytest.mark.parametrize("storage", ["s3", "local"])
def test_a_simultaneous_identical_upload_returns_the_winner_and_keeps_its_object(
    revision, monkeypatch, request, storage
):
    """Two imports of one file pass the duplicate check together; the loser's insert
    fails on the unique constraint. It returns the winner and deletes only its own copy
    (on S3 both wrote the same key: deleting it would lose the winner's file)."""
    bucket = request.getfixturevalue("s3_storage") if storage == "s3" else None
    real_parse = evidence_services._parse
    winner = {}

    def parse_then_lose_the_race(stream, filename, format):
        parsed = real_parse(stream, filename, format)
        if "started" not in winner:
            winner["started"] = True
            # The other upload finishes while this one is between its check and its insert.
            winner["report"], _ = import_file(revision, "vllm", "vllm_c2_n20_detailed.json")
        return parsed

    monkeypatch.setattr(evidence_services, "_parse", parse_then_lose_the_race)

    report, created = import_file(revision, "vllm", "vllm_c2_n20_detailed.json")

    assert created is False
    assert report.pk == winner["report"].pk
    assert LoadTestReport.objects.count() == 1
    assert _events() == 1
    stored = (
        _bucket_keys(bucket)
        if bucket
        else [p.relative_to(settings.MEDIA_ROOT).as_posix() for p in _local_files()]
    )
    assert stored == [report.raw_file.name]
    with report.raw_file.open("rb") as f:
        assert f.read() == fixture_path("vllm", "vllm_c2_n20_detailed.json").read_bytes()


# ---------------------------------------------------------------- bad input


def test_a_bad_file_is_refused_naming_the_file_and_the_json_path(revision):
    with pytest.raises(ValidationError) as excinfo:
        import_file(revision, "broken", "vllm_negative_ttft.json")

    (message,) = excinfo.value.message_dict["file"]
    assert message.startswith("vllm_negative_ttft.json: ttfts[7]:")
    assert LoadTestReport.objects.count() == 0
    assert _local_files() == []


def test_a_truncated_file_is_refused_naming_the_line(revision):
    with pytest.raises(ValidationError) as excinfo:
        import_file(revision, "broken", "guidellm_truncated.json")

    (message,) = excinfo.value.message_dict["file"]
    assert message.startswith("guidellm_truncated.json: line ")
    assert "truncated" in message


def test_an_empty_file_is_refused_by_name(revision):
    with pytest.raises(ValidationError) as excinfo:
        import_file(revision, "broken", "empty.json")

    assert excinfo.value.message_dict["file"] == ["empty.json: the file is empty"]


def test_a_file_over_the_size_limit_is_refused_before_it_is_stored(revision, settings):
    settings.LOADTEST_MAX_UPLOAD_BYTES = 1000

    with pytest.raises(ValidationError) as excinfo:
        import_file(revision, "vllm", "vllm_c2_n20_detailed.json")

    error = excinfo.value.error_dict["file"][0]
    assert error.code == "too_large"
    assert "vllm_c2_n20_detailed.json" in error.message
    assert "19,553 bytes" in error.message
    assert "1,000 bytes" in error.message
    assert LoadTestReport.objects.count() == 0
    assert _local_files() == []


def test_a_stream_of_unknown_size_is_cut_off_at_the_limit(revision, settings):
    settings.LOADTEST_MAX_UPLOAD_BYTES = 1000
    stream = io.BytesIO(fixture_path("vllm", "vllm_c2_n20_detailed.json").read_bytes())

    with pytest.raises(ValidationError) as excinfo:
        services.import_loadtest_report(
            revision, actor=None, workload="short", file=stream, filename="piped.json"
        )

    error = excinfo.value.error_dict["file"][0]
    assert error.code == "too_large"
    assert error.message.startswith("piped.json: the file is larger than that; the limit is 1,000")


def test_an_unknown_workload_or_format_is_refused_by_field(revision):
    with pytest.raises(ValidationError) as excinfo:
        import_file(revision, "vllm", "vllm_c2_n20_detailed.json", workload="huge", format="locust")

    assert set(excinfo.value.message_dict) == {"workload", "format"}
    assert "high_concurrency" in excinfo.value.message_dict["workload"][0]


def test_a_forced_format_that_does_not_fit_names_what_was_expected(revision):
    with pytest.raises(ValidationError) as excinfo:
        import_file(revision, "vllm", "vllm_c2_n20_detailed.json", format="guidellm")

    assert "not a guidellm report" in excinfo.value.message_dict["file"][0]


# ---------------------------------------------------------------- who may attach evidence


@pytest.mark.parametrize("who", ["auditor", "outsider", "sre"])
def test_only_model_owners_of_the_team_attach_evidence(revision, request, who):
    person = request.getfixturevalue(who)

    with pytest.raises(PermissionDenied):
        import_file(revision, "vllm", "vllm_c2_n20_detailed.json", actor=person)

    assert LoadTestReport.objects.count() == 0


def test_a_model_owner_of_another_team_cannot_attach_evidence(revision):
    stranger = UserFactory(username="mo", roles=["model_owner"])
    TeamFactory(slug="other-team", members=[stranger])

    with pytest.raises(PermissionDenied, match="kb-team"):
        import_file(revision, "vllm", "vllm_c2_n20_detailed.json", actor=stranger)


# ---------------------------------------------------------------- preview and hardware


def test_preview_parses_without_storing_or_recording(revision):
    raw = fixture_path("guidellm", "rate-sweep", "benchmarks.json").read_bytes()

    preview = services.preview_loadtest_report(
        upload("guidellm", "rate-sweep", "benchmarks.json"), filename="benchmarks.json"
    )

    assert preview["tool"] == "guidellm"
    assert [level["name"] for level in preview["levels"]] == [
        "constant@0.20",
        "constant@0.50",
        "constant@1.00",
    ]
    assert preview["sha256"] == hashlib.sha256(raw).hexdigest()
    assert preview["size_bytes"] == len(raw)
    assert LoadTestReport.objects.count() == 0
    assert _events() == 0
    assert _local_files() == []


def test_preview_refuses_a_bad_file_like_the_import():
    with pytest.raises(ValidationError) as excinfo:
        services.preview_loadtest_report(
            upload("broken", "generic_negative_ttft.csv"), filename="generic_negative_ttft.csv"
        )

    assert excinfo.value.message_dict["file"][0].startswith("generic_negative_ttft.csv: line 4")


def test_hardware_comes_from_the_file_when_it_says_so(revision):
    parsed = parse_report(
        fixture_path("vllm", "vllm_c2_n20_detailed.json"), filename="vllm_c2_n20_detailed.json"
    )
    parsed.meta["gpu_model"] = "A100-40GB"
    parsed.meta["gpu_count"] = 4

    hardware, warnings = services.hardware_for(revision, parsed)

    assert hardware["gpu_model"] == "A100-40GB"
    assert hardware["gpu_count"] == 4
    assert hardware["source"] == "file"
    assert "4 x A100-40GB" in warnings[0]
    assert "2 x H100-80GB" in warnings[0]
