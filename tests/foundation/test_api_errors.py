"""Errors under /api/ are JSON, whoever raised them; pages keep their HTML error pages."""

from __future__ import annotations

import pytest
from django.test import Client, RequestFactory

from ledger.api import registry


@pytest.fixture
def api(auditor):
    """Signed in, and seeing the 500 response instead of the test client re-raising."""
    client = Client(raise_request_exception=False)
    client.force_login(auditor)
    return client


def _is_json(response) -> bool:
    return response["Content-Type"].startswith("application/json")


def test_an_unknown_api_url_answers_a_json_404(api):
    response = api.get("/api/no-such-thing/")

    assert response.status_code == 404
    assert _is_json(response)
    assert response.json() == {"detail": "Not found."}


def test_an_unknown_page_keeps_the_html_404(api):
    response = api.get("/no-such-page/")

    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")


def test_an_exception_in_an_api_view_answers_a_json_500(api, monkeypatch):
    def broken(self):
        raise RuntimeError("a bug")

    monkeypatch.setattr(registry.WhoAmIView, "get_object", broken)

    response = api.get("/api/me/")

    assert response.status_code == 500
    assert _is_json(response)
    assert response.json() == {"detail": "Internal server error."}


def test_an_exception_after_the_view_under_api_answers_a_json_500(api, monkeypatch):
    """A renderer failure happens outside DRF's exception handler."""
    from rest_framework.renderers import JSONRenderer

    def broken(self, data, accepted_media_type=None, renderer_context=None):
        raise RuntimeError("cannot render")

    monkeypatch.setattr(JSONRenderer, "render", broken)

    response = api.get("/api/me/", HTTP_ACCEPT="application/json")

    assert response.status_code == 500
    assert _is_json(response)
    assert response.json() == {"detail": "Internal server error."}


def test_a_refused_host_under_api_answers_a_json_400(api):
    """DisallowedHost is raised in middleware, before any view: handler400 answers."""
    response = api.get("/api/me/", HTTP_HOST="evil.example")

    assert response.status_code == 400
    assert _is_json(response)
    assert response.json() == {"detail": "Bad request."}


def test_a_refused_host_on_a_page_keeps_html(api):
    response = api.get("/services/", HTTP_HOST="evil.example")

    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/html")


def test_the_error_handlers_answer_json_only_under_api():
    from django.core.exceptions import PermissionDenied

    from config import urls

    factory = RequestFactory()
    handlers = {
        urls.handler400: (400, {"detail": "Bad request."}),
        urls.handler403: (403, {"detail": "Permission denied."}),
        urls.handler404: (404, {"detail": "Not found."}),
    }
    for dotted, (status, body) in handlers.items():
        view = _import(dotted)
        api_response = view(factory.get("/api/x/"), PermissionDenied())
        page_response = view(factory.get("/x/"), PermissionDenied())
        assert (api_response.status_code, _json(api_response)) == (status, body)
        assert page_response.status_code == status
        assert page_response["Content-Type"].startswith("text/html")
    server_error = _import(urls.handler500)
    assert _json(server_error(factory.get("/api/x/"))) == {"detail": "Internal server error."}
    assert server_error(factory.get("/x/"))["Content-Type"].startswith("text/html")


def _import(dotted: str):
    from django.utils.module_loading import import_string

    return import_string(dotted)


def _json(response):
    import json

    return json.loads(response.content)
