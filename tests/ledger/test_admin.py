"""The Django admin: every ledger model visible, nothing written around the domain verbs."""

from __future__ import annotations

import re

import pytest
from django.apps import apps

from ledger import services
from ledger.models import Event, License, Service, Team
from tests.factories import UserFactory
from tests.ledger.factories import LicenseFactory, RevisionFactory, TeamFactory

MODELS = [
    "team",
    "tasktype",
    "license",
    "licenseacceptance",
    "service",
    "modelasset",
    "runtime",
    "revision",
    "capability",
    "pricesheet",
    "event",
]
READ_ONLY = [
    "tasktype",
    "licenseacceptance",
    "service",
    "modelasset",
    "runtime",
    "revision",
    "pricesheet",
]


@pytest.fixture
def admin_user(db):
    return UserFactory(username="root", is_superuser=True, is_staff=True)


def _one_of_everything(team, *, slug, task_type, asset, family, runtime, license_, accepted_by):
    revision = RevisionFactory(
        service__team=team,
        service__slug=slug,
        service__task_types=[task_type],
        model_asset__name=asset,
        model_asset__family=family,
        model_asset__license=license_,
        runtime__name=runtime,
    )
    services.set_live_revision(revision.service, revision, actor=None)
    services.declare_capability(revision, actor=None, kind="streaming", value="sse")
    services.record_license_acceptance(
        revision.model_asset, actor=None, terms_version="2024-07", accepted_by=accepted_by
    )
    services.record_price_sheet(
        actor=None,
        gpu_model=f"{runtime}-gpu",
        price_per_gpu_hour="2.4500",
        currency="USD",
        effective_from="2026-11-01",
    )
    return revision


@pytest.fixture
def registry(team):
    """One of everything, so changelists render real rows."""
    return _one_of_everything(
        team,
        slug="kb-assistant",
        task_type="chat",
        asset="Qwen2.5-7B-Instruct",
        family="qwen2.5",
        runtime="kb-vllm-h100",
        # Gated, so that accepting its terms can be recorded.
        license_=LicenseFactory(
            spdx_id="LicenseRef-Qwen-Research",
            name="Qwen Research License",
            kind="acceptable_use",
            gated=True,
        ),
        accepted_by="legal",
    )


@pytest.fixture
def other_registry(db):
    """One of everything again, of another team: rows a search must leave out."""
    return _one_of_everything(
        TeamFactory(slug="sql-team", name="SQL team"),
        slug="sql-assistant",
        task_type="sql",
        asset="Llama-3.1-8B-Instruct",
        family="llama-3.1",
        runtime="sql-vllm-a100",
        license_=LicenseFactory(
            spdx_id="LicenseRef-Llama-3.1-Community",
            name="Llama 3.1 Community License",
            kind="acceptable_use",
            gated=True,
        ),
        accepted_by="counsel",
    )


def _rows_shown(response, model: str) -> list[int]:
    """The primary keys of the rows a changelist page links to, in order."""
    page = response.content.decode()
    return [int(pk) for pk in re.findall(rf'href="/admin/ledger/{model}/(\d+)/change/', page)]


@pytest.mark.parametrize("model", MODELS)
def test_changelist_renders_for_a_superuser(client, admin_user, registry, model):
    client.force_login(admin_user)

    response = client.get(f"/admin/ledger/{model}/")

    assert response.status_code == 200


@pytest.mark.parametrize("model", MODELS)
def test_change_page_renders_for_a_superuser(client, admin_user, registry, model):
    obj = apps.get_model("ledger", model).objects.first()
    client.force_login(admin_user)

    response = client.get(f"/admin/ledger/{model}/{obj.pk}/change/")

    assert response.status_code == 200


# What an administrator types, and the rows (by their labels) it must find.
SEARCHES = {
    "team": ("kb", ["Knowledge base team"]),  # by slug
    "tasktype": ("chat", ["chat"]),
    "license": ("qwen", ["LicenseRef-Qwen-Research"]),
    "licenseacceptance": ("legal", ["LicenseRef-Qwen-Research 2024-07 by legal"]),
    "service": ("kb", ["kb-assistant"]),
    "modelasset": ("qwen", ["Qwen2.5-7B-Instruct@main"]),
    "runtime": ("kb-vllm", ["kb-vllm-h100"]),
    "revision": ("kb-assistant", ["kb-assistant r1"]),  # by the service's slug
    "capability": ("kb-assistant", ["kb-assistant r1 streaming"]),
}


