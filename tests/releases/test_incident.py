"""The incident screen and its API: what is live, where a rollback goes and whether it is
safe, what to check for a symptom, what changed, who to call; and the search to it."""

from __future__ import annotations

import datetime as dt

import pytest
from django.urls import reverse
from django.utils import timezone
from playwright.sync_api import expect
from rest_framework.authtoken.models import Token

from ledger import services as ledger_services
from ledger.models import Contact
from releases.governance.playbooks import DEFAULT_PLAYBOOKS
from releases.governance.queries.incident import RollbackInProgress, incident, incident_service
from releases.models import RollbackEvent, UnauthorizedChange
from replay.models import Probe, Run
from tests.factories import PASSWORD, UserFactory
from tests.ledger.factories import ModelAssetFactory, RevisionFactory, ServiceFactory
from tests.replay.factories import BackendFactory, SampleSetFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def kb(team, owner):
    owner.email = "owner@example.com"
    owner.save()
    service = ServiceFactory(slug="kb-assistant", team=team, tier="production")
    r1 = RevisionFactory(service=service)
    r2 = RevisionFactory(
        service=service,
        model_asset=ModelAssetFactory(team=team, name="Qwen2.5-7B-Instruct-AWQ"),
        runtime=r1.runtime,
    )
    ledger_services.set_live_revision(service, r1, actor=None, reason="first")
    ledger_services.set_live_revision(service, r2, actor=owner, cause={"release": 7})
    service.refresh_from_db()
    return service


def _page(client, user, slug="kb-assistant", **params):
    client.force_login(user)
    return client.get(reverse("releases:incident", args=[slug]), params)


def _section(body: str, heading_id: str) -> str:
    return body.split(f'id="{heading_id}"')[1].split("</section>")[0]


def test_the_screen_says_what_is_live_since_when_and_through_what(client, sre, kb):
    body = _page(client, sre).content.decode()
    live = _section(body, "live-heading")
    assert "Qwen2.5-7B-Instruct-AWQ" in live
    assert "r2" in live and "through release #7" in live
    assert "set by olivia" in live
    assert kb.live_revision.runtime.image_digest[:19] in live


def test_the_rollback_target_is_the_revision_that_served_before_with_its_readiness(client, sre, kb):
    rollback = _section(_page(client, sre).content.decode(), "rollback-heading")
    assert "Target" in rollback and "<strong>r1</strong>" in rollback
    assert 'data-readiness="at risk"' in rollback
    assert "r1 has never been verified by a replay run" in rollback
    assert "how long the rollback takes is not recorded" in rollback
    assert "what changes going back" in rollback


def test_picking_a_symptom_shows_its_playbook_in_order(client, sre, kb):
    body = _page(client, sre, symptom="slow_first_token").content.decode()
    playbook = _section(body, "playbook-heading")
    steps = DEFAULT_PLAYBOOKS["slow_first_token"].diagnosis
    positions = [playbook.index(step.split(":")[0]) for step in steps]
    assert positions == sorted(positions)
    assert "Recover, least disruptive first" in playbook
    assert '<option value="slow_first_token" selected>' in playbook


def test_without_a_symptom_every_playbook_is_one_link_away(client, sre, kb):
    playbook = _section(_page(client, sre).content.decode(), "playbook-heading")
    for mode in DEFAULT_PLAYBOOKS:
        assert f'href="?symptom={mode}"' in playbook


def test_changes_of_the_last_72_hours_and_owners_with_how_to_reach_them(client, sre, kb, owner):
    body = _page(client, sre).content.decode()
    assert "service.live_revision_changed" in _section(body, "changes-heading")
    owners = _section(body, "owners-heading")
    assert "mailto:owner@example.com" in owners
    assert "Platform SRE" in owners  # the SRE outside the team is on call for the role


def test_an_owners_phone_is_a_number_to_tap_on_the_screen_and_in_the_api(client, sre, kb, owner):
    Contact.objects.create(user=owner, phone="+86 (10) 8888-1234")
    owners = _section(_page(client, sre).content.decode(), "owners-heading")
    assert '<a class="tel" href="tel:+861088881234">+86 (10) 8888-1234</a>' in owners
    assert "mailto:owner@example.com" in owners  # and the e-mail still
    body = client.get("/api/services/kb-assistant/incident/").json()
    mine = next(o for o in body["owners"] if o["username"] == owner.username)
    assert mine["phone"] == "+86 (10) 8888-1234"


def test_the_changes_say_what_changed_with_revisions_by_their_labels(client, sre, kb):
    ledger_services.update_service(kb, actor=None, name="Knowledge base, EU")
    changes = _section(_page(client, sre).content.decode(), "changes-heading")
    assert "<code>name</code>: <del>" in changes
    assert "<ins>Knowledge base, EU</ins>" in changes
    r1, r2 = kb.revisions.order_by("number")
    assert f"<del>{r1.label}</del> → <ins>{r2.label}</ins>" in changes


