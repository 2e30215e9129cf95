"""Who may open and use the registry pages: every write view refuses anyone but
the model owners of the object's team, and changes nothing when it refuses."""

from __future__ import annotations

import pytest
from django.urls import reverse

from ledger import services
from ledger.models import Event, Revision, Service
from tests.factories import UserFactory
from tests.ledger.factories import RevisionFactory, ServiceFactory


@pytest.fixture
def registry(team):
    service = ServiceFactory(team=team, slug="kb-assistant")
    revision = RevisionFactory(service=service)
    return {
        "slug": service.slug,
        "number": revision.number,
        "asset": revision.model_asset.pk,
        "runtime": revision.runtime.name,
    }


def _urls(r: dict) -> dict[str, str]:
    slug, number = r["slug"], r["number"]
    return {
        "service_create": reverse("ledger:service_create"),
        "service_create_validate": reverse("ledger:service_create_validate"),
        "service_edit": reverse("ledger:service_edit", args=[slug]),
        "service_edit_validate": reverse("ledger:service_edit_validate", args=[slug]),
        "revision_create": reverse("ledger:revision_create", args=[slug]),
        "revision_create_validate": reverse("ledger:revision_create_validate", args=[slug]),
        "revision_new_from": reverse("ledger:revision_new_from", args=[slug, number]),
        "capability_declare": reverse("ledger:capability_declare", args=[slug, number]),
        "capability_declare_validate": reverse(
            "ledger:capability_declare_validate", args=[slug, number]
        ),
        "asset_create": reverse("ledger:asset_create"),
        "asset_create_validate": reverse("ledger:asset_create_validate"),
        "asset_edit": reverse("ledger:asset_edit", args=[r["asset"]]),
        "asset_edit_validate": reverse("ledger:asset_edit_validate", args=[r["asset"]]),
        "asset_deprecate": reverse("ledger:asset_deprecate", args=[r["asset"]]),
        "asset_retire": reverse("ledger:asset_retire", args=[r["asset"]]),
        "runtime_create": reverse("ledger:runtime_create"),
        "runtime_create_validate": reverse("ledger:runtime_create_validate"),
        "runtime_edit": reverse("ledger:runtime_edit", args=[r["runtime"]]),
        "runtime_edit_validate": reverse("ledger:runtime_edit_validate", args=[r["runtime"]]),
    }


WRITE_VIEWS = list(_urls({"slug": "s", "number": 1, "asset": 1, "runtime": "r"}))
POST_ONLY = [name for name in WRITE_VIEWS if name.endswith("_validate")] + ["revision_new_from"]
GET_AND_POST = [name for name in WRITE_VIEWS if name not in POST_ONLY]


@pytest.fixture(params=["auditor", "outsider", "sre", "owner_of_another_team"])
def stranger(request, db):
    if request.param == "owner_of_another_team":
        return UserFactory(username="oscar", roles=["model_owner"])
    return request.getfixturevalue(request.param)


@pytest.mark.parametrize("view", WRITE_VIEWS)
def test_write_views_refuse_everyone_but_the_teams_model_owners(client, registry, stranger, view):
    client.force_login(stranger)
    url = _urls(registry)[view]
    events_before = Event.objects.count()

    response = client.post(
        url,
        {"name": "x", "slug": "taken-over", "kind": "streaming", "value": '"sse"'},
        HTTP_HX_REQUEST="true",
        HTTP_HX_TRIGGER_NAME="name",
    )

    assert response.status_code == 403
    assert Event.objects.count() == events_before
    if view in GET_AND_POST:
        assert client.get(url).status_code == 403


@pytest.mark.parametrize("view", POST_ONLY)
def test_post_only_views_refuse_get(client, registry, owner, view):
    client.force_login(owner)

    assert client.get(_urls(registry)[view]).status_code == 405


@pytest.mark.parametrize("view", GET_AND_POST)
def test_team_owner_may_open_every_form(client, registry, owner, view):
    client.force_login(owner)

    assert client.get(_urls(registry)[view]).status_code == 200


def test_owner_may_not_move_a_service_to_a_team_they_do_not_belong_to(client, owner, team):
    from tests.ledger.factories import TeamFactory

    other = TeamFactory(slug="other-team")
    service = ServiceFactory(team=team, slug="kb-assistant", name="KB")
    client.force_login(owner)
    events_before = Event.objects.count()

    response = client.post(
        reverse("ledger:service_edit", args=[service.slug]),
        {"name": "KB", "team": other.pk, "tier": "internal", "exposure": "internal"},
    )

    # The team select only offers the owner's teams: the form refuses the choice.
    assert response.status_code == 200
    assert (
        f"&#x27;{other.pk}&#x27; is not one of the choices of Team; choose one of: {team.pk} ("
        in response.content.decode()
    )
    service.refresh_from_db()
    assert service.team == team
    assert Event.objects.count() == events_before


