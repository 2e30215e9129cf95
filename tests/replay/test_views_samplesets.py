"""Sample set pages, through the client: the list, a version's samples, export and import."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from ledger.models import Event
from replay import services
from replay.models import Sample, SampleSet
from tests.replay.factories import SampleFactory, SampleSetFactory
from tests.replay.helpers import ANSWER_SCHEMA

LINES = [
    {
        "key": "capital-fr",
        "category": "short_qa",
        "messages": [{"role": "user", "content": "What is the capital of France?"}],
        "checks": [{"type": "contains", "value": "Paris"}],
    },
    {
        "key": "order-json",
        "category": "structured_json",
        "messages": [{"role": "user", "content": "Extract the order as JSON."}],
        "checks": [
            {"type": "json_schema", "schema": ANSWER_SCHEMA},
            {"type": "max_ttft_ms", "value": 2000},
        ],
        "repeat": 5,
        "min_pass_rate": 0.8,
    },
    {
        "key": "refund-ticket",
        "category": "tool_call",
        "messages": [{"role": "user", "content": "Open a refund for order A-1."}],
        "checks": [{"type": "tool_call", "name": "open_refund"}],
        "rerunnable": False,
        "sensitive": True,
    },
]
JSONL = "".join(json.dumps(line) + "\n" for line in LINES)


@pytest.fixture
def kb_smoke(db):
    """kb-smoke v1 (one sample) and v2 (the three LINES)."""
    services.import_sample_set(actor=None, name="kb-smoke", jsonl=json.dumps(LINES[0]))
    sample_set, _ = services.import_sample_set(
        actor=None, name="kb-smoke", jsonl=JSONL, description="Smoke test of the KB assistant"
    )
    return sample_set


# ---------------------------------------------------------------- list


def test_sample_set_list_shows_versions_and_counts_by_category(client, auditor, kb_smoke):
    client.force_login(auditor)

    response = client.get("/replay/sample-sets/")

    page = response.content.decode()
    row = response.context["rows"][0]
    assert row["set"] == kb_smoke
    assert row["versions"] == 2
    assert row["total"] == 3
    assert row["categories"] == [
        ("Short Q&A", 1),
        ("Structured JSON", 1),
        ("Tool-call arguments", 1),
    ]
    assert "latest v2" in page and "(2 versions)" in page
    assert 'href="/replay/sample-sets/kb-smoke/v2/"' in page


def test_sample_set_list_query_count_does_not_grow_with_sets(
    client, auditor, django_assert_num_queries
):
    for n in range(4):
        SampleFactory.create_batch(2, sample_set=SampleSetFactory(name=f"set-{n}"))
    client.force_login(auditor)
    client.get("/replay/sample-sets/")

    # session, user, count of names, the page of names, their latest versions,
    # the sample counts by category, the user's roles (may they import?)
    with django_assert_num_queries(7):
        client.get("/replay/sample-sets/")


def test_sample_set_list_search_in_the_url(client, auditor, kb_smoke):
    SampleFactory(sample_set=SampleSetFactory(name="sql-agent"))
    client.force_login(auditor)

    response = client.get("/replay/sample-sets/", {"q": "sql"})

    assert [row["set"].name for row in response.context["rows"]] == ["sql-agent"]


def test_sample_set_list_empty_state_says_what_to_do(client, owner, auditor):
    client.force_login(owner)
    assert "Import one from JSONL" in client.get("/replay/sample-sets/").content.decode()
    client.force_login(auditor)
    assert "Model owners import them" in client.get("/replay/sample-sets/").content.decode()


# ---------------------------------------------------------------- one version


def test_version_page_shows_each_sample_with_checks_repeats_and_badges(client, auditor, kb_smoke):
    client.force_login(auditor)

    page = client.get("/replay/sample-sets/kb-smoke/v2/").content.decode()

    assert "<code>order-json</code>" in page
    assert "json_schema" in page
    assert "max_ttft_ms ≤ 2000 ms" in page
    assert "\u00d7 5, ≥ 80 % must pass" in page
    assert '<span class="badge warn">not re-runnable</span>' in page
    assert '<span class="badge warn">sensitive</span>' in page
    assert "withheld (sensitive)" in page  # a sensitive sample's prompt is not shown
    assert "Open a refund" not in page
    assert "What is the capital of France?" in page
    assert '<span class="badge ok">latest</span>' in page
    assert 'href="/replay/sample-sets/kb-smoke/v1/"' in page


def test_older_version_is_not_called_latest(client, auditor, kb_smoke):
    client.force_login(auditor)

    page = client.get("/replay/sample-sets/kb-smoke/v1/").content.decode()

    assert "capital-fr" in page
    assert "order-json" not in page
    assert '<span class="badge ok">latest</span>' not in page


def test_set_name_alone_opens_the_latest_version(client, auditor, kb_smoke):
    client.force_login(auditor)

    response = client.get("/replay/sample-sets/kb-smoke/")

    assert response.status_code == 302
    assert response["Location"] == "/replay/sample-sets/kb-smoke/v2/"
    assert client.get("/replay/sample-sets/nothing/").status_code == 404


def test_version_page_filters_samples_by_category_with_htmx(client, auditor, kb_smoke):
    client.force_login(auditor)

    response = client.get(
        "/replay/sample-sets/kb-smoke/v2/",
        {"category": "structured_json"},
        headers={"HX-Request": "true"},
    )

    page = response.content.decode()
    assert "<html" not in page
    assert "order-json" in page
    assert "capital-fr" not in page
    assert response["HX-Push-Url"] == "/replay/sample-sets/kb-smoke/v2/?category=structured_json"


def test_export_downloads_the_version_as_jsonl(client, auditor, kb_smoke):
    client.force_login(auditor)

    response = client.get("/replay/sample-sets/kb-smoke/v2/export")

    lines = response.content.decode().splitlines()
    assert response["Content-Type"].startswith("application/x-ndjson")
    assert response["Content-Disposition"] == 'attachment; filename="kb-smoke@2.jsonl"'
    assert [json.loads(line)["key"] for line in lines] == [
        "capital-fr",
        "order-json",
        "refund-ticket",
    ]


# ---------------------------------------------------------------- import


def test_owner_imports_a_set_from_an_uploaded_file(client, owner):
    client.force_login(owner)
    upload = SimpleUploadedFile("kb.jsonl", JSONL.encode(), content_type="application/x-ndjson")

    response = client.post(
        "/replay/sample-sets/import",
        {"name": "kb-smoke", "description": "Smoke", "jsonl_file": upload},
    )

    sample_set = SampleSet.objects.get(name="kb-smoke")
    assert response.status_code == 302
    assert response["Location"] == "/replay/sample-sets/kb-smoke/v1/"
    assert sample_set.samples.count() == 3
    assert sample_set.created_by == owner
    assert Event.objects.filter(action="replay.sample_set_imported", actor=owner).exists()


def test_sre_imports_pasted_lines_and_a_change_makes_a_new_version(client, sre, kb_smoke):
    client.force_login(sre)
    changed = JSONL.replace("What is the capital of France?", "Capital of France?")

    response = client.post(
        "/replay/sample-sets/import", {"name": "kb-smoke", "jsonl_text": changed}
    )

    assert response["Location"] == "/replay/sample-sets/kb-smoke/v3/"
    assert SampleSet.objects.filter(name="kb-smoke").count() == 3


def test_importing_the_same_lines_again_changes_nothing(client, owner, kb_smoke):
    client.force_login(owner)

    response = client.post(
        "/replay/sample-sets/import", {"name": "kb-smoke", "jsonl_text": JSONL}, follow=True
    )

    assert response.redirect_chain[0][0] == "/replay/sample-sets/kb-smoke/v2/"
    assert "Nothing changed: the lines are the same as kb-smoke@2." in response.content.decode()
    assert SampleSet.objects.filter(name="kb-smoke").count() == 2


def test_import_shows_every_bad_line_by_number_and_writes_nothing(client, owner):
    client.force_login(owner)
    bad = "\n".join(
        [
            json.dumps(LINES[0]),
            "{not json",
            json.dumps({**LINES[1], "category": "poetry"}),
            json.dumps({**LINES[0], "checks": [{"type": "regex", "pattern": "("}]}),
        ]
    )

    response = client.post("/replay/sample-sets/import", {"name": "kb-smoke", "jsonl_text": bad})

    page = response.content.decode()
    assert response.status_code == 200
    assert not SampleSet.objects.exists()
    assert "line 2: not JSON" in page
    assert "line 3: category: must be one of" in page
    assert "line 4: checks[0].pattern: invalid regular expression" in page
    assert 'id="line-errors"' in page
    assert "{not json" in page  # the pasted text is kept for fixing


def test_import_needs_a_file_or_pasted_lines(client, owner):
    client.force_login(owner)

    response = client.post("/replay/sample-sets/import", {"name": "kb-smoke"})

    page = response.content.decode()
    assert 'id="error-summary"' in page
    assert "Choose a .jsonl file or paste its lines here." in page
    assert not SampleSet.objects.exists()


def test_import_refuses_a_file_that_is_not_utf8(client, owner):
    client.force_login(owner)
    upload = SimpleUploadedFile("kb.jsonl", b"\xff\xfe{}", content_type="application/x-ndjson")

    response = client.post("/replay/sample-sets/import", {"name": "kb", "jsonl_file": upload})

    assert "The file is not UTF-8 text" in response.content.decode()
    assert not Sample.objects.exists()


@pytest.mark.parametrize("who", ["auditor", "outsider", "business"])
def test_import_is_refused_to_people_who_cannot_manage_sample_sets(client, request, who):
    client.force_login(request.getfixturevalue(who))

    assert client.get("/replay/sample-sets/import").status_code == 403
    response = client.post("/replay/sample-sets/import", {"name": "kb", "jsonl_text": JSONL})
    assert response.status_code == 403
    assert not SampleSet.objects.exists()


def test_import_button_shown_only_to_those_who_may(client, owner, auditor, kb_smoke):
    client.force_login(owner)
    assert "Import a new version" in client.get("/replay/sample-sets/kb-smoke/v2/").content.decode()
    client.force_login(auditor)
    assert (
        "Import a new version"
        not in client.get("/replay/sample-sets/kb-smoke/v2/").content.decode()
    )
