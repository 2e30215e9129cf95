"""The gateway policy page: the version in force, the form per section with its preview
and diff, recording a version, and each version's page."""

from __future__ import annotations

import pytest
from django.urls import reverse

from ledger import services as ledger_services
from ledger.models import Event, GatewayPolicy, Revision, TaskType
from ledger.services.gateway_policies import create_gateway_policy
from releases.gateway.queries import gateway
from tests.ledger.factories import RevisionFactory
from tests.releases.factories import build_world, complete_policy
from tests.replay.factories import BackendFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(team):
    world = build_world(team)
    build_world(team, slug="kb-long", tier="internal")
    return world


def _page(slug: str = "kb-assistant") -> str:
    return reverse("releases:gateway_policy", args=[slug])


def _form_from(response) -> dict[str, str]:
    """What the browser would post back: every field's current value, as rendered."""
    form = response.context["form"]
    data = {}
    for name in form.fields:
        value = form[name].value()
        data[name] = "" if value is None else str(value)
    return data


def test_the_page_shows_the_version_in_force_and_the_config_it_renders(client, owner, world):
    client.force_login(owner)

    response = client.get(_page())

    assert response.status_code == 200
    text = response.content.decode()
    assert "In force: v1" in text
    assert "max_output_tokens" in text and "200000" in text  # limits and a tenant's tpm
    assert "model_name: kb-assistant" in text  # the rendered config
    form = response.context["form"]
    assert form["limits_max_input_tokens"].value() == 8192
    assert form["tenant_support_rpm"].value() == 600
    assert form["egress"].value() == "no"


def test_preview_shows_the_changes_and_the_config_and_records_nothing(client, owner, world):
    BackendFactory(name="kb-live-2", revision=world.live)
    client.force_login(owner)
    data = _form_from(client.get(_page()))
    data.update(limits_max_output_tokens="512", action="preview")

    response = client.post(_page(), data)

    assert response.status_code == 200
    text = response.content.decode()
    assert (
        "max_output_tokens 1024 → 512: long answers for tenants support, sales will be truncated"
        in text
    )
    assert "max_output_tokens: 512" in response.context["preview"].config
    assert GatewayPolicy.objects.filter(service=world.service).count() == 1


def test_record_keeps_a_new_version_with_its_event(client, owner, world):
    client.force_login(owner)
    data = _form_from(client.get(_page()))
    data.update(
        tenant_sales_rpm="",
        tenant_sales_tpm="",
        fallback_context_window="kb-long",
        note="sales moves to its own service",
        action="record",
    )

    response = client.post(_page(), data)

    assert response.status_code == 302
    assert response["Location"] == reverse(
        "releases:gateway_policy_version", args=["kb-assistant", 2]
    )
    version = GatewayPolicy.objects.get(service=world.service, version=2)
    assert [t["name"] for t in version.document["tenants"]] == ["support"]
    assert version.document["fallbacks"] == [{"on": "context_window", "to_service": "kb-long"}]
    assert version.note == "sales moves to its own service"
    assert Event.objects.filter(
        action="gateway_policy.created", subject_id=str(version.pk)
    ).exists()
    page = client.get(response["Location"]).content.decode()
    assert "tenant sales removed: its calls will be refused" in page
    assert "now fall back to kb-long" in page


def test_a_refused_document_names_the_path_and_writes_nothing(client, owner, world):
    client.force_login(owner)
    data = _form_from(client.get(_page()))
    data.update(fallback_error="nowhere, kb-assistant", action="record")

    response = client.post(_page(), data)

    assert response.status_code == 400
    errors = " ".join(response.context["form"].non_field_errors())
    assert "fallbacks[0].to_service: there is no service nowhere." in errors
    assert "fallbacks[1].to_service: kb-assistant cannot fall back to itself." in errors
    assert GatewayPolicy.objects.filter(service=world.service).count() == 1


def test_a_stop_without_a_message_is_refused_on_its_field(client, owner, world):
    world.service.task_types.add(
        TaskType.objects.get_or_create(slug="sql", defaults={"name": "SQL"})[0]
    )
    client.force_login(owner)
    data = _form_from(client.get(_page()))
    data.update(degrade_sql_action="stop", degrade_sql_message="", action="preview")

    response = client.post(_page(), data)

    assert response.status_code == 400
    assert response.context["form"].errors["degrade_sql_message"] == ["Say what callers are told."]


def test_others_read_the_page_but_cannot_record(client, sre, world):
    client.force_login(sre)

    page = client.get(_page())
    assert page.status_code == 200
    assert "Record the next version" not in page.content.decode()

    refused = client.post(_page(), {"action": "record"})
    assert refused.status_code == 403
    assert GatewayPolicy.objects.filter(service=world.service).count() == 1


def test_a_version_page_answers_404_for_a_version_that_does_not_exist(client, owner, world):
    client.force_login(owner)

    assert (
        client.get(reverse("releases:gateway_policy_version", args=["kb-assistant", 9])).status_code
        == 404
    )
    assert client.get(_page("no-such-service")).status_code == 404


def test_an_unknown_version_says_so(client, owner, world):
    revision = RevisionFactory(service=world.service, gateway_policy_version="gw-2026.03")
    client.force_login(owner)

    page = client.get(
        reverse(
            "releases:gateway_policy_version",
            args=["kb-assistant", revision.gateway_policy.version],
        )
    )

    text = page.content.decode()
    assert "Recorded by name only: its document is unknown" in text
    assert revision.label in text


def test_a_policy_version_goes_out_as_a_routing_release_and_going_back_restores_the_old_one(
    client, owner, world
):

    stricter = complete_policy(world.service)
    stricter["limits"]["max_output_tokens"] = 256
    v2 = create_gateway_policy(world.service, actor=None, document=stricter)
    client.force_login(owner)
    url = reverse("releases:gateway_policy_release", args=["kb-assistant", v2.version])

    first = client.post(url)
    again = client.post(url)

    assert first.status_code == again.status_code == 302
    assert first["Location"] == again["Location"]  # one candidate, not two
    form = client.get(first["Location"]).context["form"]
    candidate = form.initial["to_revision"]
    assert form.initial["change_kind"] == "routing"
    revision = Revision.objects.get(pk=candidate)
    assert revision.gateway_policy == v2
    assert (revision.model_asset_id, revision.runtime_id) == (
        world.live.model_asset_id,
        world.live.runtime_id,
    )
    # Live, it renders v2; the rollback target (the live one before) renders v1 again.
    ledger_services.set_live_revision(world.service, revision, actor=None, reason="released")
    BackendFactory(name="kb-v2", revision=revision)
    assert gateway(["kb-assistant"]).routes[0].policy["limits"]["max_output_tokens"] == 256
    ledger_services.set_live_revision(world.service, world.live, actor=None, reason="rolled back")
    assert gateway(["kb-assistant"]).routes[0].policy["limits"]["max_output_tokens"] == 1024


def test_the_version_in_force_offers_no_release(client, owner, world):
    client.force_login(owner)
    url = reverse("releases:gateway_policy_release", args=["kb-assistant", 1])

    response = client.post(url, follow=True)

    assert "v1 is already in force on kb-assistant: there is nothing to release." in (
        response.content.decode()
    )
    assert client.get(url).status_code == 405
