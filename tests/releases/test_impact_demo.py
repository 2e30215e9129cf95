"""The diff-to-impact table on the demo's real revision pairs (issue 34, item 1)."""

from __future__ import annotations

import pytest

from ledger import queries as ledger_queries
from ledger.models import Revision
from releases.governance.impact import suggested_systems

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("demo_world")]


def test_the_demos_int4_awq_switch_suggests_eval():
    live = Revision.objects.with_parts().get(service__slug="dataagent-sql", number=1)
    awq = Revision.objects.with_parts().get(service__slug="dataagent-sql", number=2)
    suggested = suggested_systems(ledger_queries.revision_diff(live, awq))
    assert "eval" in suggested
    assert {"quantization", "weights_digest"} <= set(suggested["eval"])
    # The AWQ runtime runs with another gateway policy version: its reviewers are named.
    assert {"security", "cost_view", "trace"} <= set(suggested)
    assert "front_end" not in suggested
