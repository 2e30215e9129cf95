"""Load-test evidence over REST: CI uploads (multipart), lists and details with current/stale."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone
from rest_framework.authtoken.models import Token

from ledger.models import Event, LoadTestReport
from tests.ledger.evidence.conftest import fixture_path, import_file
from tests.ledger.factories import RevisionFactory, ServiceFactory


def _url(revision) -> str:
    return f"/api/revisions/{revision.pk}/loadtests/"


def _file(*parts: str, content: bytes | None = None) -> SimpleUploadedFile:
    path = fixture_path(*parts)
    return SimpleUploadedFile(path.name, path.read_bytes() if content is None else content)


def _post(client, revision, *parts: str, workload: str = "short", **extra):
    body = {"workload": workload, "file": _file(*parts), **extra}
    return client.post(_url(revision), body)  # multipart, as CI tools send it


@pytest.fixture
def ci(client, owner):
    """A CI pipeline authenticating with the model owner's token."""
    token = Token.objects.create(user=owner)
    client.defaults["HTTP_AUTHORIZATION"] = f"Token {token.key}"
    return client


# ---------------------------------------------------------------- uploads


def test_ci_uploads_a_report_and_gets_the_parsed_summary(ci, revision, owner):
    response = _post(ci, revision, "guidellm", "rate-sweep", "benchmarks.json", workload="batch")

    assert response.status_code == 201, response.content
    data = response.json()
    report = LoadTestReport.objects.get()
    assert data["id"] == report.pk
    assert data["service"] == "kb-assistant"
    assert data["revision"] == revision.pk
    assert data["revision_label"] == "r1"
    assert data["workload"] == "batch"
    assert (data["status"], data["status_reason"]) == ("current", "")
    assert data["tool"] == "guidellm"
    assert data["tool_version"] == "0.8.1"
    assert data["uploaded_by"] == "olivia"
    assert data["raw_sha256"] == report.raw_sha256
    assert len(data["results"]["levels"]) == 3
    assert data["capacity"]["level"] == "constant@1.00"
    assert data["goodput_now"] == {"value": 1.0, "reason": ""}
    assert report.uploaded_by == owner


def test_uploading_the_same_file_again_answers_200_with_the_existing_report(ci, revision):
    first = _post(ci, revision, "vllm", "vllm_c2_n20_detailed.json")
    events = Event.objects.count()

    again = _post(ci, revision, "vllm", "vllm_c2_n20_detailed.json")

    assert first.status_code == 201
    assert again.status_code == 200
    assert again.json()["id"] == first.json()["id"]
    assert Event.objects.count() == events
    assert LoadTestReport.objects.count() == 1


def test_the_format_can_be_forced(ci, revision):
    response = _post(ci, revision, "vllm", "vllm_c2_n20_detailed.json", format="guidellm")

    assert response.status_code == 400
    assert "not a guidellm report" in response.json()["file"][0]


def test_a_bad_file_answers_400_naming_the_file_and_the_location(ci, revision):
    response = _post(ci, revision, "broken", "guidellm_missing_request_latency.json")

    assert response.status_code == 400
    (message,) = response.json()["file"]
    assert message.startswith(
        "guidellm_missing_request_latency.json: benchmarks[0].requests.successful[3].request_latency"
    )
    assert LoadTestReport.objects.count() == 0


def test_an_empty_file_answers_400_by_name(ci, revision):
    response = _post(ci, revision, "broken", "empty.json")

    assert response.status_code == 400
    assert response.json() == {"file": ["empty.json: the file is empty"]}


def test_a_report_saved_as_utf16_answers_400_asking_for_utf8(ci, revision):
    utf16 = fixture_path("vllm", "vllm_c2_n20_detailed.json").read_text("utf-8").encode("utf-16")

    response = ci.post(
        _url(revision),
        {"workload": "short", "file": _file("vllm", "vllm_c2_n20_detailed.json", content=utf16)},
    )

    assert response.status_code == 400
    assert response.json() == {
        "file": ["vllm_c2_n20_detailed.json: the file is UTF-16; save it as UTF-8"]
    }
    assert LoadTestReport.objects.count() == 0


def test_an_unknown_workload_answers_400_on_that_field(ci, revision):
    response = _post(ci, revision, "vllm", "vllm_c2_n20_detailed.json", workload="huge")

    assert response.status_code == 400
    assert list(response.json()) == ["workload"]