def test_every_revision_the_changes_name_is_shown_by_its_label(client, sre, kb, team):
    """r1 → r2 → r3: r3 is live and r2 the target, so the screen has not read r1."""
    r1, r2 = kb.revisions.order_by("number")
    r3 = RevisionFactory(service=kb, model_asset=r2.model_asset, runtime=r2.runtime)
    ledger_services.set_live_revision(kb, r3, actor=None, reason="third")
    changes = _section(_page(client, sre).content.decode(), "changes-heading")
    assert f"<del>{r1.label}</del> → <ins>{r2.label}</ins>" in changes
    assert f"<del>{r2.label}</del> → <ins>{r3.label}</ins>" in changes


def test_open_findings_and_an_unfinished_rollback_are_read_as_recorded(kb, owner):
    """The newest open finding with the count of all open ones, and a rollback not
    finished, exactly as stored (they travel as JSON objects from the database)."""
    live = kb.live_revision
    earlier = timezone.now() - dt.timedelta(hours=2, microseconds=123_457)
    later = earlier + dt.timedelta(minutes=40, microseconds=5)
    for at, reported in ((earlier, "0.7.0"), (later, "0.7.1")):
        UnauthorizedChange.objects.create(
            service=kb,
            expected_revision=live,
            found=[{"what": "engine_version", "registered": "0.6.3", "reported": reported}],
            detected_at=at,
        )
    UnauthorizedChange.objects.create(
        service=kb,
        expected_revision=live,
        found=[],
        detected_at=later,
        reconciled_at=later,
        reconciled_by=owner,
        reconciliation="node 7 restarted with the registered image",
    )
    rollback = RollbackEvent.objects.create(
        service=kb,
        from_revision=live,
        to_revision=kb.revisions.get(number=1),
        reason="canary errors",
        recorded_by=owner,
        started_at=earlier,
        state=RollbackEvent.State.AWAITING_CONFIRMATION,
    )
    screen = incident(incident_service("kb-assistant"))
    assert screen.unauthorized is not None
    assert screen.unauthorized.open_count == 2
    assert screen.unauthorized.detected_at == later
    assert screen.unauthorized.found[0]["reported"] == "0.7.1"
    assert screen.rollback_in_progress == RollbackInProgress(
        rollback.pk, "awaiting_confirmation", earlier
    )


def test_a_service_with_nothing_live_says_so_and_has_no_rollback_target(client, sre, team):
    ServiceFactory(slug="kb-draft", team=team)
    body = _page(client, sre, slug="kb-draft").content.decode()
    assert "No revision of kb-draft is live" in body
    rollback = _section(body, "rollback-heading")
    assert 'data-readiness="not ready"' in rollback
    assert "there is no rollback target" in rollback


def test_an_unknown_service_is_a_404_naming_it(client, sre):
    response = _page(client, sre, slug="nope")
    assert response.status_code == 404


def test_htmx_refresh_gets_only_the_live_parts(client, sre, kb):
    client.force_login(sre)
    response = client.get(
        reverse("releases:incident", args=["kb-assistant"]), HTTP_HX_REQUEST="true"
    )
    body = response.content.decode()
    assert body.lstrip().startswith('<div id="live-parts"')
    assert 'hx-trigger="every 30s"' in body
    assert "Who to call" not in body


def test_the_api_answers_everything_on_the_screen(client, sre, kb):
    client.force_login(sre)
    body = client.get("/api/services/kb-assistant/incident/").json()
    assert set(body) >= {"live", "rollout", "rollback", "playbooks", "changes_72h", "owners"}
    assert body["live"]["model"].startswith("Qwen2.5-7B-Instruct-AWQ@")
    assert body["live"]["set_by"]["cause"] == {"release": 7}
    rollback = body["rollback"]
    assert set(rollback) >= {"target", "kind", "expected_minutes", "readiness", "last_verification"}
    assert rollback["target"]["number"] == 1
    assert rollback["readiness"]["verdict"] == "at risk"
    assert rollback["last_verification"] is None
    assert body["rollout"] is None
    assert body["playbooks"][0]["mode"] == "slow_first_token"
    assert body["changes_72h"][0]["action"] == "service.live_revision_changed"
    assert {
        "role": "model_owner",
        "name": kb.team.members.first().get_full_name() or kb.team.members.first().username,
        "username": kb.team.members.first().username,
        "email": "owner@example.com",
        "phone": "",
    } in body["owners"]


def test_the_api_404s_on_an_unknown_service(client, sre):
    client.force_login(sre)
    response = client.get("/api/services/nope/incident/")
    assert response.status_code == 404
    assert response.json()["detail"] == "There is no service 'nope'."


