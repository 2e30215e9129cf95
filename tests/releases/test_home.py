"""Home is where each person starts: what needs them now, what changed in the last day."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.urls import reverse
from django.utils import timezone
from playwright.sync_api import expect

from ledger import services as ledger_services
from ledger.chain import append_event
from ledger.models import Event, ModelAsset
from releases.overview.queries import attention
from replay.models import Probe
from tests.factories import PASSWORD
from tests.ledger.evidence.conftest import import_file, sample_asset, sample_runtime
from tests.ledger.factories import ModelAssetFactory, RevisionFactory, ServiceFactory
from tests.replay.factories import BackendFactory

pytestmark = pytest.mark.django_db

# What the home page of a model owner with one service and three releases of theirs costs
# (test_home_answers_in_a_fixed_number_of_queries names them).
HOME_QUERIES = 23


def _live(service):
    revision = RevisionFactory(service=service)
    ledger_services.set_live_revision(service, revision, actor=None)
    service.refresh_from_db()
    return revision


def _home(client, user):
    client.force_login(user)
    response = client.get(reverse("home"))
    assert response.status_code == 200
    return response


def test_an_unreachable_live_backend_of_my_team_asks_me_to_act(client, owner, team):
    service = ServiceFactory(slug="kb-assistant", team=team)
    backend = BackendFactory(name="kb-vllm", revision=_live(service))
    Probe.objects.create(
        backend=backend,
        fingerprint=backend.revision.fingerprint,
        started_at=timezone.now() - dt.timedelta(minutes=3),
        reachable=False,
        error="connection refused",
    )

    items = _home(client, owner).context["attention"].items

    assert [(i.urgency, i.subject) for i in items] == [("act", "kb-assistant")]
    assert items[0].text.startswith("unreachable: ")
    assert "connection refused" in items[0].text
    assert items[0].url == reverse("releases:service_detail", args=["kb-assistant"])


def test_a_live_service_nobody_probes_is_worth_a_look_and_one_without_a_live_revision_is_not(
    client, owner, team
):
    _live(ServiceFactory(slug="kb-assistant", team=team))
    ServiceFactory(slug="kb-draft", team=team)

    response = _home(client, owner)

    items = response.context["attention"].items
    assert [(i.urgency, i.subject) for i in items] == [("look", "kb-assistant")]
    assert "no enabled backend serves the live revision" in items[0].text
    assert (
        "kb-draft"
        not in response.content.decode().split("What needs you now")[1].split("</section>")[0]
    )


def test_services_of_other_teams_do_not_reach_my_list(client, owner, team):
    _live(ServiceFactory(slug="someone-elses"))

    response = _home(client, owner)

    assert response.context["attention"].items == []
    assert "You are in no team that owns a service" in response.content.decode()

    ServiceFactory(slug="kb-draft", team=team)
    body = _home(client, owner).content.decode()
    assert "Nothing needs you: the live revisions of your teams' 1 service are" in body


def test_lapsed_evidence_of_the_live_revision_asks_me_to_act(client, owner, team):
    service = ServiceFactory(slug="kb-assistant", team=team, tier="production")
    measured = timezone.now() - dt.timedelta(days=120)
    with time_machine.travel(measured, tick=False):
        # The parts the sample file measured (gemma-3-270m on llama.cpp), so only its age is wrong.
        revision = RevisionFactory(
            service=service, model_asset=sample_asset(team), runtime=sample_runtime(team)
        )
        ledger_services.set_live_revision(service, revision, actor=None)
        import_file(revision, "vllm", "vllm_c2_n20_detailed.json", workload="high_concurrency")

    texts = [i.text for i in _home(client, owner).context["attention"].items if i.urgency == "act"]

    assert len(texts) == 1
    assert texts[0].startswith(f"high_concurrency evidence of {revision.label} is stale: measured ")
    assert "production services accept evidence up to 90 days old" in texts[0]


def test_pending_licenses_wait_for_security_and_compliance_only(client, security, owner):
    asset = ModelAssetFactory(name="Qwen2.5-7B-Instruct")
    assert asset.license_approval == ModelAsset.LicenseApproval.PENDING

    security_items = _home(client, security).context["attention"].items
    owner_items = _home(client, owner).context["attention"].items

    assert [(i.subject, i.url) for i in security_items] == [
        (str(asset), reverse("ledger:asset_detail", args=[asset.pk]))
    ]
    assert "waits for your review" in security_items[0].text
    assert owner_items == []


def test_only_the_first_services_are_checked_and_the_page_says_so(client, owner, team, settings):
    for n in range(attention.MAX_SERVICES_CHECKED + 2):
        ServiceFactory(slug=f"svc-{n:02d}", team=team)

    response = _home(client, owner)

    assert response.context["attention"].services_checked == attention.MAX_SERVICES_CHECKED
    assert (
        f"Checked the first {attention.MAX_SERVICES_CHECKED} of your teams' "
        f"{attention.MAX_SERVICES_CHECKED + 2} services" in response.content.decode()
    )


def test_the_last_day_of_changes_is_listed_and_older_ones_are_not(client, auditor):
    with time_machine.travel(timezone.now() - dt.timedelta(hours=30), tick=False):
        append_event(actor=None, action="test.old", subject=("test", "1"), payload={})
    append_event(actor=None, action="test.new", subject=("test", "2"), payload={})

    response = _home(client, auditor)

    recent = response.context["recent"]
    assert [e.action for e in recent.events] == ["test.new"]
    assert recent.count == 1
    body = response.content.decode()
    assert "test.new" in body and "test.old" not in body
    assert "All 1 change of the last 24 hours" in body
    assert Event.objects.count() == 2


def test_nothing_changed_says_so(client, auditor):
    body = _home(client, auditor).content.decode()
    assert "Nothing changed in the last 24 hours." in body


def test_role_duties_promise_only_what_exists(client, owner, auditor, sre, security, business):
    owner_body = _home(client, owner).content.decode()
    auditor_body = _home(client, auditor).content.decode()
    assert "attach load-test evidence" in owner_body
    assert "file release forms" in owner_body
    assert "verify the event chain" in auditor_body
    assert "sign off releases for platform" in _home(client, sre).content.decode()
    assert "sign off releases for security" in _home(client, security).content.decode()
    business_body = _home(client, business).content.decode()
    assert "sign off releases for the business owner" in business_body
    assert "arrive with release forms" not in business_body
    for promise in ("gray rollouts", "record rollbacks", "filter and export"):
        assert promise not in owner_body + auditor_body


def test_a_release_waiting_for_my_signoff_is_on_my_list(client, owner, team, sre):
    from releases.governance import services
    from tests.releases.factories import build_world, file_release

    release = file_release(build_world(team), owner)
    services.submit_release(release, actor=owner)

    items = _home(client, sre).context["attention"].items

    waiting = [i for i in items if "sign-off" in i.text]
    assert [(i.urgency, i.subject) for i in waiting] == [("look", "kb-assistant")]
    assert waiting[0].text == (
        f"release #{release.pk} ({release.to_revision.label}) waits for your sign-off as platform"
    )
    assert waiting[0].url == reverse("releases:release_detail", args=[release.pk]) + "#signoffs"
    # The filer's own list does not ask them to sign it.
    assert not [i for i in _home(client, owner).context["attention"].items if "sign-off" in i.text]


@pytest.mark.browser
def test_search_from_home_on_a_phone_goes_to_the_one_matching_service(
    live_server, page, owner, team
):
    ServiceFactory(slug="kb-assistant", name="Knowledge base assistant", team=team)
    ServiceFactory(slug="dataagent-sql", team=team)
    page.set_viewport_size({"width": 390, "height": 800})
    page.goto(f"{live_server.url}/accounts/login/")
    page.get_by_label("Username").fill(owner.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="What needs you now")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= 390

    page.get_by_label("Find a service or model").fill("kb-")
    page.keyboard.press("Enter")

    # One match goes straight to its incident screen.
    expect(page).to_have_url(f"{live_server.url}/services/kb-assistant/incident/")
    expect(page.get_by_role("heading", level=1)).to_contain_text("kb-assistant")


def _rejected(world, owner, signers, business, comment="not before the quarter closes"):
    from releases.governance import services
    from tests.releases.factories import file_release

    release = file_release(world, owner)
    services.submit_release(release, actor=owner)
    services.sign_off(
        release, actor=business, role="business_owner", decision="reject", comment=comment
    )
    release.refresh_from_db()
    return release


def test_the_filer_is_told_of_a_rejection_and_of_what_waits_for_them(
    client, owner, team, signers, business
):
    from releases.governance import services
    from tests.releases.factories import approve, build_world, file_release

    world = build_world(team)
    rejected = _rejected(world, owner, signers, business)
    approved = approve(file_release(world, owner), owner, signers)
    draft = file_release(world, owner)

    items = _home(client, owner).context["attention"].items
    mine = {i.url: i for i in items if "release #" in i.text}

    said = mine[reverse("releases:release_detail", args=[rejected.pk]) + "#signoffs"]
    assert said.urgency == "act"
    assert said.text == (
        f"release #{rejected.pk} ({rejected.to_revision.label}) was rejected by ben for the "
        "business owner: “not before the quarter closes”; reopen it as a new draft, or leave it"
    )
    start = mine[reverse("releases:release_detail", args=[approved.pk]) + "#rollout"]
    assert start.urgency == "look"
    assert start.text == (
        f"release #{approved.pk} ({approved.to_revision.label}) is approved: its rollout "
        "waits for you to start it"
    )
    finish = mine[reverse("releases:release_detail", args=[draft.pk])]
    assert finish.text == (
        f"release #{draft.pk} ({draft.to_revision.label}) is a draft: submit it once its gates pass"
    )
    # Reopened, the rejection has been acted on; others' releases are not on the list.
    services.reopen_release(rejected, actor=owner)
    texts = [i.text for i in _home(client, owner).context["attention"].items]
    assert not [t for t in texts if "was rejected" in t]
    assert not [i for i in _home(client, business).context["attention"].items if "draft" in i.text]


def test_home_answers_in_a_fixed_number_of_queries(
    client, owner, team, signers, business, django_assert_num_queries
):
    from tests.releases.factories import approve, build_world, file_release

    world = build_world(team)
    _rejected(world, owner, signers, business)
    approve(file_release(world, owner), owner, signers)
    file_release(world, owner)
    client.force_login(owner)
    approve(file_release(world, owner), owner, signers)  # a second one: no query more
    client.force_login(owner)
    # The session, the user and their roles (3); their teams' services counted, then for
    # the rollout items whether any exists, breached or held stages, rollbacks to confirm
    # and unauthorized changes, after the permissions (6); the services, and for the one
    # service its live backend, its runs and its live evidence (4); the person's own
    # releases, their rejections and, once for the team, whether they may start one (3);
    # waiting for their sign-off: their teams and the sign-offs and releases it reads (3);
    # their open reviews and review actions (2); the last day's events and their count (2).
    with django_assert_num_queries(HOME_QUERIES):
        response = client.get(reverse("home"))
    assert response.status_code == 200
    assert len([i for i in response.context["attention"].items if "approved" in i.text]) == 2