@pytest.mark.parametrize("model", SEARCHES)
def test_changelist_search_finds_the_matching_rows_only(
    client, admin_user, registry, other_registry, model
):
    query, labels = SEARCHES[model]
    client.force_login(admin_user)

    response = client.get(f"/admin/ledger/{model}/", {"q": query})

    changelist = response.context["cl"]
    assert response.status_code == 200
    assert [str(row) for row in changelist.result_list] == labels
    assert _rows_shown(response, model) == [row.pk for row in changelist.result_list]
    assert changelist.full_result_count > len(labels)  # the other team's rows were left out


def test_event_search_finds_an_event_by_its_hash(client, admin_user, registry, other_registry):
    created = Event.objects.get(action="service.created", subject_label="kb-assistant")
    client.force_login(admin_user)

    response = client.get("/admin/ledger/event/", {"q": created.hash})

    assert [row.pk for row in response.context["cl"].result_list] == [created.pk]
    assert _rows_shown(response, "event") == [created.pk]


def test_service_changelist_runs_a_constant_number_of_queries(
    client, admin_user, team, django_assert_num_queries
):
    for _ in range(3):
        revision = RevisionFactory(service__team=team)
        services.set_live_revision(revision.service, revision, actor=None)
    client.force_login(admin_user)
    client.get("/admin/ledger/service/")  # warm the content-type cache

    # session, user, teams and task types for the sidebar filters, COUNT(*) of
    # the filtered and of all services, one page of services joined with team
    # and live revision (with its service, for its label).
    with django_assert_num_queries(7):
        client.get("/admin/ledger/service/")
    for _ in range(3):
        revision = RevisionFactory(service__team=team)
        services.set_live_revision(revision.service, revision, actor=None)
    with django_assert_num_queries(7):
        assert client.get("/admin/ledger/service/").status_code == 200


@pytest.mark.parametrize("model", [*READ_ONLY, "event", "capability"])
def test_registry_rows_cannot_be_added_in_the_admin(client, admin_user, model):
    client.force_login(admin_user)

    assert client.get(f"/admin/ledger/{model}/add/").status_code == 403


def test_a_service_change_page_is_read_only_and_says_why(client, admin_user, registry):
    client.force_login(admin_user)
    url = f"/admin/ledger/service/{registry.service.pk}/change/"
    events_before = Event.objects.count()

    page = client.get(url)
    refused = client.post(url, {"name": "Renamed in the admin"})

    assert page.status_code == 200
    assert "Read-only in the admin" in page.content.decode()
    assert 'name="name"' not in page.content.decode()
    assert refused.status_code == 403
    assert Service.objects.get(pk=registry.service.pk).name != "Renamed in the admin"
    assert Event.objects.count() == events_before


@pytest.mark.parametrize("model", [*READ_ONLY, "capability", "team", "license"])
def test_a_registry_row_cannot_be_deleted_in_the_admin(client, admin_user, registry, model):
    # No verb deletes any of these: a deletion would leave the ledger unrecorded.
    rows = apps.get_model("ledger", model).objects
    row = rows.first()
    count, events_before = rows.count(), Event.objects.count()
    client.force_login(admin_user)
    url = f"/admin/ledger/{model}/{row.pk}/delete/"

    page = client.get(url)
    refused = client.post(url, {"post": "yes"})
    client.post(
        f"/admin/ledger/{model}/",
        {"action": "delete_selected", "_selected_action": [row.pk], "post": "yes"},
    )

    assert (page.status_code, refused.status_code) == (403, 403)
    assert "delete_selected" not in client.get(f"/admin/ledger/{model}/").content.decode()
    assert rows.filter(pk=row.pk).exists()
    assert rows.count() == count
    assert Event.objects.count() == events_before


def test_an_event_cannot_be_changed_even_by_a_superuser(client, admin_user, registry):
    event = Event.objects.order_by("sequence").first()
    client.force_login(admin_user)
    url = f"/admin/ledger/event/{event.pk}/change/"

    page = client.get(url)
    refused = client.post(url, {"action": "forged"})

    assert page.status_code == 200
    assert "append-only" in page.content.decode()
    assert refused.status_code == 403
    assert Event.objects.get(pk=event.pk).action == event.action


