"""Errors and refusals as pages in the site's layout (lib/errors.py, lib/http.py),
a refusal logged as one line (lib/log_filters.py), and the favicon."""

from __future__ import annotations

import logging

import pytest
from django.test import Client

from tests.ledger.factories import ServiceFactory, TeamFactory
from tests.replay.helpers import make_backend


@pytest.fixture
def kb(db):
    team = TeamFactory(slug="knowledge-platform", name="Knowledge platform")
    return ServiceFactory(slug="kb-assistant", team=team)


def in_layout(page: str) -> bool:
    return '<header class="topbar">' in page and "css/ledger.css" in page


def test_a_refusal_is_a_page_with_its_reason_and_a_way_back(client, auditor, kb):
    client.force_login(auditor)

    response = client.get(
        "/services/kb-assistant/edit", headers={"referer": "http://testserver/services/"}
    )

    page = response.content.decode()
    assert response.status_code == 403
    assert in_layout(page)
    assert "<h1>Not allowed</h1>" in page
    assert "Only model owners of team &#x27;knowledge-platform&#x27; can change this." in page
    assert 'href="http://testserver/services/">Back to the page you came from' in page
    assert "signed in as <strong>ada</strong>" in page


def test_a_way_back_is_offered_only_to_a_page_of_this_site(client, auditor, kb):
    client.force_login(auditor)

    response = client.get(
        "/services/kb-assistant/edit", headers={"referer": "https://evil.example/phish"}
    )

    page = response.content.decode()
    assert "evil.example" not in page
    assert "Back to the page you came from" not in page
    assert 'href="/">Home</a>' in page


def _emitting_handlers(logger: logging.Logger) -> list[logging.Handler]:
    """The handlers of the settings' LOGGING a record logged on `logger` reaches, as
    logging walks up (pytest's own capturing handlers left out)."""
    handlers: list[logging.Handler] = []
    current: logging.Logger | None = logger
    while current is not None:
        handlers.extend(h for h in current.handlers if not type(h).__module__.startswith("_pytest"))
        current = current.parent if current.propagate else None
    return handlers


def test_a_refusal_is_logged_once_as_one_line_with_its_reason(client, auditor, kb, caplog):
    """Not Django's traceback, and not twice (Django's own DEBUG console handler and the root's)."""
    request_logger = logging.getLogger("django.request")
    assert len(_emitting_handlers(request_logger)) == 1
    django_logger = logging.getLogger("django")  # it does not propagate to the root's caplog
    attach = caplog.handler not in django_logger.handlers
    if attach:
        django_logger.addHandler(caplog.handler)
    client.force_login(auditor)
    caplog.clear()
    try:
        client.get("/services/kb-assistant/edit")
    finally:
        if attach:
            django_logger.removeHandler(caplog.handler)

    refusals = [r for r in caplog.records if r.name == "django.request"]
    assert len(refusals) == 1
    (record,) = refusals
    assert record.levelno == logging.WARNING
    assert record.exc_info is None
    assert record.getMessage() == (
        "Forbidden (Permission denied): GET /services/kb-assistant/edit: "
        "Only model owners of team 'knowledge-platform' can change this."
    )
    assert "Traceback" not in caplog.text
    # One line from django.request; the access log's own line for the request is apart.
    refusal_lines = [line for line in caplog.text.splitlines() if "django.request" in line]
    assert len(refusal_lines) == 1
    assert all(
        "django.request" in line or "ledger.access" in line
        for line in caplog.text.strip().splitlines()
    )


def test_an_unknown_address_is_a_not_found_page(client, auditor):
    client.force_login(auditor)

    response = client.get("/no-such-page/")

    page = response.content.decode()
    assert response.status_code == 404
    assert in_layout(page)
    assert "<h1>Not found</h1>" in page
    assert "There is nothing at <code>/no-such-page/</code>." in page
    assert 'href="/services/">Find a service</a>' in page


def test_a_view_s_own_not_found_message_is_shown(client, auditor):
    client.force_login(auditor)

    response = client.get("/replay/sample-sets/no-such-set/")

    assert response.status_code == 404
    assert "No sample set is named no-such-set." in response.content.decode()


def test_a_lookup_s_model_message_is_not_shown(client, auditor):
    client.force_login(auditor)

    response = client.get("/services/no-such-service/")

    page = response.content.decode()
    assert response.status_code == 404
    assert "matches the given query" not in page
    assert "There is nothing at <code>/services/no-such-service/</code>." in page