READ_PAGES = [
    ("releases:service_list", []),
    ("releases:service_detail", ["kb-assistant"]),
    ("ledger:revision_detail", ["kb-assistant", 1]),
    ("ledger:asset_list", []),
    ("ledger:runtime_list", []),
    ("ledger:event_list", []),
    ("ledger:event_verify", []),
]


@pytest.mark.parametrize(("name", "args"), READ_PAGES)
def test_anonymous_visitors_are_sent_to_login(client, registry, name, args):
    url = reverse(name, args=args)

    response = client.get(url)

    assert response.status_code == 302
    assert response["Location"].startswith(f"{reverse('login')}?next=")


@pytest.mark.parametrize("view", WRITE_VIEWS)
def test_anonymous_visitors_cannot_write(client, registry, view):
    events_before = Event.objects.count()

    response = client.post(_urls(registry)[view], {})

    assert response.status_code in (302, 405)
    # Not by anyone: the fixture's rows were recorded by the system, and nothing since.
    assert Event.objects.count() == events_before


@pytest.mark.parametrize("reader", ["auditor", "outsider", "sre", "business", "security"])
def test_every_signed_in_person_may_read_but_sees_no_edit_actions(
    client, registry, reader, request
):
    user = request.getfixturevalue(reader)
    client.force_login(user)
    asset_url = reverse("ledger:asset_detail", args=[registry["asset"]])
    runtime_url = reverse("ledger:runtime_detail", args=[registry["runtime"]])

    for name, args in READ_PAGES:
        assert client.get(reverse(name, args=args)).status_code == 200
    service_page = client.get(reverse("releases:service_detail", args=["kb-assistant"])).content
    revision_page = client.get(reverse("ledger:revision_detail", args=["kb-assistant", 1])).content
    asset_page = client.get(asset_url).content
    runtime_page = client.get(runtime_url).content

    assert b"Edit service" not in service_page
    assert b"New revision from this one" not in revision_page
    assert b"Retire" not in asset_page
    assert b"/edit" not in runtime_page


def test_team_owner_sees_the_edit_actions(client, registry, owner):
    client.force_login(owner)

    service_page = client.get(reverse("releases:service_detail", args=["kb-assistant"])).content
    revision_page = client.get(reverse("ledger:revision_detail", args=["kb-assistant", 1])).content

    assert b"Edit service" in service_page
    assert b"New revision from this one" in revision_page


def test_superuser_may_edit_any_team(client, registry, team):
    admin = UserFactory(username="root", is_superuser=True, is_staff=True)
    client.force_login(admin)
    url = reverse("ledger:service_edit", args=["kb-assistant"])
    events_before = Event.objects.count()

    form = client.get(url)
    response = client.post(
        url,
        {
            "name": "Knowledge-base assistant",
            "team": team.pk,
            "tier": "internal",
            "exposure": "internal",
            "review_cadence_days": "30",
        },
    )

    assert form.status_code == 200
    assert response.status_code == 302
    assert response["Location"] == reverse("releases:service_detail", args=["kb-assistant"])
    assert not team.members.filter(pk=admin.pk).exists()  # not one of the team's owners
    service = Service.objects.get(slug="kb-assistant")
    assert (service.name, service.review_cadence_days) == ("Knowledge-base assistant", 30)
    assert Event.objects.count() == events_before + 1
    event = Event.objects.order_by("-sequence").first()
    assert (event.action, event.actor, event.actor_label) == ("service.updated", admin, "root")
    assert (event.subject_type, event.subject_id) == ("ledger.service", str(service.pk))
    assert event.payload_data == {
        "before": {"name": "Kb Assistant", "review_cadence_days": 90},
        "after": {"name": "Knowledge-base assistant", "review_cadence_days": 30},
    }


def test_live_revision_stays_served_after_a_refused_write(client, registry, auditor):
    service = Service.objects.get(slug="kb-assistant")
    services.set_live_revision(service, Revision.objects.get(service=service), actor=None)
    client.force_login(auditor)
    events_before = Event.objects.count()

    response = client.post(
        reverse("ledger:revision_new_from", args=["kb-assistant", 1]),
    )

    assert response.status_code == 403
    assert Revision.objects.filter(service=service).count() == 1
    assert Event.objects.count() == events_before
