"""Evidence for another model, engine or GPU: refused, or attached with a recorded reason and
marked mismatched wherever it is shown (the verb, the pages, the API, the command)."""

from __future__ import annotations

import io
import json
from decimal import Decimal
from html import unescape

import pytest
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError
from rest_framework.authtoken.models import Token

from ledger import queries, services
from ledger.models import Event, LoadTestReport
from tests.ledger.evidence.conftest import fixture_path, import_file
from tests.ledger.factories import (
    ModelAssetFactory,
    RevisionFactory,
    RuntimeFactory,
    ServiceFactory,
)

VLLM = ("vllm", "vllm_c2_n20_detailed.json")  # model_id gemma-3-270m, server llama-cpp-python
GUIDELLM = ("guidellm", "concurrency2", "benchmarks.json")  # model gemma-3-270m
REASON = "measured on a different model — the 270M stand-in, to compare the formats"


@pytest.fixture
def qwen(team):
    """dataagent-sql r1: Qwen2.5-7B-Instruct on vLLM, 1 x H100: not what the samples measured."""
    service = ServiceFactory(
        slug="dataagent-sql",
        team=team,
        tier="production",
        slo_ttft_p95_ms=800,
        slo_ttft_p99_ms=1500,
        slo_tpot_ms=30,
        slo_error_rate_pct=Decimal("1.00"),
    )
    return RevisionFactory(
        service=service,
        model_asset=ModelAssetFactory(
            team=team, name="Qwen2.5-7B-Instruct", source_repository="Qwen/Qwen2.5-7B-Instruct"
        ),
        runtime=RuntimeFactory(team=team, name="vllm-h100", gpu_model="H100-80GB", gpu_count=1),
    )


def _file(*parts: str) -> SimpleUploadedFile:
    path = fixture_path(*parts)
    return SimpleUploadedFile(path.name, path.read_bytes())


# ---------------------------------------------------------------- the verb


def test_a_report_of_another_model_and_engine_is_refused_naming_both_sides(qwen):
    with pytest.raises(ValidationError) as caught:
        import_file(qwen, *VLLM)

    message = caught.value.message_dict["accept_mismatch"][0]
    assert "vllm_c2_n20_detailed.json measured something other than dataagent-sql r1" in message
    assert "model: the file says gemma-3-270m; r1 serves Qwen2.5-7B-Instruct" in message
    assert "engine: the file says llama-cpp-python-0.3.36 (llama.cpp); r1 runs on vLLM" in message
    assert not LoadTestReport.objects.exists()
    assert not Event.objects.filter(action="loadtest_report.imported").exists()


def test_a_report_of_the_revisions_model_is_attached_as_current(revision):
    report, created = import_file(revision, *VLLM)

    assert created and report.mismatch == {}
    assert queries.evidence_status(LoadTestReport.objects.with_context().get()).status == "current"
    assert queries.mismatched_reports(revision) == []


def test_with_a_reason_it_is_attached_marked_mismatched_and_the_reason_is_in_the_event(qwen):
    report, created = import_file(qwen, *GUIDELLM, accept_mismatch=f"  {REASON} ")

    assert created
    assert report.mismatch == {
        "fields": ["model"],
        "reason": REASON,
        "differences": [
            {"field": "model", "file": "gemma-3-270m", "revision": "Qwen2.5-7B-Instruct"}
        ],
    }
    event = Event.objects.get(action="loadtest_report.imported")
    assert event.payload_data["mismatch"] == report.mismatch
    status = queries.evidence_status(LoadTestReport.objects.with_context().get())
    assert status.status == "mismatched"
    assert "measured on a different model (model: the file says gemma-3-270m" in status.reason
    assert REASON in status.reason
    # Release gates: never current, and listed for them to name.
    assert queries.current_reports(qwen) == []
    assert not queries.has_current_report(qwen)
    assert queries.mismatched_reports(qwen) == [report]


def test_a_blank_or_control_character_reason_is_not_a_reason(qwen):
    for reason in ("   ", "ok\x00"):
        with pytest.raises(ValidationError) as caught:
            import_file(qwen, *GUIDELLM, accept_mismatch=reason)
        assert "accept_mismatch" in caught.value.message_dict
    assert not LoadTestReport.objects.exists()


def test_the_slo_matrix_marks_a_mismatched_report(qwen):
    import_file(qwen, *GUIDELLM, accept_mismatch=REASON)

    matrix = queries.slo_matrix(qwen.service)
    row = next(r for r in matrix["revisions"][0]["rows"] if r["workload"] == "short")
    assert row["status"].status == "mismatched"
    assert {cell["word"] for cell in row["cells"]} == {"mismatched"}


# ---------------------------------------------------------------- pages


def test_the_preview_shows_what_the_file_measured_against_the_revision(client, owner, qwen):
    client.force_login(owner)

    response = client.post(
        "/services/dataagent-sql/r1/loadtests/preview",
        {"workload": "short", "file": _file(*VLLM)},
        HTTP_HX_REQUEST="true",
    )

    page = unescape(response.content.decode())
    assert "<code>gemma-3-270m</code>" in page
    assert "r1 serves Qwen2.5-7B-Instruct or Qwen/Qwen2.5-7B-Instruct" in page
    assert "<code>llama-cpp-python-0.3.36</code>" in page
    assert "r1 runs vLLM" in page
    assert 'id="mismatch-warning"' in page
    assert 'name="accept_mismatch"' in page
    assert not LoadTestReport.objects.exists()


