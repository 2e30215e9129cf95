from __future__ import annotations

import csv
import math

import numpy as np
import pytest

from ledger.importers import ReportFormatError, generic

from .files import fixture, load_jsonl, parse, parse_bytes

CSV = ("generic", "requests.csv")
JSONL = ("generic", "requests.jsonl")


def _csv_rows() -> list[dict]:
    with fixture(*CSV).open() as f:
        return list(csv.DictReader(f))


def test_generic_csv_rows_are_split_into_levels_by_concurrency():
    report = parse(*CSV)

    assert (report.tool, report.format, report.variant) == ("generic", "generic", "csv")
    assert report.source == "computed"
    assert [lv.name for lv in report.levels] == ["concurrency 1", "concurrency 4"]
    first, second = (lv.conditions for lv in report.levels)
    assert (first.requests, first.successful, first.errored) == (5, 4, 1)
    assert (second.requests, second.successful, second.errored) == (7, 6, 1)
    assert second.error_rate == pytest.approx(1 / 7)


def test_generic_csv_percentiles_match_numpy_and_leave_out_failures():
    rows = [r for r in _csv_rows() if r["concurrency"] == "4" and not r["error"]]
    ttft = np.array([float(r["ttft_ms"]) for r in rows])
    e2e = np.array([float(r["e2e_ms"]) for r in rows])
    tokens = np.array([float(r["output_tokens"]) for r in rows])
    many = tokens > 1

    level = parse(*CSV).levels[1]

    assert level.ttft.p99 == np.percentile(ttft, 99)
    assert level.e2e.p90 == np.percentile(e2e, 90)
    # The one-token request has no TPOT.
    tpot = (e2e[many] - ttft[many]) / (tokens[many] - 1)
    assert level.tpot.p50 == np.percentile(tpot, 50)
    assert level.itl.p50 is None  # no itl_ms column


def test_generic_duration_and_throughput_come_from_start_s():
    level = parse(*CSV).levels[0]

    # From the first start (0.000) to the end of the last request (4.710 + 0.9259 s).
    assert level.conditions.duration_s == pytest.approx(4.710 + 0.9259)
    assert level.throughput.requests_per_s == pytest.approx(4 / (4.710 + 0.9259))
    assert level.throughput.output_tokens_per_s == pytest.approx(
        (101 + 66 + 161 + 41) / (4.710 + 0.9259)
    )


def test_generic_jsonl_uses_a_given_tpot_and_the_itl_column():
    rows = load_jsonl(*JSONL)
    level = parse(*JSONL).levels[0]

    assert level.name == "run"
    assert (level.conditions.requests, level.conditions.errored) == (6, 1)
    tpots = level.requests.tpot_ms
    assert tpots[2] == 21.0  # stated in the row
    assert tpots[0] == (1095.0 - 95.0) / 50  # computed
    assert math.isnan(tpots[3])  # the failed request
    itl = [r["itl_ms"] for r in rows if "itl_ms" in r]
    assert level.itl.p90 == np.percentile(itl, 90)


def test_generic_error_values_that_mean_success():
    level = parse(*JSONL).levels[0]

    # null, "" and false are successes; only the HTTP 429 row failed.
    assert level.requests.error.tolist() == [False, False, False, True, False, False]


def test_generic_request_rate_inf_is_an_unlimited_level():
    data = b'{"ttft_ms": 1, "e2e_ms": 5, "output_tokens": 3, "request_rate": "inf"}\n' * 3

    level = parse_bytes(data, filename="r.jsonl").levels[0]

    assert level.conditions.request_rate_unlimited is True
    assert level.conditions.request_rate is None


def test_generic_csv_without_a_required_column_names_it():
    with pytest.raises(ReportFormatError) as caught:
        parse_bytes(b"ttft_ms,e2e_ms\n1,2\n", filename="r.csv")

    assert caught.value.location == "line 1"
    assert "output_tokens" in caught.value.message


def test_generic_csv_row_cut_short_is_refused():
    data = fixture(*CSV).read_bytes() + b"120.0,900.0\n"

    with pytest.raises(ReportFormatError) as caught:
        parse_bytes(data, filename="r.csv")

    assert caught.value.location == "line 14"
    assert "expected 7 cells" in caught.value.message


def test_generic_text_where_a_number_belongs_is_refused():
    with pytest.raises(ReportFormatError) as caught:
        parse_bytes(b'{"ttft_ms": "fast", "e2e_ms": 5, "output_tokens": 3}\n' * 2, filename="r")

    assert caught.value.location == "line 1: ttft_ms"
    assert "the string 'fast'" in caught.value.message


def test_generic_format_documentation_names_every_column():
    doc = generic.__doc__

    for column in (*generic.FIELDS, "error"):
        assert f"`{column}`" in doc