@pytest.mark.parametrize(
    ("path", "says"),
    [
        ("/no-such-page/", "There is nothing at <code>/no-such-page/</code>."),
        (
            "/services/no-such-service/",
            "There is nothing at <code>/services/no-such-service/</code>.",
        ),
        ("/replay/sample-sets/no-such-set/", "No sample set is named no-such-set."),
    ],
)
def test_with_debug_on_an_unknown_address_is_still_the_projects_not_found_page(
    client, auditor, settings, path, says
):
    """`make run` runs with DEBUG: Django's technical 404 would list every URL pattern."""
    settings.DEBUG = True
    client.force_login(auditor)

    response = client.get(path)

    page = response.content.decode()
    assert response.status_code == 404
    assert in_layout(page)
    assert "<h1>Not found</h1>" in page
    assert says in page
    assert "URLconf" not in page
    assert "tried these URL patterns" not in page
    assert "DEBUG = True" not in page


def test_with_debug_on_a_missing_trailing_slash_still_redirects(client, auditor, settings):
    settings.DEBUG = True
    client.force_login(auditor)

    response = client.get("/services")

    assert response.status_code == 301
    assert response["Location"] == "/services/"


def test_with_debug_on_an_unknown_api_address_answers_json(client, auditor, settings):
    settings.DEBUG = True
    client.force_login(auditor)

    response = client.get("/api/no-such-endpoint/")

    assert response.status_code == 404
    assert response.json() == {"detail": "Not found."}


def test_opening_an_action_s_address_says_what_it_does_and_where_its_button_is(client, owner, team):
    make_backend(team, "kb-live")
    client.force_login(owner)

    response = client.get("/replay/backends/kb-live/run")

    page = response.content.decode()
    assert response.status_code == 405
    assert response["Allow"] == "POST"
    assert in_layout(page)
    assert "<h1>This address is an action</h1>" in page
    assert "queues a replay of a sample set against this backend (Run now)" in page
    assert 'href="/replay/backends/kb-live/">Go to the page with the button</a>' in page


def test_an_action_still_runs_on_post(client, owner, team):
    make_backend(team, "kb-live")
    client.force_login(owner)

    response = client.post("/replay/backends/kb-live/run", {})

    assert response.status_code == 302  # back to the backend, with what was missing
    assert response["Location"] == "/replay/backends/kb-live/"


def test_any_bare_405_gets_the_page_too(client, auditor):
    """Django's own POST-only views (log out) answer an empty 405; the page explains it."""
    client.force_login(auditor)

    response = client.get("/accounts/logout/")

    page = response.content.decode()
    assert response.status_code == 405
    assert "<h1>This address is an action</h1>" in page
    assert "It answers POST" in page
    assert "a button sends it" in page


def test_an_api_405_stays_json(client, auditor):
    client.force_login(auditor)

    response = client.delete("/api/me/")

    assert response.status_code == 405
    assert response["Content-Type"].startswith("application/json")


def test_a_server_error_renders_its_page_with_debug_off(settings, auditor, monkeypatch):
    settings.DEBUG = False

    def broken(user):
        raise RuntimeError("a bug with a secret in it")

    monkeypatch.setattr("releases.overview.views.home.roles_of", broken)
    client = Client(raise_request_exception=False)
    client.force_login(auditor)

    response = client.get("/")

    page = response.content.decode()
    assert response.status_code == 500
    assert in_layout(page)
    assert "<h1>Something went wrong on our side</h1>" in page
    assert "a secret" not in page and "Traceback" not in page
    assert 'href="/">Home</a>' in page


def test_the_favicon_is_linked_and_served_at_the_root(client, auditor):
    client.force_login(auditor)

    page = client.get("/").content.decode()
    icon = client.get("/favicon.ico")

    assert '<link rel="icon" href="/static/img/favicon.svg" type="image/svg+xml">' in page
    assert client.get("/static/img/favicon.svg").status_code == 200
    assert icon.status_code == 200
    assert icon["Content-Type"] in {"image/x-icon", "image/vnd.microsoft.icon"}
    assert b"".join(icon.streaming_content)[:4] == b"\x00\x00\x01\x00"  # an ICO header


def test_pages_and_static_files_are_served_compressed(client, auditor):
    client.force_login(auditor)

    page = client.get("/", headers={"accept-encoding": "gzip"})
    script = client.get(
        "/static/vendor/plotly-basic-4.1.1.min.js", headers={"accept-encoding": "gzip"}
    )

    assert page["Content-Encoding"] == "gzip"
    assert script["Content-Encoding"] == "gzip"
    assert "Accept-Encoding" in script["Vary"]


def test_the_api_is_not_compressed(client, auditor):
    client.force_login(auditor)

    response = client.get("/api/schema/", headers={"accept-encoding": "gzip"})

    assert response.status_code == 200
    assert "Content-Encoding" not in response