def test_an_event_cannot_be_deleted_even_by_a_superuser(client, admin_user, registry):
    event = Event.objects.order_by("sequence").first()
    client.force_login(admin_user)
    url = f"/admin/ledger/event/{event.pk}/delete/"

    assert client.get(url).status_code == 403
    assert client.post(url, {"post": "yes"}).status_code == 403
    assert Event.objects.filter(pk=event.pk).exists()


def test_events_have_no_bulk_delete_action(client, admin_user, registry):
    client.force_login(admin_user)
    event = Event.objects.order_by("sequence").first()

    client.post(
        "/admin/ledger/event/",
        {"action": "delete_selected", "_selected_action": [event.pk], "post": "yes"},
    )

    assert Event.objects.filter(pk=event.pk).exists()
    assert "delete_selected" not in client.get("/admin/ledger/event/").content.decode()


def test_a_superuser_creates_a_team_through_the_domain(client, admin_user, owner):
    client.force_login(admin_user)

    response = client.post(
        "/admin/ledger/team/add/", {"slug": "sql-team", "name": "SQL team", "members": [owner.pk]}
    )

    assert response.status_code == 302
    team = Team.objects.get(slug="sql-team")
    assert list(team.members.all()) == [owner]
    assert [(e.action, e.actor_label) for e in Event.objects.order_by("sequence")] == [
        ("team.created", "root"),
        ("team.members_added", "root"),
    ]


def test_a_superuser_adds_a_team_member_through_the_domain(client, admin_user, owner, team):
    newcomer = UserFactory(username="nina", roles=["model_owner"])
    client.force_login(admin_user)

    response = client.post(
        f"/admin/ledger/team/{team.pk}/change/", {"members": [owner.pk, newcomer.pk]}
    )

    assert response.status_code == 302
    assert set(team.members.all()) == {owner, newcomer}
    event = Event.objects.get()
    assert event.action == "team.members_added"
    assert event.payload_data == {"members": ["nina"]}


def test_removing_a_team_member_in_the_admin_is_refused(client, admin_user, owner, team):
    client.force_login(admin_user)

    response = client.post(f"/admin/ledger/team/{team.pk}/change/", {"members": []})

    assert response.status_code == 200
    assert "Members cannot be removed here yet (olivia)" in response.content.decode()
    assert list(team.members.all()) == [owner]
    assert not Event.objects.exists()


def test_a_team_slug_cannot_be_edited_in_the_admin(client, admin_user, owner, team):
    client.force_login(admin_user)

    client.post(
        f"/admin/ledger/team/{team.pk}/change/",
        {"slug": "renamed", "name": "Renamed", "members": [owner.pk]},
    )

    assert Team.objects.get(pk=team.pk).slug == "kb-team"


def test_a_superuser_classifies_a_license_through_the_domain(client, admin_user):
    client.force_login(admin_user)

    response = client.post(
        "/admin/ledger/license/add/",
        {
            "spdx_id": "LicenseRef-Qwen",
            "name": "Qwen license",
            "kind": "acceptable_use",
            "gated": "on",
            "terms_url": "https://example.com/qwen-license",
        },
    )

    assert response.status_code == 302
    assert License.objects.get(spdx_id="LicenseRef-Qwen").gated is True
    event = Event.objects.get()
    assert (event.action, event.actor_label) == ("license.created", "root")


def test_an_unknown_spdx_id_is_refused_in_the_admin_form(client, admin_user):
    client.force_login(admin_user)

    response = client.post(
        "/admin/ledger/license/add/",
        {"spdx_id": "apache-2", "name": "Apache", "kind": "permissive"},
    )

    assert response.status_code == 200
    assert "Did you mean" in response.content.decode()
    assert not License.objects.exists()
    assert not Event.objects.exists()


def test_a_license_cannot_be_edited_in_the_admin(client, admin_user):
    license_ = LicenseFactory()
    client.force_login(admin_user)
    url = f"/admin/ledger/license/{license_.pk}/change/"

    page = client.get(url)

    assert "has no verb that records a change" in page.content.decode()
    assert client.post(url, {"name": "Changed", "kind": "copyleft"}).status_code == 403


def test_staff_without_superuser_cannot_create_teams(client, db):
    staff = UserFactory(username="stan", is_staff=True)
    client.force_login(staff)

    assert client.get("/admin/ledger/team/add/").status_code == 403
    assert not Team.objects.exists()
