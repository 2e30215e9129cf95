"""Input PostgreSQL cannot store is refused with a 400 that says where and what is allowed.

PostgreSQL text holds no NUL (U+0000) and only valid Unicode: an unpaired
surrogate such as JSON's "\\ud800" cannot be encoded, a time-zone offset past
±15:59 cannot be stored, and JSON nested thousands deep is a RecursionError in
Python's parser. Each of these used to end in Django's HTML 500 page.
"""

from __future__ import annotations

import datetime as dt
import json

import pytest
import time_machine
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import transaction
from django.test import Client

from ledger.chain import append_event
from tests.ledger.factories import LicenseFactory, RevisionFactory, ServiceFactory
from tests.replay.factories import BackendFactory

NUL = "kb\u0000"
ALLOWED = "any Unicode character except NUL (U+0000) and unpaired surrogates"


@pytest.fixture
def client(owner, team):
    """The owner of kb-team, signed in, seeing a 500 as a response rather than an exception."""
    client = Client(raise_request_exception=False)
    client.force_login(owner)
    LicenseFactory()
    return client


@pytest.fixture
def revision(team):
    return RevisionFactory(service=ServiceFactory(slug="kb", team=team))


def _send(client, method: str, url: str, body) -> object:
    text = body if isinstance(body, str) else json.dumps(body)
    return getattr(client, method)(url, text, content_type="application/json")


def _errors(response) -> dict:
    assert response.status_code == 400, response.content[:300]
    assert response["Content-Type"].startswith("application/json")
    return response.json()


# ---------------------------------------------------------------- NUL in a reference field


@pytest.mark.parametrize(
    ("method", "url", "body", "field"),
    [
        ("post", "/api/services/", {"slug": "x", "name": "X", "team": NUL}, "team"),
        ("patch", "/api/services/kb/", {"team": NUL}, "team"),
        ("post", "/api/revisions/", {"service": NUL}, "service"),
        ("patch", "/api/revisions/{revision}/", {"runtime": NUL}, "runtime"),
        ("post", "/api/revisions/{revision}/new-revision/", {"runtime": NUL}, "runtime"),
        ("post", "/api/assets/", {"team": "kb-team", "license": NUL}, "license"),
        ("post", "/api/replay/runs/", {"backend": NUL, "sample_set": "s"}, "backend"),
    ],
)
def test_a_nul_in_a_reference_field_is_refused_naming_the_field(
    client, revision, method, url, body, field
):
    BackendFactory(revision=revision, name="kb-backend")

    response = _send(client, method, url.format(revision=revision.pk), body)

    errors = _errors(response)
    assert list(errors) == [field]
    assert errors[field][0].startswith(f"{field}: contains a NUL character (U+0000)")
    assert ALLOWED in errors[field][0]


def test_a_nul_in_a_multipart_field_is_refused_too(client, revision):
    upload = SimpleUploadedFile("report.json", b"{}")

    response = client.post(
        f"/api/revisions/{revision.pk}/loadtests/", {"workload": NUL, "file": upload}
    )

    assert _errors(response)["workload"][0].startswith("workload: contains a NUL character")


def test_a_nul_in_an_api_url_is_refused_naming_the_path(client, revision):
    response = client.get("/api/services/kb%00/")

    errors = _errors(response)
    assert errors["path"][0].startswith("contains a NUL character (U+0000)")


@pytest.mark.parametrize("url", ["/api/services/?q=%00", "/api/events/?action=%00"])
def test_a_nul_in_an_api_query_parameter_is_refused_naming_it(client, url):
    response = client.get(url)

    name = url.split("?")[1].split("=")[0]
    assert _errors(response)[name][0].startswith(f"{name}: contains a NUL character")


# ---------------------------------------------------------------- NUL and surrogates in JSON fields


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ('{"launch_parameters": {"served-name": "a\\u0000"}}', "contains a NUL character (U+0000)"),
        (
            '{"launch_parameters": {"served-name": "\\ud800"}}',
            "contains an unpaired surrogate (U+D800)",
        ),
    ],
)
def test_unstorable_text_in_launch_parameters_is_refused_with_its_json_path(
    client, revision, raw, problem
):
    response = _send(client, "patch", f"/api/runtimes/{revision.runtime.name}/", raw)

    errors = _errors(response)
    assert errors == {
        "launch_parameters": [
            f"launch_parameters.served-name: {problem}; text may hold {ALLOWED} (U+D800 to U+DFFF)."
        ]
    }