def test_the_screen_and_the_api_ask_a_bounded_number_of_queries(
    client, sre, kb, team, django_assert_max_num_queries
):
    """With a probed and replayed live backend, a verified target, people in the team
    and changes in the window; more of each does not add queries."""
    target = kb.revisions.get(number=1)
    backend = BackendFactory(revision=kb.live_revision)
    for n in range(3):
        member = UserFactory(username=f"member-{n}", roles=["model_owner"])
        Contact.objects.create(user=member, phone=f"+86 138 0000 000{n}")  # joined, not asked
        team.members.add(member)
        ledger_services.update_service(kb, actor=None, name=f"Knowledge base {n}")
        Probe.objects.create(
            backend=backend,
            fingerprint=kb.live_revision.fingerprint,
            started_at=timezone.now(),
            reachable=True,
        )
        for revision, trigger in (
            (kb.live_revision, Run.Trigger.SCHEDULE),
            (target, Run.Trigger.VERIFICATION),
        ):
            Run.objects.create(
                backend=backend,
                revision=revision,
                sample_set=SampleSetFactory(),
                fingerprint=revision.fingerprint,
                state=Run.State.FINISHED,
                verdict=Run.Verdict.PASSED,
                trigger=trigger,
                finished_at=timezone.now(),
            )
    token = Token.objects.create(user=sre)
    # 1 the token and its user; the service with its annotations; the serving history
    # and the revision that served before (no plan is in force here); the revisions
    # rolled back off the service; health's backends, probes and runs; the target's
    # reports, capabilities (for the diff) and last verification, and what verifying it
    # now would use; the changes of the window; the people to call; what the gateway
    # should be doing (its four reads of the rendered config and the backends' names).
    with django_assert_max_num_queries(19):
        response = client.get(
            "/api/services/kb-assistant/incident/", HTTP_AUTHORIZATION=f"Token {token.key}"
        )
    assert response.json()["health"]["word"] == "healthy"
    assert response.json()["rollback"]["last_verification"] is not None
    client.force_login(sre)
    # The session and its user instead of the token, the reader's permissions (whether
    # to offer "Record rollback") and roles (whether to offer "Verify now"); what the
    # gateway should be doing (the services, rolling releases and their stages, the
    # backends, as the rendered config reads them, and the backends' names), and the
    # reader's roles once more (may they check the gateway now).
    with django_assert_max_num_queries(22):
        client.get(reverse("releases:incident", args=["kb-assistant"]))


def test_search_one_match_goes_to_its_incident_screen(client, sre, kb):
    client.force_login(sre)
    response = client.get(reverse("releases:search"), {"q": "qwen2.5"})  # the live model's name
    assert response.status_code == 302
    assert response["Location"] == reverse("releases:incident", args=["kb-assistant"])


def test_search_several_matches_are_listed_and_none_says_so(client, sre, kb, team):
    ServiceFactory(slug="kb-search", team=team)
    client.force_login(sre)
    body = client.get(reverse("releases:search"), {"q": "kb-"}).content.decode()
    assert body.count('class="search-results"') == 1
    assert "kb-assistant" in body and "kb-search" in body
    body = client.get(reverse("releases:search"), {"q": "zzz"}).content.decode()
    assert "No service or live model matches “zzz”" in body


@pytest.mark.browser
def test_on_a_phone_without_javascript_every_section_reads(live_server, browser, sre, kb):
    context = browser.new_context(java_script_enabled=False, viewport={"width": 390, "height": 800})
    page = context.new_page()
    page.goto(f"{live_server.url}/accounts/login/")
    page.get_by_label("Username").fill(sre.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.goto(f"{live_server.url}/services/kb-assistant/incident/")

    for heading in (
        "What is live",
        "Rollout",
        "Rollback",
        "What to check first",
        "Changes in the last 72 hours",
        "Who to call",
    ):
        expect(page.get_by_role("heading", name=heading, exact=True)).to_be_visible()
    page.get_by_label("The symptom you see").select_option("stream_interruption")
    page.get_by_role("button", name="Show the playbook").click()
    expect(page.get_by_role("heading", name="Stream interruption")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    context.close()


def test_changes_to_what_serves_come_first_and_the_rest_links_to_the_whole_period(client, sre, kb):
    from ledger.chain import append_event
    from releases.governance.queries.incident import CHANGES_LISTED

    for n in range(CHANGES_LISTED + 5):  # sign-off noise, newer than the live changes
        append_event(actor=None, action="release.signed_off", subject=kb, payload={"n": n})
    body = _page(client, sre).content.decode()
    changes = _section(body, "changes-heading")
    serving = changes[changes.index('id="serving-changes"') : changes.index('id="other-changes"')]
    assert serving.count('data-action="service.live_revision_changed"') == 2
    others = changes[changes.index('id="other-changes"') :]
    assert others.count('data-action="release.signed_off"') == CHANGES_LISTED - 2
    since = timezone.localtime(timezone.now() - dt.timedelta(hours=72))
    link = f'href="/events/?service=kb-assistant&amp;date_from={since:%Y-%m-%d}"'
    assert link in changes
    assert f"Only {CHANGES_LISTED} are listed here: every change of kb-assistant" in changes
