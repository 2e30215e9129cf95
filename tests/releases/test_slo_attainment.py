"""SLO attainment is judged once (`ledger.queries.SLO_CHECKS`): the release's
`load_evidence` gate and the service page's SLO matrix read the same columns and compare
them the same way, so on any evidence a metric the matrix calls breached is one the gate
names as exceeding the SLO, and the other way round."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import transaction
from django.utils import timezone

from ledger import queries as ledger_queries
from releases.governance import gates
from tests.releases.factories import report

pytestmark = pytest.mark.django_db

# The gate's words for each matrix column (the SLOs of `build_world`: p95 TTFT 800 ms,
# p99 TTFT 1500 ms, TPOT 30 ms, error rate 1 %).
GATE_LABELS = {
    "ttft_p95": "p95 TTFT",
    "ttft_p99": "p99 TTFT",
    "tpot_p95": "p95 TPOT",
    "error_rate": "error rate",
}
CASES = [
    {},
    {"ttft_p95_ms": 800.0, "ttft_p99_ms": 1500.0, "tpot_p95_ms": 30.0, "error_rate": 0.01},
    {"ttft_p95_ms": 800.5},
    {"ttft_p99_ms": 1501.0, "tpot_p95_ms": 30.01},
    {"error_rate": 0.0101},
    {"ttft_p95_ms": 2400.0, "ttft_p99_ms": 4000.0, "tpot_p95_ms": 90.0, "error_rate": 0.2},
    {"tpot_p95_ms": None},
]


def test_the_gate_and_the_matrix_agree_on_each_metric(world, release):
    seen: set[str] = set()
    for step, columns in enumerate(CASES):
        with transaction.atomic():
            # The newest current report of the class is the one both read.
            report(
                world.candidate,
                "short",
                measured_at=timezone.now() + dt.timedelta(seconds=step + 1),
                **columns,
            )
            verdict = gates.assess(release).gate("load_evidence")
            assert verdict is not None
            matrix = ledger_queries.slo_matrix(world.service)
            transaction.set_rollback(True)
        (candidate,) = [b for b in matrix["revisions"] if b["revision"] == world.candidate]
        (row,) = [r for r in candidate["rows"] if r["workload"] == "short"]
        words = {cell["metric"]: cell["word"] for cell in row["cells"]}
        for key, label in GATE_LABELS.items():
            exceeds = f"{label} " in verdict["reason"] and "under short exceeds" in next(
                (p for p in verdict["reason"].split("; ") if p.startswith(f"{label} ")), ""
            )
            unmeasured = f"{label} under short not measured" in verdict["reason"]
            assert (words[key] == "breached") == exceeds, (columns, key, verdict["reason"])
            assert (words[key] == "no evidence") == unmeasured, (columns, key)
            seen.add(words[key])
        assert (verdict["status"] == "pass") == all(
            word == "met" for key, word in words.items() if key in GATE_LABELS
        ), (columns, verdict["reason"])
    assert seen == {"met", "breached", "no evidence"}
