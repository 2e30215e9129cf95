"""The candidate's gateway policy, edited from the release form: a new routing release
starts from a recorded version, a draft's candidate changes to the revision running the
edited version, and nothing is written when the draft is refused, stale or not a draft."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest
from django.urls import reverse

from ledger import services as ledger_services
from ledger.models import Event, GatewayPolicy, Revision
from ledger.services.gateway_policies import create_gateway_policy
from releases.models import Release
from tests.ledger.factories import RevisionFactory
from tests.releases.factories import approve, build_world, complete_policy, file_release

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def world(team):
    world = build_world(team)
    build_world(team, slug="kb-long", tier="internal")
    return world


def _new(slug: str = "kb-assistant") -> str:
    return reverse("releases:release_new_policy", args=[slug])


def _of(release: Release) -> str:
    return reverse("releases:release_policy", args=[release.pk])


def _posted(response, **changes: str) -> dict[str, str]:
    """What the browser would post back: the editor's fields as rendered, then `changes`
    (named without the form's prefix)."""
    form = response.context["form"]
    data = {}
    for name in form.fields:
        value = form[name].value()
        data[form.add_prefix(name)] = "" if value is None else str(value)
    data.update({form.add_prefix(k) if k in form.fields else k: v for k, v in changes.items()})
    return data


def _written(world) -> tuple[int, int, int]:
    return (
        GatewayPolicy.objects.filter(service=world.service).count(),
        Revision.objects.filter(service=world.service).count(),
        Event.objects.count(),
    )


def test_the_editor_starts_from_the_live_policy_and_answers_a_fragment_to_htmx(
    client, owner, world
):
    client.force_login(owner)

    page = client.get(_new())
    fragment = client.get(_new(), **HTMX)

    assert page.status_code == fragment.status_code == 200
    assert page.context["form"]["limits_max_output_tokens"].value() == 1024
    assert 'name="policy-limits_max_output_tokens"' in page.content.decode()
    assert "<html" in page.content.decode()
    text = fragment.content.decode()
    assert "<html" not in text and 'id="release-policy"' in text
    assert f"The candidate {world.live.label} runs" in text and "the version in force" in text


def test_preview_on_a_new_release_judges_the_draft_and_writes_nothing(client, owner, world):
    client.force_login(owner)
    before = _written(world)
    data = _posted(client.get(_new()), limits_max_output_tokens="512", action="preview")

    response = client.post(_new(), data, **HTMX)

    assert response.status_code == 200
    text = response.content.decode()
    assert (
        "max_output_tokens 1024 → 512: long answers for tenants support, sales will be truncated"
        in text
    )
    assert _written(world) == before


def test_record_on_a_new_release_opens_the_form_on_the_revision_running_it(client, owner, world):
    client.force_login(owner)
    data = _posted(
        client.get(_new()), limits_max_output_tokens="512", note="sales peak", action="record"
    )

    response = client.post(_new(), data)

    assert response.status_code == 302
    location = urlsplit(response["Location"])
    assert location.path == reverse("releases:release_new", args=["kb-assistant"])
    query = parse_qs(location.query)
    assert query["change_kind"] == ["routing"]
    candidate = Revision.objects.get(pk=int(query["to_revision"][0]))
    v2 = GatewayPolicy.objects.get(service=world.service, version=2)
    assert candidate.gateway_policy == v2 and v2.note == "sales peak"
    assert v2.document["limits"]["max_output_tokens"] == 512
    assert (candidate.model_asset_id, candidate.runtime_id) == (
        world.live.model_asset_id,
        world.live.runtime_id,
    )
    assert Event.objects.filter(action="gateway_policy.created", subject_id=str(v2.pk)).exists()
    form_page = client.get(response["Location"])
    assert form_page.context["form"].initial == {
        "to_revision": candidate.pk,
        "change_kind": "routing",
        # A new release touches every tenant and task type of the service until the
        # filer says otherwise.
        "impact_tenants": ["support", "sales"],
        "impact_task_types": [],
    }
    assert "Recorded gateway policy v2" in form_page.content.decode()


def test_htmx_is_sent_to_the_release_form_as_a_whole_page(client, owner, world):
    client.force_login(owner)
    data = _posted(client.get(_new()), retries_num_retries="4", action="record")

    response = client.post(_new(), data, **HTMX)

    assert response.status_code == 200
    assert response["HX-Redirect"].startswith(
        reverse("releases:release_new", args=["kb-assistant"])
    )


def test_a_draft_saying_what_a_version_already_says_reuses_that_version(client, owner, world):
    stricter = complete_policy(world.service)
    stricter["limits"]["max_output_tokens"] = 256
    v2 = create_gateway_policy(world.service, actor=None, document=stricter)
    client.force_login(owner)
    data = _posted(client.get(_new()), limits_max_output_tokens="256", action="record")

    response = client.post(_new(), data, follow=True)

    assert GatewayPolicy.objects.filter(service=world.service).count() == 2
    assert response.context["form"].initial["to_revision"] == (
        Revision.objects.get(service=world.service, gateway_policy=v2).pk
    )
    assert "v2 already said this, so nothing new was recorded" in response.content.decode()


def test_the_same_policy_as_the_candidate_runs_is_refused_and_writes_nothing(client, owner, world):
    client.force_login(owner)
    before = _written(world)
    data = _posted(client.get(_new()), action="record")

    response = client.post(_new(), data)

    assert response.status_code == 400
    assert (
        f"This is what v1, which {world.live.label} runs, already says: nothing changes."
        in " ".join(response.context["form"].non_field_errors())
    )
    assert _written(world) == before


def test_a_refused_document_names_the_path_and_writes_nothing(client, owner, world):
    client.force_login(owner)
    before = _written(world)
    data = _posted(client.get(_new()), fallback_error="nowhere", action="record")

    response = client.post(_new(), data)

    assert response.status_code == 200  # judged, shown, not recorded
    assert "fallbacks[0].to_service: there is no service nowhere." in response.content.decode()
    assert _written(world) == before


def test_a_drafts_candidate_becomes_the_revision_running_the_edited_policy(client, owner, world):
    release = file_release(world, owner, change_kind=Release.ChangeKind.ROUTING)
    client.force_login(owner)
    editor = client.get(_of(release))
    assert editor.context["form"]["limits_timeout_s"].value() == 60
    data = _posted(editor, limits_timeout_s="45", action="record")
    data["for_revision"] = str(world.candidate.pk)

    response = client.post(_of(release), data)

    assert response.status_code == 302
    assert response["Location"] == reverse("releases:release_edit", args=[release.pk])
    release.refresh_from_db()
    candidate = release.to_revision
    assert candidate.gateway_policy.document["limits"]["timeout_s"] == 45
    # Like the release's candidate, not like the live revision: its model stays.
    assert candidate.based_on_id == world.candidate.pk
    assert candidate.model_asset_id == world.candidate.model_asset_id
    updated = (
        Event.objects.filter(action="release.updated", subject_id=str(release.pk)).last()
    ).payload_data
    assert updated["before"]["to_revision"] != updated["after"]["to_revision"]
    page = client.get(_of(release)).content.decode()
    assert "timeout_s 60 → 45: requests running longer than 45 s will be cut off" in page


def test_a_stale_editor_records_nothing_and_shows_the_current_candidate(client, owner, world):
    release = file_release(world, owner, change_kind=Release.ChangeKind.ROUTING)
    client.force_login(owner)
    data = _posted(client.get(_of(release)), limits_timeout_s="45", action="record")
    data["for_revision"] = str(world.live.pk)  # the candidate when the editor was opened
    before = _written(world)

    response = client.post(_of(release), data, **HTMX)

    assert response.status_code == 400
    assert f"The candidate changed to {world.candidate.label}" in response.content.decode()
    assert _written(world) == before
    release.refresh_from_db()
    assert release.to_revision_id == world.candidate.pk


def test_a_submitted_release_shows_its_policy_and_changes_nothing(client, owner, world):
    release = approve(file_release(world, owner), owner, {})
    assert release.state == Release.State.SUBMITTED
    client.force_login(owner)

    page = client.get(_of(release))
    refused = client.post(
        _of(release), {"for_revision": world.candidate.pk, "action": "record"}, **HTMX
    )

    assert page.context["form"] is None
    assert "This release is submitted" in page.content.decode()
    assert refused.status_code == 400
    assert "its candidate changes only while a draft" in refused.content.decode()
    release.refresh_from_db()
    assert release.to_revision_id == world.candidate.pk


def test_only_the_teams_model_owners_change_it(client, owner, sre, world):
    release = file_release(world, owner, change_kind=Release.ChangeKind.ROUTING)
    client.force_login(sre)
    before = _written(world)

    assert client.get(_new()).status_code == 403
    read = client.get(_of(release))
    refused = client.post(_of(release), {"for_revision": world.candidate.pk, "action": "record"})

    assert read.status_code == 200 and read.context["form"] is None
    assert refused.status_code == 403
    assert _written(world) == before


def test_the_release_form_holds_the_editor_open_on_a_routing_change(client, owner, world):
    client.force_login(owner)
    release = file_release(world, owner, change_kind=Release.ChangeKind.ROUTING)

    routing = client.get(reverse("releases:release_edit", args=[release.pk])).content.decode()
    model = client.get(
        reverse("releases:release_new", args=["kb-assistant"]) + "?change_kind=model_upgrade"
    ).content.decode()

    assert f'hx-get="{_of(release)}"' in routing
    assert '<details class="release-policy-box" open>' in routing
    assert f'href="{_new()}"' in model  # the editor as a page, without JavaScript
    assert '<details class="release-policy-box">' in model


def test_a_save_that_changes_the_candidate_tells_the_editor(client, owner, world):
    release = file_release(world, owner, change_kind=Release.ChangeKind.ROUTING)
    other = RevisionFactory(
        service=world.service,
        runtime=world.candidate.runtime,
        gateway_policy_version=world.candidate.gateway_policy.label,
    )
    ledger_services.set_license_approval(other.model_asset, actor=None, approval="approved")
    client.force_login(owner)
    url = reverse("releases:release_edit", args=[release.pk])
    form = client.get(url).context["form"]
    data = {bf.html_name: bf.value() for bf in form if bf.value() not in (None, [], "")}
    for name in ("impact_tenants", "impact_task_types", "required_sample_sets"):
        data[name] = form.fields[name].prepare_value(data.get(name) or [])
    data["rollback_triggers"] = "\n".join(release.rollback_triggers)

    same = client.post(url, {**data, "summary": "Shorter answers"}, headers={"HX-Request": "true"})
    moved = client.post(url, {**data, "to_revision": str(other.pk)}, headers={"HX-Request": "true"})

    assert same.status_code == moved.status_code == 200
    assert "HX-Trigger" not in same
    assert moved["HX-Trigger"] == "candidate-changed"
    release.refresh_from_db()
    assert release.to_revision_id == other.pk
