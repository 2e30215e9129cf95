"""Every enum query filter of the API refuses an unknown value, naming the allowed ones."""

from __future__ import annotations

import django_filters
import pytest
from django.urls import reverse

from config.api_router import router
from tests.ledger.factories import LicenseFactory, ServiceFactory


def _enum_filters() -> list[tuple[str, str, list[str]]]:
    """(list URL, parameter, allowed values) for every ChoiceFilter of every API list."""
    found = []
    for prefix, viewset, _basename in router.registry:
        filterset_class = getattr(viewset, "filterset_class", None)
        if filterset_class is None:
            continue
        for name, choice_filter in filterset_class.base_filters.items():
            if type(choice_filter) is django_filters.ChoiceFilter:  # not ModelChoiceFilter
                choices = choice_filter.extra["choices"]
                choices = choices() if callable(choices) else choices
                found.append((f"/api/{prefix}/", name, [str(value) for value, _ in choices]))
    return found


ENUM_FILTERS = _enum_filters()


def test_the_api_has_enum_filters_to_check():
    names = {(url, name) for url, name, _ in ENUM_FILTERS}
    assert ("/api/services/", "tier") in names
    assert ("/api/replay/runs/", "verdict") in names
    assert ("/api/events/", "tier") in names


@pytest.mark.parametrize(("url", "name", "allowed"), ENUM_FILTERS)
def test_an_unknown_enum_value_is_refused_naming_the_allowed_ones(
    client, auditor, url, name, allowed
):
    client.force_login(auditor)

    response = client.get(url, {name: "no-such-value"})

    assert response.status_code == 400
    message = response.json()[name][0]
    assert message == f"no-such-value is not one of the allowed values: {', '.join(allowed)}."


def _results(response) -> list[dict]:
    body = response.json()
    return body["results"] if isinstance(body, dict) else body


def test_a_known_enum_value_filters(client, auditor, team):
    ServiceFactory(slug="kb-assistant", team=team, tier="production")
    ServiceFactory(slug="playground", team=team, tier="experimental")
    client.force_login(auditor)

    response = client.get(reverse("api:service-list"), {"tier": "production"})

    assert response.status_code == 200
    assert [s["slug"] for s in _results(response)] == ["kb-assistant"]


@pytest.mark.parametrize(
    ("url", "name", "message"),
    [
        ("/api/revisions/", "model_asset", "No model asset with id 99999."),
        ("/api/capabilities/", "revision", "No revision with id 99999."),
        ("/api/loadtests/", "revision", "No revision with id 99999."),
    ],
)
def test_a_filter_on_a_missing_object_is_refused_naming_it(client, auditor, url, name, message):
    client.force_login(auditor)

    response = client.get(url, {name: "99999"})

    assert response.status_code == 400
    assert response.json() == {name: [message]}


@pytest.mark.parametrize(
    ("url", "query", "message"),
    [
        ("/api/licenses/", {"gated": "null"}, "null is not true or false."),
        ("/api/revisions/", {"served": "maybe"}, "maybe is not true or false."),
        ("/api/replay/runs/", {"sample_set_version": "0.5"}, "Enter a whole number."),
        ("/api/replay/sample-sets/", {"version": "0.5"}, "Enter a whole number."),
    ],
)
def test_a_boolean_or_a_count_the_schema_does_not_allow_is_refused(
    client, auditor, url, query, message
):
    """django-filter ignored these and answered the whole, unfiltered list."""
    client.force_login(auditor)

    response = client.get(url, query)

    assert response.status_code == 400
    assert response.json() == {name: [message] for name in query}


@pytest.mark.parametrize(
    ("value", "listed"),
    [
        ("true", ["LicenseRef-gated"]),
        ("1", ["LicenseRef-gated"]),
        ("false", ["Apache-2.0"]),
        ("0", ["Apache-2.0"]),
        ("", ["Apache-2.0", "LicenseRef-gated"]),  # no filter
    ],
)
def test_a_boolean_filter_takes_true_false_one_and_zero(client, auditor, value, listed):
    LicenseFactory(spdx_id="Apache-2.0", gated=False)
    LicenseFactory(spdx_id="LicenseRef-gated", name="Gated terms", gated=True)
    client.force_login(auditor)

    response = client.get("/api/licenses/", {"gated": value})

    assert response.status_code == 200
    assert [license["spdx_id"] for license in _results(response)] == listed


def test_the_api_takes_json_not_form_encodings(client, owner, team):
    client.force_login(owner)

    response = client.post("/api/services/", {"slug": "x", "name": "X", "team": "kb-team"})

    assert response.status_code == 415
