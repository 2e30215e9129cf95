"""Generic per-request format
==========================

For tools the ledger does not read natively: write one row per request, as CSV
(a header row, then one row per request) or as JSON Lines (one JSON object per
line, keys as below). Percentiles are computed by the ledger from the rows.

| column          | required            | meaning                                                 |
|-----------------|---------------------|---------------------------------------------------------|
| `e2e_ms`        | yes (the column)    | end-to-end latency: request sent to last byte, in ms    |
| `ttft_ms`       | yes (the column)    | time to first token in ms; empty when not streamed      |
| `output_tokens` | yes (the column)    | tokens generated (a whole number)                       |
| `tpot_ms`       | no                  | time per output token after the first, in ms            |
| `itl_ms`        | no                  | the request's mean gap between streamed chunks, in ms   |
| `input_tokens`  | no                  | prompt tokens                                           |
| `error`         | no                  | empty for a success; any other text marks a failure     |
| `start_s`       | no                  | when the request was sent, in seconds on any clock      |
| `concurrency`   | no                  | the load level the row belongs to: concurrent requests  |
| `request_rate`  | no                  | the load level as a rate in requests/s; `inf` unlimited |
| `model`         | no                  | the model the request asked for, as in its body         |

Rules:

- Latencies are milliseconds, token counts tokens; `.` is the decimal point,
  no thousands separators. Other columns are ignored. UTF-8 (a BOM is fine).
- A successful row needs `e2e_ms` and `output_tokens`; its latencies must be
  numbers of at least 0 (NaN and negative values are refused, naming the line
  and column). A failed row is counted as an error and its other values are
  ignored; failed requests never enter a percentile.
- `error`: in CSV, an empty cell, `0`, `false`, `no`, `none` or `null` mean
  success; in JSON Lines, `null`, `false`, `0` and `""` do. Anything else (a
  message, an HTTP status, `true`) marks the request as failed.
- TPOT is `tpot_ms` when given, else (e2e_ms - ttft_ms) / (output_tokens - 1)
  for requests with more than one output token.
- ITL statistics are over the requests' `itl_ms` values (one per request), and
  empty without that column.
- With `start_s`, the run's duration is from the first start to the last
  (start + e2e), and throughput (requests/s, output and total tokens/s) is
  computed from it; without it there is no duration and no throughput.
- Rows with different `concurrency` / `request_rate` values are separate load
  levels (a sweep in one file), in the order they first appear.
- In JSON Lines a missing key is the same as `null`, and `request_rate` may be
  the string `"inf"`.
- `model` is compared with the revision the file is attached to (another
  model is refused); a file that names no model is attached as *unverified*,
  which production release gates do not count.

Example (CSV):

    ttft_ms,e2e_ms,output_tokens,input_tokens,error,start_s,concurrency
    182.4,1403.9,128,512,,0.000,8
    0,0,0,512,HTTP 503,0.012,8
"""

from __future__ import annotations

import csv
import math
from typing import Any

import orjson

from .fields import describe
from .report import Conditions, Level, ParsedReport
from .request_models import RequestModels
from .source import Probe, Source, loads
from .stats import RequestColumns, level_name

NAME = "generic"
EXPECTED = "a CSV or JSON Lines file of per-request rows with ttft_ms, e2e_ms, output_tokens"

# The order values travel in, after parsing.
FIELDS = (
    "ttft_ms",
    "e2e_ms",
    "output_tokens",
    "tpot_ms",
    "itl_ms",
    "input_tokens",
    "start_s",
    "concurrency",
    "request_rate",
)
REQUIRED_COLUMNS = ("ttft_ms", "e2e_ms", "output_tokens")
_CSV_OK = frozenset({"", "0", "false", "no", "none", "null"})


def detect(probe: Probe) -> str | None:
    if probe.kind == "csv" and probe.header and "e2e_ms" in probe.header:
        return "csv"
    record = probe.record()
    if record is not None and "e2e_ms" in record:
        return "jsonl"
    return None


def parse(probe: Probe, variant: str) -> ParsedReport:
    collector = _Collector(probe.source, csv_style=variant == "csv")
    if variant == "csv":
        _read_csv(probe.source, collector)
    else:
        _read_jsonl(probe.source, collector)
    levels = collector.levels()
    return ParsedReport(
        filename=probe.source.filename,
        tool="generic",
        format=NAME,
        variant=variant,
        source="computed",
        levels=levels,
        meta=collector.models.meta(),
        warnings=collector.models.warnings(),
    )


