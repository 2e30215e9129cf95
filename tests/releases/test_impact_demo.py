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


def test_a_dataagent_sql_change_is_suggested_riskier_than_the_same_on_the_summarizer():
    from ledger.models import Service
    from releases.governance.forms.release import ReleaseForm

    def suggested(slug: str, **initial) -> str | None:
        service = Service.objects.get(slug=slug)
        form = ReleaseForm(service=service, initial={"change_kind": "launch_parameters", **initial})
        return form.suggested_risk()

    # A new release names the service's own task types: sql and tool-use there.
    assert suggested("dataagent-sql") == "high"
    # Without them the same change on the same service is a step lower: the step is sql's.
    assert suggested("dataagent-sql", impact_task_types=[]) == "medium"
    # The summarizer's summaries may degrade (to the async queue): no step.
    assert suggested("support-summarizer") == "low"
    assert suggested("support-summarizer", impact_task_types=[]) == "low"