def test_a_nul_in_a_json_key_is_refused(client, revision):
    raw = '{"launch_parameters": {"a\\u0000": 1}}'

    response = _send(client, "patch", f"/api/runtimes/{revision.runtime.name}/", raw)

    message = _errors(response)["launch_parameters"][0]
    assert message.startswith('launch_parameters["a\\u0000"]: the key contains a NUL character')


def test_unstorable_text_in_a_capability_value_is_refused(client, revision):
    raw = f'{{"revision": {revision.pk}, "kind": "error_codes", "value": {{"429": "\\udc00"}}}}'

    response = _send(client, "post", "/api/capabilities/", raw)

    message = _errors(response)["value"][0]
    assert message.startswith('value["429"]: contains an unpaired surrogate (U+DC00)')


_LINE = '{"key": "k", "category": "short_qa", "messages": [{"role": "user", "content": "%s"}]}'


@pytest.mark.parametrize(
    ("escape", "problem"),
    [("\\u0000", "contains a NUL character"), ("\\ud800", "contains an unpaired surrogate")],
)
def test_unstorable_text_in_an_imported_sample_set_names_the_line_and_path(client, escape, problem):
    jsonl = "\n" + _LINE % escape + "\n"

    as_json = _send(
        client, "post", "/api/replay/sample-sets/import/", {"name": "s", "jsonl": jsonl}
    )
    as_ndjson = client.post(
        "/api/replay/sample-sets/import/?name=s", jsonl, content_type="application/x-ndjson"
    )

    for response in (as_json, as_ndjson):
        message = _errors(response)["jsonl"][0]
        assert message.startswith(f"line 2: messages[0].content: {problem}")


# ---------------------------------------------------------------- time-zone offsets


@pytest.mark.parametrize(
    ("query", "offset"),
    [
        ("created_after=2026-01-01T00:00:00-21:30", "-21:30"),
        ("created_before=2026-01-01T00:00:00%2B16:00", "+16:00"),
    ],
)
def test_an_offset_postgresql_cannot_store_is_refused_in_an_event_filter(client, query, offset):
    response = client.get(f"/api/events/?{query}")

    name = query.split("=")[0]
    message = _errors(response)[name][0]
    assert f"offset {offset}" in message
    assert "-15:59 to +15:59" in message


def test_an_ordinary_offset_still_filters_events(client):
    # 2026-01-01T00:00+05:30 is 2025-12-31T18:30 UTC: one event before it, one after.
    for moment in ("2025-12-31T18:29:59+00:00", "2025-12-31T18:30:00+00:00"):
        with (
            time_machine.travel(dt.datetime.fromisoformat(moment), tick=False),
            transaction.atomic(),
        ):
            append_event(actor=None, action="test.offset", subject=("test", moment), payload={})

    response = client.get(
        "/api/events/?action=test.offset&created_after=2026-01-01T00:00:00%2B05:30"
    )

    assert response.status_code == 200
    listed = response.json()
    rows = listed["results"] if isinstance(listed, dict) else listed
    assert [row["subject_id"] for row in rows] == ["2025-12-31T18:30:00+00:00"]


# ---------------------------------------------------------------- deep nesting


def test_a_deeply_nested_load_test_report_is_refused_naming_the_file(client, revision):
    upload = SimpleUploadedFile("deep.json", b"[" * 100_000)

    response = client.post(
        f"/api/revisions/{revision.pk}/loadtests/", {"workload": "short", "file": upload}
    )

    message = _errors(response)["file"][0]
    assert message.startswith("deep.json")
    assert "nested more than" in message


def test_a_deeply_nested_api_body_is_refused(client):
    response = _send(client, "post", "/api/services/", "[" * 100_000)

    assert "nested more than" in _errors(response)["detail"]


