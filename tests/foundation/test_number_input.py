"""A number in a URL is ASCII digits: `str.isdigit()` also says yes to "²" and to other
scripts' digits, which `int()` then refuses or reads as a number nobody typed. Each
address below once answered such a value with a 500."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.ledger.factories import RevisionFactory, ServiceFactory

pytestmark = pytest.mark.django_db

# Superscript two (a digit to isdigit, not to int), Arabic-Indic three (a digit to both),
# and a number past any primary key.
ODD_NUMBERS = ["\u00b2", "\u0663", "9" * 30]


@pytest.fixture
def client(owner, team):
    client = Client(raise_request_exception=False)
    client.force_login(owner)
    RevisionFactory(service=ServiceFactory(slug="kb", team=team))
    return client


@pytest.mark.parametrize("number", ODD_NUMBERS)
@pytest.mark.parametrize(
    "address",
    [
        "/services/kb/revisions/new?from={}",
        "/assets/new?from={}",
        "/services/kb/diff/?a={}&b={}",
        "/replay/runs/compare?a={}&b={}",
        "/services/kb/releases/new/?to_revision={}",
        "/services/kb/releases/new/gateway-policy/?to_revision={}",
        "/api/revisions/{}/diff/1/",
    ],
)
def test_an_odd_number_is_no_number_and_never_a_500(client, address, number):
    response = client.get(address.format(number, number))

    assert response.status_code in (200, 302, 404), (address, response.status_code)
