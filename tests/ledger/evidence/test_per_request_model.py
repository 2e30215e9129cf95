"""Per-request files name their model in the request bodies the tools record: another model
is refused as a summary file's is, and a file that names none is *unverified*, shown so and
not counted as current evidence of a production service (issue 27, item 3)."""

from __future__ import annotations

import json
import re

import pytest
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import SimpleUploadedFile

from ledger import queries, services
from ledger.models import LoadTestReport
from tests.ledger.evidence.conftest import fixture_path, import_file
from tests.ledger.factories import ModelAssetFactory, RevisionFactory, RuntimeFactory

GENAI_PERF = ("genai_perf", "profile_export.json")  # request_inputs.payload names gemma-3-270m
INFERENCE_PERF = ("inference_perf", "per_request_lifecycle_metrics.json")  # request names it
AIPERF = ("aiperf", "profile_export.jsonl")  # records only: no request body, no model


@pytest.fixture
def qwen(service, team):
    """kb-assistant r-n: a 7B AWQ revision on vLLM / H100, not what the samples measured."""
    return RevisionFactory(
        service=service,
        model_asset=ModelAssetFactory(
            team=team,
            name="Qwen2.5-7B-Instruct-AWQ",
            source_repository="Qwen/Qwen2.5-7B-Instruct-AWQ",
        ),
        runtime=RuntimeFactory(team=team, engine="vllm", gpu_model="H100-80GB", gpu_count=1),
    )


def _import_bytes(revision, data: bytes, name: str, **kwargs):
    return services.import_loadtest_report(
        revision,
        actor=None,
        workload="short",
        file=SimpleUploadedFile(name, data),
        filename=name,
        **kwargs,
    )


def _aiperf_with_bodies() -> bytes:
    """The AIPerf records, each with the request body AIPerf's raw export keeps (`payload`)."""
    lines = fixture_path(*AIPERF).read_bytes().splitlines()
    records = [json.loads(line) for line in lines if line.strip()]
    for record in records:
        record["payload"] = {"model": "gemma-3-270m", "messages": [], "stream": True}
    return "\n".join(json.dumps(r) for r in records).encode() + b"\n"


def _without_model(*parts: str) -> bytes:
    """The sample with every `"model": "gemma-3-270m"` (requests and responses) taken out."""
    data = fixture_path(*parts).read_bytes()
    stripped = re.sub(rb'\\"model\\": ?\\"gemma-3-270m\\", ?', b"", data)
    assert b"gemma-3-270m" not in stripped
    return stripped


# ------------------------------------------------- another model: refused, naming both


@pytest.mark.parametrize(
    ("parts", "count"),
    [(GENAI_PERF, 24), (INFERENCE_PERF, 24)],
    ids=["genai-perf", "inference-perf"],
)
def test_a_per_request_file_of_another_model_is_refused_naming_both(qwen, parts, count):
    with pytest.raises(ValidationError) as caught:
        import_file(qwen, *parts)

    message = caught.value.message_dict["accept_mismatch"][0]
    assert f"{parts[-1]} measured something other than kb-assistant {qwen.label}" in message
    assert f"model: the file says gemma-3-270m; {qwen.label} serves Qwen2.5-7B-Instruct-AWQ" in (
        message
    )
    assert not LoadTestReport.objects.exists()


def test_aiperf_records_with_request_bodies_of_another_model_are_refused(qwen):
    with pytest.raises(ValidationError) as caught:
        _import_bytes(qwen, _aiperf_with_bodies(), "profile_export.jsonl")

    message = caught.value.message_dict["accept_mismatch"][0]
    assert "model: the file says gemma-3-270m" in message
    assert "serves Qwen2.5-7B-Instruct-AWQ" in message


@pytest.mark.parametrize(
    "parts", [GENAI_PERF, INFERENCE_PERF], ids=["genai-perf", "inference-perf"]
)
def test_a_per_request_file_of_the_revisions_model_is_current(revision, parts):
    report, _ = import_file(revision, *parts)

    assert report.model_verified
    assert report.results["meta"]["model"] == "gemma-3-270m"
    status = queries.evidence_status(LoadTestReport.objects.with_context().get())
    assert (status.status, status.counts) == ("current", True)


# ------------------------------------------------- no model: unverified


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("profile_export.jsonl", lambda: fixture_path(*AIPERF).read_bytes()),
        ("profile_export.json", lambda: _without_model(*GENAI_PERF)),
        ("per_request_lifecycle_metrics.json", lambda: _without_model(*INFERENCE_PERF)),
    ],
    ids=["aiperf", "genai-perf", "inference-perf"],
)
def test_a_file_that_names_no_model_is_unverified_and_not_current_in_production(qwen, name, data):
    # Attached to a revision of another model without a word: nothing can tell.
    report, created = _import_bytes(qwen, data(), name)

    assert created and not report.model_verified and report.mismatch == {}
    status = queries.evidence_status(LoadTestReport.objects.with_context().get())
    assert status.status == "unverified"
    assert not status.counts
    assert status.reason == (
        f"the file names no model, so nothing checked that it measured {qwen.label}; "
        "production services count only evidence that names its model"
    )
    assert queries.current_reports(qwen) == []
    assert not queries.has_current_report(qwen)


def test_unverified_evidence_counts_below_production(qwen, service):
    services.update_service(service, actor=None, tier="internal")
    _import_bytes(qwen, fixture_path(*AIPERF).read_bytes(), "profile_export.jsonl")

    status = queries.evidence_status(LoadTestReport.objects.with_context().get())
    assert (status.status, status.counts) == ("unverified", True)
    assert "internal services count it all the same" in status.reason
    assert len(queries.current_reports(qwen)) == 1


def test_the_api_says_unverified(client, owner, qwen):
    report, _ = _import_bytes(qwen, fixture_path(*AIPERF).read_bytes(), "profile_export.jsonl")
    client.force_login(owner)

    data = client.get(f"/api/loadtests/{report.pk}/").json()

    assert data["status"] == "unverified"
    assert data["model_verified"] is False
    assert data["counts_as_current"] is False
    assert data["status_reason"].startswith("the file names no model")
