"""Bad input: every error names the file, where, and what was expected."""

from __future__ import annotations

import io
import json

import pytest

from ledger.importers import ReportFormatError, parse_report

from .files import fixture, parse


def _error(*parts: str, **kwargs) -> ReportFormatError:
    with pytest.raises(ReportFormatError) as caught:
        parse("broken", *parts, **kwargs)
    return caught.value


def test_truncated_single_line_json_names_line_and_column():
    error = _error("vllm_truncated.json")

    assert error.filename == "vllm_truncated.json"
    assert error.location == "line 1, column 5001"
    assert "truncated" in error.message


def test_json_cut_inside_a_string_is_reported_as_truncated():
    error = _error("guidellm_truncated.json")

    assert error.location.startswith("line 1, column ")
    assert "truncated" in error.message


def test_missing_field_names_its_json_path():
    error = _error("guidellm_missing_request_latency.json")

    assert error.location == "benchmarks[0].requests.successful[3].request_latency"
    assert "missing" in error.message


def test_missing_field_in_a_jsonl_record_names_line_and_path():
    error = _error("aiperf_records_missing_latency.jsonl")

    assert error.location == "line 5: metrics.request_latency"
    assert "missing" in error.message


def test_wrong_type_names_the_path_and_what_was_found():
    error = _error("aiperf_summary_wrong_type.json")

    assert error.location == "time_to_first_token.p99"
    assert error.message == "expected a number, found the string 'fast'"


@pytest.mark.parametrize(
    "tool, name",
    [("aiperf", "profile_export_aiperf.json"), ("genai_perf", "profile_export_genai_perf.json")],
)
def test_unknown_time_unit_in_a_summary_json_names_the_unit_and_the_known_ones(tool, name):
    doc = json.loads(fixture(tool, name).read_text())
    doc["time_to_first_token"]["unit"] = "fortnights"

    with pytest.raises(ReportFormatError) as caught:
        parse_report(json.dumps(doc).encode(), filename=name)

    assert caught.value.location == "time_to_first_token.unit"
    assert caught.value.message == (
        "unknown time unit 'fortnights': expected one of ms, sec, s, us, ns"
    )


def test_negative_latency_in_a_per_request_array_names_index_and_value():
    error = _error("vllm_negative_ttft.json")

    assert error.location == "ttfts[7]"
    assert "negative" in error.message
    assert "-0.25" in error.message


def test_negative_latency_in_csv_names_line_and_column():
    error = _error("generic_negative_ttft.csv")

    assert error.location == "line 4, column ttft_ms"
    assert "-12.5" in error.message


def test_nan_latency_in_jsonl_names_the_line():
    error = _error("generic_nan_e2e.jsonl")

    assert error.location == "line 3: e2e_ms"
    assert "NaN" in error.message


def test_nan_latency_in_a_tool_summary_names_the_path():
    error = _error("inference_perf_nan_ttft.json")

    assert error.location == "successes.latency.time_to_first_token.p99"
    assert "NaN" in error.message


@pytest.mark.parametrize("name", ["empty.json", "blank.jsonl"])
def test_empty_file_is_refused(name):
    error = _error(name)

    assert error.location is None
    assert error.message == "the file is empty"


@pytest.mark.parametrize("name", ["unknown.json", "config.yaml"])
def test_unknown_content_lists_the_supported_formats(name):
    error = _error(name)

    assert error.message.startswith("unknown format")
    for format_name in (
        "vllm",
        "sglang",
        "guidellm",
        "aiperf",
        "genai_perf",
        "inference_perf",
        "generic",
    ):
        assert format_name in error.message


def test_unknown_format_name_is_refused_with_the_list():
    with pytest.raises(ReportFormatError) as caught:
        parse("vllm", "vllm_c2_n20_detailed.json", format="locust")

    assert "unknown format 'locust'" in caught.value.message
    assert "guidellm" in caught.value.message


def test_forcing_the_wrong_format_says_what_was_expected():
    with pytest.raises(ReportFormatError) as caught:
        parse("vllm", "vllm_c2_n20_detailed.json", format="guidellm")

    assert caught.value.message.startswith("not a guidellm report: expected")
    assert "benchmarks.json" in caught.value.message


def test_a_path_over_max_bytes_is_refused_before_reading():
    path = fixture("guidellm", "rate-sweep", "benchmarks.json")

    with pytest.raises(ReportFormatError) as caught:
        parse_report(path, filename="benchmarks.json", max_bytes=1000)

    assert "over the limit of 1,000 bytes" in caught.value.message


def test_a_stream_over_max_bytes_is_refused_while_reading():
    data = fixture("aiperf", "profile_export.jsonl").read_bytes()

    with pytest.raises(ReportFormatError) as caught:
        parse_report(io.BytesIO(data), filename="up.jsonl", max_bytes=len(data) - 1)

    assert "larger than the limit" in caught.value.message
    # At the limit exactly it is fine.
    report = parse_report(io.BytesIO(data), filename="up.jsonl", max_bytes=len(data))
    assert report.levels[0].conditions.requests == 24


def test_error_text_reads_file_location_message():
    error = _error("generic_nan_e2e.jsonl")

    assert str(error) == (
        "generic_nan_e2e.jsonl: line 3: e2e_ms: latency is NaN: expected a number of ms, at least 0"
    )


@pytest.mark.parametrize(
    ("encoding", "named"),
    [
        ("utf-16", "UTF-16"),  # with a byte-order mark, as PowerShell's `>` writes
        ("utf-16-le", "UTF-16"),
        ("utf-16-be", "UTF-16"),
        ("utf-32", "UTF-32"),
        ("utf-32-le", "UTF-32"),
        ("utf-32-be", "UTF-32"),
    ],
)
@pytest.mark.parametrize(
    "parts",
    [
        ("vllm", "vllm_c2_n20_detailed.json"),
        ("aiperf", "profile_export.jsonl"),
        ("generic", "requests.csv"),
    ],
)
def test_a_report_saved_as_utf16_or_utf32_is_told_to_be_saved_as_utf8(parts, encoding, named):
    data = fixture(*parts).read_text("utf-8").encode(encoding)

    with pytest.raises(ReportFormatError) as caught:
        parse_report(data, filename=parts[-1])

    assert caught.value.filename == parts[-1]
    assert caught.value.message == f"the file is {named}; save it as UTF-8"


def test_a_binary_file_is_told_that_utf8_text_is_expected():
    with pytest.raises(ReportFormatError) as caught:
        parse_report(b"\x1f\x8b\x08\x00" + bytes(range(256)), filename="report.json.gz")

    assert "expected UTF-8 text" in caught.value.message


def test_a_utf8_file_with_a_byte_order_mark_still_parses():
    data = b"\xef\xbb\xbf" + fixture("vllm", "vllm_c2_n20_detailed.json").read_bytes()

    assert parse_report(data, filename="vllm.json").tool == "vllm"