class _Collector:
    """Rows into per-level columns, checking each successful row."""

    def __init__(self, source: Source, *, csv_style: bool) -> None:
        self.source = source
        self.csv_style = csv_style
        self.by_level: dict[tuple[float | None, float | None], RequestColumns] = {}
        self.models = RequestModels()

    def error(self, line: int, key: str, message: str) -> Exception:
        where = f"line {line}, column {key}" if self.csv_style else f"line {line}: {key}"
        return self.source.error(where, message)

    def add(self, line: int, failed: bool, values: list[float | None]) -> None:
        ttft, e2e, out, tpot, itl, inp, start, concurrency, rate = values
        key = (concurrency, rate)
        columns = self.by_level.get(key)
        if columns is None:
            columns = self.by_level[key] = RequestColumns(to_ms=1.0)
        if failed:
            columns.add(True, math.nan, math.nan, math.nan, math.nan)
            if start is not None:
                columns.span(start, start)
            return
        if e2e is None:
            raise self.error(line, "e2e_ms", "required for a successful request: expected ms")
        if out is None:
            raise self.error(line, "output_tokens", "required for a successful request")
        for name, value in (("e2e_ms", e2e), ("ttft_ms", ttft), ("tpot_ms", tpot), ("itl_ms", itl)):
            if value is not None and not 0 <= value < math.inf:
                raise self.error(line, name, _bad_latency(value))
        if not out >= 0:
            raise self.error(line, "output_tokens", f"expected a count of at least 0, found {out}")
        columns.add(
            False,
            math.nan if ttft is None else ttft,
            e2e,
            out,
            math.nan if inp is None else inp,
            math.nan if tpot is None else tpot,
        )
        if itl is not None:
            columns.itl.append(itl)
        if start is not None:
            columns.span(start, start + e2e / 1000.0)

    def levels(self) -> list[Level]:
        if not self.by_level:
            raise self.source.error(None, "no request rows: expected one row per request")
        levels = []
        for (concurrency, rate), columns in self.by_level.items():
            cond = Conditions(concurrency=concurrency)
            if rate is not None and math.isinf(rate):
                cond.request_rate_unlimited = True
            else:
                cond.request_rate = rate
            levels.append(columns.level(level_name(cond), cond))
        return levels


def _bad_latency(value: float) -> str:
    if math.isnan(value):
        return "latency is NaN: expected a number of ms, at least 0"
    if math.isinf(value):
        return "latency is infinite: expected a finite number of ms"
    return f"latency is negative ({value!r}): expected at least 0"


def _read_csv(source: Source, collector: _Collector) -> None:
    reader = csv.reader(source.text_lines())
    header = [cell.strip() for cell in next(reader, [])]
    missing = [name for name in REQUIRED_COLUMNS if name not in header]
    if missing:
        raise source.error(
            "line 1",
            f"missing column {', '.join(missing)}: expected {', '.join(REQUIRED_COLUMNS)}",
        )
    index = {name: i for i, name in reversed(list(enumerate(header)))}
    positions = [(name, index.get(name)) for name in FIELDS]
    error_at = index.get("error")
    model_at = index.get("model")
    width = len(header)
    for cells in reader:
        line = reader.line_num
        if len(cells) != width:
            if not any(c.strip() for c in cells):
                continue
            raise source.error(
                f"line {line}", f"expected {width} cells as in the header, found {len(cells)}"
            )
        failed = error_at is not None and cells[error_at].strip().lower() not in _CSV_OK
        if model_at is not None:
            collector.models.add_name(cells[model_at])
        values: list[float | None] = []
        for name, at in positions:
            text = cells[at].strip() if at is not None else ""
            if not text:
                values.append(None)
                continue
            try:
                values.append(float(text))
            except ValueError:
                if failed:
                    values.append(None)
                    continue
                raise collector.error(line, name, f"expected a number, found {text!r}") from None
        collector.add(line, failed, values)


def _read_jsonl(source: Source, collector: _Collector) -> None:
    parse_line = orjson.loads
    for line, raw in source.lines():
        if not raw.strip():
            continue
        try:
            row = parse_line(raw)
        except orjson.JSONDecodeError:
            row = loads(raw, source, line=line)  # NaN/Infinity, or a precise error
        if type(row) is not dict:
            raise source.error(f"line {line}", f"expected a JSON object, found {describe(row)}")
        collector.models.add_name(row.get("model"))
        error = row.get("error")
        failed = not (error is None or error is False or error == 0 or error == "")
        values: list[float | None] = []
        for name in FIELDS:
            value: Any = row.get(name)
            kind = type(value)
            if kind is float or kind is int:
                values.append(value)
            elif value is None:
                values.append(None)
            elif name == "request_rate" and value == "inf":
                values.append(math.inf)
            elif failed:
                values.append(None)
            else:
                raise collector.error(line, name, f"expected a number, found {describe(value)}")
        collector.add(line, failed, values)
