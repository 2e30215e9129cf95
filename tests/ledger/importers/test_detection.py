from __future__ import annotations

import io
import json

import pytest

from ledger.importers import FORMATS, detect_format, parse_report

from .files import fixture

SAMPLES = [
    (("vllm", "vllm_c2_n20_detailed.json"), ("vllm", "bench-serve-json")),
    (("sglang", "sglang_c2_n16_details.jsonl"), ("sglang", "bench-serving-jsonl")),
    (("guidellm", "concurrency2", "benchmarks.json"), ("guidellm", "benchmarks-json")),
    (("guidellm", "rate-sweep", "benchmarks.json"), ("guidellm", "benchmarks-json")),
    (("guidellm", "concurrency2", "benchmarks.csv"), ("guidellm", "benchmarks-csv")),
    (("guidellm", "rate-sweep", "benchmarks.csv"), ("guidellm", "benchmarks-csv")),
    (("aiperf", "profile_export_aiperf.json"), ("aiperf", "summary-json")),
    (("aiperf", "profile_export_aiperf.csv"), ("aiperf", "summary-csv")),
    (("aiperf", "profile_export.jsonl"), ("aiperf", "records-jsonl")),
    (("genai_perf", "profile_export_genai_perf.json"), ("genai_perf", "summary-json")),
    (("genai_perf", "profile_export_genai_perf.csv"), ("genai_perf", "summary-csv")),
    (("genai_perf", "profile_export.json"), ("genai_perf", "perf-analyzer-json")),
    (
        ("inference_perf", "summary_lifecycle_metrics.json"),
        ("inference_perf", "lifecycle-summary-json"),
    ),
    (
        ("inference_perf", "stage_0_lifecycle_metrics.json"),
        ("inference_perf", "lifecycle-summary-json"),
    ),
    (
        ("inference_perf", "per_request_lifecycle_metrics.json"),
        ("inference_perf", "per-request-json"),
    ),
    (("generic", "requests.csv"), ("generic", "csv")),
    (("generic", "requests.jsonl"), ("generic", "jsonl")),
]


@pytest.mark.parametrize(("parts", "expected"), SAMPLES, ids=lambda v: "/".join(v))
def test_detection_picks_the_format_of_each_sample(parts, expected):
    path = fixture(*parts)

    assert detect_format(path, filename=path.name) == expected


@pytest.mark.parametrize(("parts", "expected"), SAMPLES[:4], ids=lambda v: "/".join(v))
def test_detection_reads_content_not_the_file_name(parts, expected):
    data = fixture(*parts).read_bytes()

    assert detect_format(data, filename="upload.bin") == expected


def test_explicit_format_is_used():
    path = fixture("vllm", "vllm_c2_n20_detailed.json")

    report = parse_report(path, filename=path.name, format="vllm")

    assert report.format == "vllm"


def test_every_format_is_a_module_with_the_importer_interface():
    assert set(FORMATS) == {
        "vllm",
        "sglang",
        "guidellm",
        "aiperf",
        "genai_perf",
        "inference_perf",
        "generic",
    }
    for name, module in FORMATS.items():
        assert name == module.NAME
        assert callable(module.detect) and callable(module.parse)
        assert module.EXPECTED


def test_an_open_binary_upload_is_read_and_left_open():
    data = fixture("sglang", "sglang_c2_n16_details.jsonl").read_bytes()
    stream = io.BytesIO(data)

    report = parse_report(stream, filename="run.jsonl")

    assert report.tool == "sglang"
    assert not stream.closed


def test_a_byte_order_mark_does_not_hide_a_csv_header():
    data = b"\xef\xbb\xbf" + fixture("generic", "requests.csv").read_bytes()

    assert detect_format(data, filename="excel.csv") == ("generic", "csv")
    assert parse_report(data, filename="excel.csv").levels[0].conditions.requests == 5


def test_aiperf_summary_without_a_version_is_still_aiperf():
    raw = json.loads(fixture("aiperf", "profile_export_aiperf.json").read_text())
    del raw["aiperf_version"]

    assert detect_format(json.dumps(raw).encode(), filename="x.json") == ("aiperf", "summary-json")
