"""The diff page of two revisions of a service, and the links to it, through the client."""

from __future__ import annotations

import re

import pytest

from ledger import services
from ledger.models import Service
from tests.ledger.factories import RevisionFactory, RuntimeFactory, ServiceFactory, digest


@pytest.fixture
def kb(team):
    """kb-assistant: r1 live; r2 lowers the context window and drops tool calling;
    r3 runs exactly what r1 runs."""
    service = ServiceFactory(team=team, slug="kb-assistant")
    r1 = RevisionFactory(service=service)
    services.set_live_revision(service, r1, actor=None)
    small = RuntimeFactory(
        team=team,
        launch_parameters={"max_model_len": 8192, "gpu_memory_utilization": 0.85},
    )
    r2 = services.new_revision_from(r1, actor=None, runtime=small, context_limit=8192)
    r3 = services.new_revision_from(r1, actor=None)
    for revision in (r1, r3):
        services.declare_capability(revision, actor=None, kind="tool_calling", value=True)
    services.declare_capability(r2, actor=None, kind="tool_calling", value=False)
    return Service.objects.get(pk=service.pk)


def rows(page: str) -> list[str]:
    table = page.split('<table class="data stack diff">', 1)[1].split("</table>", 1)[0]
    body = table.split("<tbody>", 1)[1]
    return re.findall(r"<tr>.*?</tr>", body, flags=re.S)


def test_diff_page_lists_changes_breaking_first_with_their_word_and_why(client, sre, kb):
    client.force_login(sre)

    response = client.get("/services/kb-assistant/diff/1/2/")

    page = response.content.decode()
    assert response.status_code == 200
    assert "<h1>kb-assistant: r1 → r2</h1>" in page
    assert [c["field"] for c in response.context["changes"]] == [
        "capabilities.tool_calling",
        "context_limit",
        "launch_parameters.max_model_len",
        "image_digest",
        "launch_parameters.gpu_memory_utilization",
        "launch_parameters.tensor_parallel_size",
    ]
    table = rows(page)
    assert len(table) == 6
    assert '<span class="badge bad">breaking</span>' in table[1]
    assert "<code>context_limit</code>" in table[1]
    assert (
        "context window shrinks from 32768 to 8192 tokens: requests longer than 8192 "
        "tokens will be refused" in table[1]
    )
    assert '<span class="badge">change</span>' in table[4]
    assert "<code>0.85</code>" in table[4]
    assert '<span class="muted">not set</span>' in table[4]
    assert '<span class="badge bad">breaking</span> 3 of 6 changes break callers' in page


def test_diff_page_fits_a_phone_as_one_card_per_change(client, sre, kb):
    client.force_login(sre)

    page = client.get("/services/kb-assistant/diff/1/2/").content.decode()

    # .table-wrap keeps a wide table in its own box; .stack turns each row into a
    # card on a narrow screen, each cell labelled by data-label.
    assert '<div class="table-wrap">\n      <table class="data stack diff">' in page
    for row in rows(page):
        labels = re.findall(r'<td data-label="([^"]*)"', row)
        assert labels == ["", "Kind", "r1", "r2", "Why"]
    # Digests are shortened and open to their full value instead of widening the card.
    assert '<details class="fingerprint"><summary><code title="sha256:' in page
    assert "<script" not in page.split("<main", 1)[1], "the page reads without JavaScript"


def test_revisions_that_run_the_same_thing_say_so(client, sre, kb):
    client.force_login(sre)

    page = client.get("/services/kb-assistant/diff/1/3/").content.decode()

    assert "r1 and r3 run the same thing" in page
    assert "data stack diff" not in page


def test_diff_page_answers_404_for_a_revision_of_another_service(client, sre, kb, team):
    other = ServiceFactory(team=team, slug="dataagent-sql")
    for _ in range(4):
        RevisionFactory(service=other)
    client.force_login(sre)

    assert client.get("/services/kb-assistant/diff/1/4/").status_code == 404
    assert client.get("/services/kb-assistant/diff/4/1/").status_code == 404
    assert client.get("/services/no-such-service/diff/1/2/").status_code == 404
    assert client.get("/services/dataagent-sql/diff/1/4/").status_code == 200


