"""The price sheets page: versions per GPU model, the GPU models without a price, and
the form that records a version (platform SREs only)."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from ledger import services
from ledger.models import PriceSheet
from tests.ledger.factories import RevisionFactory, RuntimeFactory

pytestmark = pytest.mark.django_db

URL = "/price-sheets/"


@pytest.fixture
def fleet(team):
    """An H100 runtime with a price (an old version and the one in force) and a service
    live on it, and an L4 runtime without one."""
    today = timezone.now().date()
    revision = RevisionFactory(
        service__team=team,
        service__slug="kb-assistant",
        runtime=RuntimeFactory(team=team, name="vllm-h100", gpu_model="H100-80GB"),
    )
    services.set_live_revision(revision.service, revision, actor=None)
    RuntimeFactory(team=team, name="vllm-l4", gpu_model="L4-24GB")
    for days_ago, price in ((200, "2.2000"), (20, "2.4500")):
        services.record_price_sheet(
            actor=None,
            gpu_model="H100-80GB",
            price_per_gpu_hour=price,
            currency="USD",
            effective_from=today - dt.timedelta(days=days_ago),
        )
    return revision


def test_an_auditor_reads_versions_usage_and_gpus_without_a_price(
    client, auditor, fleet, django_assert_num_queries
):
    client.force_login(auditor)

    # session, user, the user's roles (may they record?), versions (with who recorded
    # them), runtimes, services live on each GPU model
    with django_assert_num_queries(6):
        response = client.get(URL)

    page = response.content.decode()
    assert response.status_code == 200
    assert 'id="gpu-H100-80GB"' in page
    assert page.count("in force") >= 1
    assert "2.4500 USD" in page and "superseded" in page
    assert "kb-assistant" in page and "vllm-h100" in page
    unpriced = [g.gpu_model for g in response.context["unpriced"]]
    assert unpriced == ["L4-24GB"]
    assert "Ask the platform team" in page
    assert response.context["form"] is None
    assert 'name="price_per_gpu_hour"' not in page


def test_an_sre_sees_the_form_with_help_on_each_field(client, sre, fleet):
    client.force_login(sre)

    page = client.get(URL).content.decode()

    assert 'name="price_per_gpu_hour"' in page
    assert "csrfmiddlewaretoken" in page
    for name in ("gpu_model", "price_per_gpu_hour", "currency", "effective_from", "note"):
        assert f'id="id_{name}_helptext"' in page


def test_an_sre_records_a_version_and_is_told(client, sre, fleet):
    client.force_login(sre)

    response = client.post(
        URL,
        {
            "gpu_model": "L4-24GB",
            "price_per_gpu_hour": "0.7000",
            "currency": "USD",
            "effective_from": timezone.now().date().isoformat(),
            "note": "List price.",
        },
        follow=True,
    )

    assert response.redirect_chain[-1][0] == "/price-sheets/#gpu-L4-24GB"
    assert "Recorded: L4-24GB costs 0.7000 USD per GPU-hour" in response.content.decode()
    assert PriceSheet.objects.filter(gpu_model="L4-24GB").get().recorded_by == sre
    assert response.context["unpriced"] == []
    assert "Every GPU model a runtime names has a price in force today." in (
        response.content.decode()
    )


def test_a_refusal_shows_beside_its_field_and_keeps_the_values(client, sre, fleet):
    client.force_login(sre)
    day = (timezone.now().date() - dt.timedelta(days=20)).isoformat()

    response = client.post(
        URL,
        {
            "gpu_model": "H100-80GB",
            "price_per_gpu_hour": "9",
            "currency": "USD",
            "effective_from": day,
        },
    )

    page = response.content.decode()
    assert response.status_code == 200
    assert "already has a price from" in response.context["form"].errors["effective_from"][0]
    assert 'id="id_effective_from_error"' in page
    assert 'class="error-summary"' in page
    assert 'value="9"' in page
    assert PriceSheet.objects.count() == 2


def test_a_bad_currency_is_named_beside_its_field(client, sre, fleet):
    client.force_login(sre)

    response = client.post(
        URL,
        {
            "gpu_model": "L4-24GB",
            "price_per_gpu_hour": "1",
            "currency": "usd",
            "effective_from": "2027-01-01",
        },
    )

    assert "three capital letters" in response.context["form"].errors["currency"][0]
    assert not PriceSheet.objects.filter(gpu_model="L4-24GB").exists()


@pytest.mark.parametrize("who", ["owner", "auditor"])
def test_others_may_not_post(client, request, fleet, who):
    client.force_login(request.getfixturevalue(who))

    response = client.post(
        URL,
        {
            "gpu_model": "L4-24GB",
            "price_per_gpu_hour": "1",
            "currency": "USD",
            "effective_from": "2027-01-01",
        },
    )

    assert response.status_code == 403
    assert not PriceSheet.objects.filter(gpu_model="L4-24GB").exists()


def test_the_empty_state_says_what_to_do(client, sre, auditor, team):
    RuntimeFactory(team=team, name="vllm-l4", gpu_model="L4-24GB")
    client.force_login(auditor)

    page = client.get(URL).content.decode()

    assert "No price sheet yet. Platform SREs record them." in page
    client.force_login(sre)
    assert "Record the price of the first GPU model below." in client.get(URL).content.decode()


def test_the_page_is_in_the_navigation_under_cost(client, auditor):
    client.force_login(auditor)

    page = client.get(URL).content.decode()

    assert '<a href="/cost/" aria-current="page">' in page
    assert '<a href="/price-sheets/">' in client.get("/cost/").content.decode()


def test_signing_in_is_required(client):
    response = client.get(URL)

    assert response.status_code == 302
    assert "/login" in response["Location"] or "login" in response["Location"]