def test_a_matching_preview_has_no_mismatch_and_no_reason_field(client, owner, revision):
    client.force_login(owner)

    response = client.post(
        "/services/kb-assistant/r1/loadtests/preview",
        {"workload": "short", "file": _file(*VLLM)},
        HTTP_HX_REQUEST="true",
    )

    page = response.content.decode()
    assert "<code>gemma-3-270m</code>" in page
    assert 'id="mismatch-warning"' not in page
    assert 'name="accept_mismatch"' not in page


def test_saving_a_mismatch_is_refused_on_the_form_then_accepted_with_a_reason(client, owner, qwen):
    client.force_login(owner)
    url = "/services/dataagent-sql/r1/loadtests/new"

    refused = client.post(url, {"workload": "short", "file": _file(*VLLM)})

    assert refused.status_code == 200
    page = unescape(refused.content.decode())
    assert "measured something other than dataagent-sql r1" in page
    assert 'id="field-accept_mismatch"' in page
    assert not LoadTestReport.objects.exists()

    saved = client.post(url, {"workload": "short", "file": _file(*VLLM), "accept_mismatch": REASON})

    report = LoadTestReport.objects.get()
    assert saved.status_code == 302
    assert report.mismatch["reason"] == REASON
    detail = unescape(client.get(saved["Location"]).content.decode())
    assert '<span class="badge bad">mismatched</span>' in detail
    assert 'id="mismatch-notice"' in detail
    assert f"Attached anyway because: {REASON}" in detail
    revision_page = unescape(client.get("/services/dataagent-sql/r1/").content.decode())
    assert '<span class="badge bad">mismatched</span>' in revision_page


# ---------------------------------------------------------------- API


@pytest.fixture
def ci(client, owner):
    token = Token.objects.create(user=owner)
    client.defaults["HTTP_AUTHORIZATION"] = f"Token {token.key}"
    return client


def test_the_api_refuses_a_mismatch_and_accepts_it_with_a_reason(ci, qwen):
    url = f"/api/revisions/{qwen.pk}/loadtests/"

    refused = ci.post(url, {"workload": "short", "file": _file(*VLLM)})

    assert refused.status_code == 400
    assert "the file says gemma-3-270m" in refused.json()["accept_mismatch"][0]

    accepted = ci.post(url, {"workload": "short", "file": _file(*VLLM), "accept_mismatch": REASON})

    body = accepted.json()
    assert accepted.status_code == 201, body
    assert body["status"] == "mismatched"
    assert body["mismatch"]["fields"] == ["model", "engine"]
    assert body["mismatch"]["reason"] == REASON
    listed = ci.get(f"/api/loadtests/?revision={qwen.pk}").json()
    rows = listed["results"] if isinstance(listed, dict) else listed
    assert [(r["status"], r["mismatch"]["reason"]) for r in rows] == [("mismatched", REASON)]


def test_a_matching_report_has_no_mismatch_in_the_api(ci, revision):
    response = ci.post(
        f"/api/revisions/{revision.pk}/loadtests/", {"workload": "short", "file": _file(*VLLM)}
    )

    assert response.status_code == 201
    assert response.json()["mismatch"] is None


# ---------------------------------------------------------------- the command


def _run(*args: str) -> dict:
    out = io.StringIO()
    call_command("import_loadtest", *args, stdout=out, stderr=io.StringIO())
    return json.loads(out.getvalue())


def test_the_command_refuses_a_mismatch_naming_both_sides(qwen):
    path = str(fixture_path(*VLLM))

    with pytest.raises(CommandError) as caught:
        _run("--revision", str(qwen.pk), "--workload", "short", path)

    message = str(caught.value)
    assert message.startswith("accept_mismatch: vllm_c2_n20_detailed.json measured something")
    assert "the file says gemma-3-270m; r1 serves Qwen2.5-7B-Instruct" in message
    assert "r1 runs on vLLM" in message
    assert not LoadTestReport.objects.exists()


def test_the_command_exits_non_zero_on_a_mismatch(qwen, capfd):
    from django.core.management import ManagementUtility

    utility = ManagementUtility(
        [
            "manage.py",
            "import_loadtest",
            "--revision",
            str(qwen.pk),
            "--workload",
            "short",
            str(fixture_path(*VLLM)),
        ]
    )
    with pytest.raises(SystemExit) as exited:
        utility.execute()

    assert exited.value.code != 0
    assert "the file says gemma-3-270m" in capfd.readouterr().err


def test_the_command_attaches_a_mismatch_with_accept_mismatch(qwen):
    path = str(fixture_path(*VLLM))

    data = _run(
        "--revision", str(qwen.pk), "--workload", "short", "--accept-mismatch", REASON, path
    )

    assert data["created"] is True
    assert data["report"]["status"] == "mismatched"
    assert data["report"]["mismatch"]["reason"] == REASON


def test_a_dry_run_names_the_mismatch_and_writes_nothing(qwen):
    data = _run(
        "--revision",
        str(qwen.pk),
        "--workload",
        "short",
        "--dry-run",
        str(fixture_path(*VLLM)),
    )

    assert [d["field"] for d in data["mismatch"]] == ["model", "engine"]
    assert not LoadTestReport.objects.exists()


def test_services_verb_signature_takes_the_reason():
    import inspect

    assert "accept_mismatch" in inspect.signature(services.import_loadtest_report).parameters