def test_diff_page_needs_a_login_and_a_get(client, sre, kb):
    response = client.get("/services/kb-assistant/diff/1/2/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")

    client.force_login(sre)
    assert client.post("/services/kb-assistant/diff/1/2/").status_code == 405


def test_diff_page_runs_a_constant_number_of_queries(client, sre, kb, django_assert_num_queries):
    client.force_login(sre)

    # session, user, both revisions with service, asset and runtime, the capabilities
    # of both, the service's revision numbers for the pair form.
    with django_assert_num_queries(5):
        response = client.get("/services/kb-assistant/diff/1/2/")
    assert response.status_code == 200


def test_pair_form_offers_every_revision_with_the_pair_selected(client, sre, kb):
    client.force_login(sre)

    page = client.get("/services/kb-assistant/diff/1/2/").content.decode()

    form = page.split('aria-label="Revisions to compare"', 1)[1].split("</form>", 1)[0]
    assert 'method="get"' in page.split('aria-label="Revisions to compare"', 1)[0][-200:]
    assert 'action="/services/kb-assistant/diff/"' in page
    a, b = re.findall(r"<select .*?</select>", form, flags=re.S)
    assert re.findall(r'<option value="(\d+)"', a) == ["3", "2", "1"]
    assert '<option value="1" selected>r1 (live)</option>' in a
    assert '<option value="2" selected>r2</option>' in b
    assert '<label for="id_a">From</label>' in form
    assert '<label for="id_b">To</label>' in form


def test_pair_form_lands_on_the_chosen_pair_and_fills_a_side_left_out(client, sre, kb):
    client.force_login(sre)

    def lands(query: str) -> str:
        response = client.get(f"/services/kb-assistant/diff/{query}")
        assert response.status_code == 302, query
        return response["Location"]

    assert lands("?a=3&b=2") == "/services/kb-assistant/diff/3/2/"
    assert lands("?a=r1&b=r3") == "/services/kb-assistant/diff/1/3/"
    # To: the newest; from: the live one, or the one before when `to` is live.
    assert lands("") == "/services/kb-assistant/diff/1/3/"
    assert lands("?b=2") == "/services/kb-assistant/diff/1/2/"
    assert lands("?b=1") == "/services/kb-assistant/diff/1/1/"
    assert client.get("/services/no-such-service/diff/").status_code == 404


def test_revision_page_links_to_the_diff_with_live(client, sre, kb):
    client.force_login(sre)

    candidate = client.get("/services/kb-assistant/r2/").content.decode()
    live = client.get("/services/kb-assistant/r1/").content.decode()

    assert 'href="/services/kb-assistant/diff/1/2/">Compare with live r1</a>' in candidate
    assert 'href="/services/kb-assistant/diff/?b=2">Compare with…</a>' in candidate
    assert "Compare with live" not in live
    assert 'href="/services/kb-assistant/diff/?b=1">Compare with…</a>' in live


def test_service_page_links_to_comparing_two_revisions(client, sre, kb, team):
    lone = ServiceFactory(team=team, slug="lone-service")
    RevisionFactory(service=lone)
    client.force_login(sre)

    page = client.get("/services/kb-assistant/").content.decode()

    assert '<a href="/services/kb-assistant/diff/">Compare two revisions</a>' in page
    assert "Compare two revisions" not in client.get("/services/lone-service/").content.decode()


def test_a_changed_digest_shows_both_digests(client, sre, team):
    from tests.ledger.factories import ModelAssetFactory

    service = ServiceFactory(team=team, slug="kb-assistant")
    r1 = RevisionFactory(service=service)
    asset = r1.model_asset
    fields = {
        name: getattr(asset, name)
        for name in ("family", "weights_digest", "tokenizer_digest", "generation_config_digest")
    }
    fields["config_digest"] = asset.config_digest
    other = ModelAssetFactory(
        team=team,
        name=asset.name,
        revision="v2",
        chat_template_digest=digest("template v2"),
        **fields,
    )
    services.new_revision_from(r1, actor=None, model_asset=other)
    client.force_login(sre)

    page = client.get("/services/kb-assistant/diff/1/2/").content.decode()

    assert f'<code class="full">{asset.chat_template_digest}</code>' in page
    assert f'<code class="full">{digest("template v2")}</code>' in page
    assert "prompts are rendered differently" in page
