"""Evidence whose file names no model does not satisfy a production release's load_evidence
gate, and the gate says why; the evidence page shows it unverified (issue 27, item 3)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from ledger.models import LoadTestReport
from releases.governance import gates
from tests.ledger.evidence.conftest import import_file
from tests.releases.factories import build_world, file_release

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(team):
    # The candidate serves what the sample files measured: gemma-3-270m on llama.cpp.
    return build_world(team, sample_candidate=True)


def _load_evidence(release) -> tuple[str, str]:
    result = gates.assess(release).gate("load_evidence")
    assert result is not None
    return result["status"], result["reason"]


def test_an_unverified_report_does_not_satisfy_the_production_gate(world, owner):
    LoadTestReport.objects.filter(pk=world.reports["short"].pk).delete()
    # AIPerf's records file: per-request timings, no request bodies, no model.
    unverified, _ = import_file(world.candidate, "aiperf", "profile_export.jsonl")
    release = file_release(world, owner)

    status, reason = _load_evidence(release)

    assert status == "fail"
    assert (
        f"the only short report (#{unverified.pk}) is unverified: the file names no model, "
        f"so nothing checked that it measured {world.candidate.label}; production services "
        "count only evidence that names its model"
    ) in reason


def test_the_same_run_with_its_request_bodies_counts(world, owner):
    LoadTestReport.objects.filter(pk=world.reports["short"].pk).delete()
    # GenAI-Perf's per-request export: every request body names gemma-3-270m.
    named, _ = import_file(world.candidate, "genai_perf", "profile_export.json")
    release = file_release(world, owner)

    _, reason = _load_evidence(release)

    assert "unverified" not in reason
    assert "no current load-test report for short" not in reason
    assert named.model_verified


def test_the_evidence_pages_show_unverified(client, world, owner):
    report, _ = import_file(world.candidate, "aiperf", "profile_export.jsonl", workload="batch")
    client.force_login(owner)
    base = f"/services/{world.service.slug}/r{world.candidate.number}/"

    listing = client.get(base).content.decode()
    row = listing.split(f'id="report-{report.pk}"', 1)[1].split("</tr>", 1)[0]
    assert "unverified" in row
    assert "the file names no model" in row

    page = client.get(
        reverse(
            "ledger:loadtest_detail",
            args=[world.service.slug, world.candidate.number, report.pk],
        )
    )
    assert page.status_code == 200
    text = page.content.decode()
    assert 'id="unverified-notice"' in text
    assert "Production release gates do not count it as current" in text