def test_json_nested_too_deep_to_store_is_refused_with_its_path(client, revision):
    deep = {"launch_parameters": {"x": json.loads("[" * 80 + "]" * 80)}}

    response = _send(client, "patch", f"/api/runtimes/{revision.runtime.name}/", deep)

    message = _errors(response)["launch_parameters"][0]
    assert message.startswith("launch_parameters.x")
    assert "nested more than 64 levels deep" in message


# ---------------------------------------------------------------- load-test report content


@pytest.mark.parametrize(
    ("escape", "problem"),
    [("\\u0000", "contains a NUL character"), ("\\ud800", "contains an unpaired surrogate")],
)
def test_unstorable_text_in_a_load_test_report_names_the_json_path(
    client, revision, escape, problem
):
    from pathlib import Path

    report = Path("tests/fixtures/loadtest/vllm/vllm_c2_n20_detailed.json").read_text()
    report = report.replace('"gemma-3-270m"', f'"gemma{escape}"', 1)
    upload = SimpleUploadedFile("vllm.json", report.encode())

    response = client.post(
        f"/api/revisions/{revision.pk}/loadtests/", {"workload": "short", "file": upload}
    )

    message = _errors(response)["file"][0]
    assert message.startswith(f"vllm.json: model_id: {problem}")


# ---------------------------------------------------------------- pages


def test_a_nul_in_a_page_query_parameter_answers_400_naming_it(client, revision):
    response = client.get(f"/services/kb/r{revision.number}/capabilities/new?kind=%00")

    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/html")
    assert "kind: contains a NUL character (U+0000)" in response.content.decode()


@pytest.mark.parametrize("url", ["/services/?q=%00", "/events/?date_from=%00&actor=%00"])
def test_a_nul_in_a_list_filter_is_not_a_server_error(client, url):
    response = client.get(url)

    assert response.status_code == 400


def test_a_surrogate_cannot_arrive_percent_encoded_in_a_query(client):
    """Django decodes a query string with errors="replace": a lone surrogate's
    bytes become U+FFFD, which PostgreSQL stores, so only NUL needs refusing."""
    response = client.get("/services/?q=%ED%A0%80")

    assert response.status_code == 200
    assert "\ufffd" in response.context["filter"].form.cleaned_data["q"]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"served-name": "a\\u0000"}', "contains a NUL character (U+0000)"),
        ('{"served-name": "\\ud800"}', "contains an unpaired surrogate (U+D800)"),
        ("[" * 100_000, "nested more than"),
    ],
)
def test_a_json_field_of_a_page_form_refuses_what_cannot_be_stored(client, team, text, problem):
    response = client.post(
        "/runtimes/new",
        {
            "name": "vllm-x",
            "team": team.pk,
            "engine": "vllm",
            "engine_version": "0.6.3",
            "image": "vllm/vllm-openai:v0.6.3",
            "launch_parameters": text,
            "gpu_model": "H100-80GB",
            "gpu_count": 1,
        },
    )

    assert response.status_code == 200
    assert problem in response.content.decode()


def test_a_capability_value_typed_on_the_page_refuses_a_surrogate(client, revision):
    response = client.post(
        f"/services/kb/r{revision.number}/capabilities/new",
        {"kind": "error_codes", "value": '{"429": "\\udc00"}'},
    )

    assert response.status_code == 200
    assert "contains an unpaired surrogate (U+DC00)" in response.content.decode()


def test_a_sample_set_imported_on_the_page_names_the_line(client):
    response = client.post(
        "/replay/sample-sets/import",
        {"name": "s", "description": "", "jsonl_text": _LINE % "\\u0000"},
    )

    assert response.status_code == 200
    assert "line 1: messages[0].content: contains a NUL character" in response.content.decode()


def test_a_deeply_nested_load_test_report_uploaded_on_the_page_is_a_form_error(client, revision):
    upload = SimpleUploadedFile("deep.json", b"[" * 100_000)

    response = client.post(
        f"/services/kb/r{revision.number}/loadtests/new", {"workload": "short", "file": upload}
    )

    assert response.status_code == 200
    assert "nested more than" in response.content.decode()
