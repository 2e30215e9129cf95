"""The sum rule over any rows (hypothesis): totals taken from the rows are their sums,
and a total off by any amount is refused naming both numbers."""

from __future__ import annotations

import datetime as dt

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger import services
from ledger.services.run_evidence import SUMMED_COUNTS
from tests.ledger.run_evidence.conftest import TASK_TYPES, TENANTS

pytestmark = pytest.mark.django_db

YESTERDAY = timezone.now().astimezone(dt.UTC).date() - dt.timedelta(days=1)
COUNT = st.integers(min_value=0, max_value=10**12)

row_counts = st.fixed_dictionaries(
    {
        "requests": COUNT,
        "input_tokens": COUNT,
        "output_tokens": COUNT,
        "rate_limit_hits": COUNT,
        "timeouts": COUNT,
        "retries": COUNT,
        "returned_by_humans": COUNT,
        "error_counts": st.dictionaries(
            st.sampled_from(["400", "429", "503", "context_length_exceeded"]),
            st.integers(min_value=0, max_value=10**6),
            max_size=3,
        ),
    }
)


def _rows(counts: list[dict]) -> list[dict]:
    rows = []
    for index, row in enumerate(counts):
        failed = sum(row["error_counts"].values())
        rows.append(
            {
                **row,
                "requests": row["requests"] + failed,
                "tenant": TENANTS[index % len(TENANTS)],
                "task_type": TASK_TYPES[index % len(TASK_TYPES)],
                "backend": f"b{index}",
            }
        )
    return rows


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    counts=st.lists(row_counts, min_size=1, max_size=12),
    field=st.sampled_from(SUMMED_COUNTS),
    delta=st.integers(min_value=-(10**6), max_value=10**6).filter(bool),
)
def test_totals_are_the_rows_sums_and_nothing_else(service, live, counts, field, delta):
    rows = _rows(counts)
    summed = {name: sum(row[name] for row in rows) for name in SUMMED_COUNTS}
    codes: dict[str, int] = {}
    for row in rows:
        for code, count in row["error_counts"].items():
            codes[code] = codes.get(code, 0) + count

    summary, _ = services.record_run_summary(service, actor=None, date=YESTERDAY, breakdown=rows)

    assert {name: getattr(summary, name) for name in SUMMED_COUNTS} == summed
    assert summary.error_counts == dict(sorted(codes.items()))
    assert summary.breakdown.count() == len(rows)

    wrong = summed[field] + delta
    if wrong < 0:
        return
    with pytest.raises(ValidationError) as caught:
        services.record_run_summary(
            service, actor=None, date=YESTERDAY, breakdown=rows, **{**summed, field: wrong}
        )
    # The wrong total is named with both numbers; a total that also breaks another rule
    # (requests set below the failed requests the rows count) is refused for that too.
    assert caught.value.message_dict[field] == [
        f"{field} is {wrong} but the breakdown rows add up to {summed[field]}."
    ]
    assert set(caught.value.message_dict) <= {field, "error_counts"}