def test_a_file_over_the_limit_answers_413_with_the_limit(ci, revision, settings):
    settings.LOADTEST_MAX_UPLOAD_BYTES = 4096

    response = _post(ci, revision, "vllm", "vllm_c2_n20_detailed.json")

    assert response.status_code == 413
    (message,) = response.json()["file"]
    assert message.startswith(
        "vllm_c2_n20_detailed.json: the file is 19,553 bytes; the limit is 4,096 bytes"
    )
    assert LoadTestReport.objects.count() == 0


def test_an_unknown_revision_answers_404(ci, revision):
    response = ci.post(
        "/api/revisions/999999/loadtests/",
        {"workload": "short", "file": _file("vllm", "vllm_c2_n20_detailed.json")},
    )

    assert response.status_code == 404


def test_anonymous_upload_answers_401(client, revision):
    response = _post(client, revision, "vllm", "vllm_c2_n20_detailed.json")

    assert response.status_code == 401
    assert LoadTestReport.objects.count() == 0


@pytest.mark.parametrize("who", ["auditor", "outsider"])
def test_auditors_and_outsiders_cannot_upload(client, revision, request, who):
    client.force_login(request.getfixturevalue(who))

    response = _post(client, revision, "vllm", "vllm_c2_n20_detailed.json")

    assert response.status_code == 403
    assert "kb-team" in response.json()["detail"]
    assert LoadTestReport.objects.count() == 0


def test_upload_is_documented_as_multipart(ci):
    schema = ci.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()

    operation = schema["paths"]["/api/revisions/{revision_id}/loadtests/"]["post"]
    body = operation["requestBody"]["content"]
    assert list(body) == ["multipart/form-data"]
    ref = body["multipart/form-data"]["schema"]["$ref"].rsplit("/", 1)[-1]
    properties = schema["components"]["schemas"][ref]["properties"]
    assert properties["file"]["format"] == "binary"
    assert set(properties) == {
        "workload",
        "file",
        "format",
        "measured_at",
        "accept_mismatch",
        "metrics_before",
        "metrics_after",
    }
    assert properties["metrics_after"]["format"] == "binary"
    assert {"200", "201", "400", "403", "413"} <= set(operation["responses"])


# ---------------------------------------------------------------- reading


def test_anyone_signed_in_reads_the_list_filtered_by_service_revision_and_workload(
    client, auditor, revision, service, team
):
    other_service = ServiceFactory(slug="dataagent-sql", team=team)
    other = RevisionFactory(service=other_service)
    short, _ = import_file(revision, "vllm", "vllm_c2_n20_detailed.json", workload="short")
    batch, _ = import_file(revision, "guidellm", "rate-sweep", "benchmarks.json", workload="batch")
    elsewhere, _ = import_file(other, "aiperf", "profile_export.jsonl", workload="short")
    client.force_login(auditor)

    def ids(query: str) -> set[int]:
        response = client.get(f"/api/loadtests/{query}")
        assert response.status_code == 200
        return {item["id"] for item in response.json()["results"]}

    assert ids("") == {short.pk, batch.pk, elsewhere.pk}
    assert ids("?service=kb-assistant") == {short.pk, batch.pk}
    assert ids(f"?revision={other.pk}") == {elsewhere.pk}
    assert ids("?workload=short") == {short.pk, elsewhere.pk}
    assert ids("?service=kb-assistant&workload=batch") == {batch.pk}
    assert "results" not in client.get("/api/loadtests/").json()["results"][0]


def test_the_list_takes_a_constant_number_of_queries(
    client, sre, revision, django_assert_num_queries
):
    import_file(revision, "vllm", "vllm_c2_n20_detailed.json", workload="short")
    client.force_login(sre)

    # session, user, COUNT(*), reports joined with revision, service, runtime and uploader.
    with django_assert_num_queries(4):
        assert client.get("/api/loadtests/").json()["count"] == 1

    import_file(revision, "aiperf", "profile_export.jsonl", workload="high_concurrency")
    import_file(revision, "guidellm", "rate-sweep", "benchmarks.json", workload="batch")
    import_file(revision, "sglang", "sglang_c2_n16_details.jsonl", workload="streaming")
    with django_assert_num_queries(4):
        assert client.get("/api/loadtests/").json()["count"] == 4


def test_detail_says_stale_and_why(client, sre, revision):
    with time_machine.travel(timezone.now() - dt.timedelta(days=120), tick=False):
        report, _ = import_file(revision, "vllm", "vllm_c2_n20_detailed.json")
    client.force_login(sre)

    data = client.get(f"/api/loadtests/{report.pk}/").json()

    assert data["status"] == "stale"
    assert "production services accept evidence up to 90 days old" in data["status_reason"]
    assert data["results"]["levels"][0]["name"] == "concurrency 2"


def test_anonymous_cannot_read(client, revision):
    assert client.get("/api/loadtests/").status_code == 401
