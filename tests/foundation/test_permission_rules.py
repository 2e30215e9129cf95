"""Each permission rule is one function, and pages and the API agree with it.

For every rule and every kind of person, the page that offers the action and
the API endpoint that performs it either both let the person through or both
answer 403, and the rule function says the same. The requests are ones a
permitted person would see answered (a form, or a 400 for an empty body), so
nothing is written either way.
"""

from __future__ import annotations

import datetime as dt
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from django.utils import timezone

from ledger import permissions as ledger_rules
from ledger import services
from ledger.models import Event, Service
from releases import permissions as release_rules
from releases.governance import services as release_services
from releases.models import Review
from releases.reviews.services.periodic_reviews import sweep_reviews
from replay import permissions as replay_rules
from tests.factories import UserFactory
from tests.ledger.factories import RevisionFactory, ServiceFactory, TeamFactory
from tests.replay.factories import BackendFactory

PEOPLE = [
    "superuser",
    "owner",
    "owner_of_another_team",
    "owner_without_team",
    "sre",
    "security",
    "business",
    "auditor",
    "outsider",
]


@dataclass(frozen=True)
class Rule:
    allows: Callable[[Any, Any], bool]  # (user, world) -> bool
    page: Callable[[Any], str]  # world -> URL of the page offering the action
    api: Callable[[Any], tuple[str, str]]  # world -> (method, URL) performing it
    body: Callable[[Any], dict[str, Any]] = lambda w: {}  # world -> what the API is sent


RULES: dict[str, Rule] = {
    "plan a drill": Rule(
        allows=lambda user, w: release_rules.can_plan_some_drill(user),
        page=lambda w: "/drills/new/",
        api=lambda w: ("post", "/api/drills/"),
    ),
    "create in the registry": Rule(
        allows=lambda user, w: ledger_rules.can_create(user),
        page=lambda w: "/services/new",
        api=lambda w: ("post", "/api/services/"),
    ),
    "edit a team's registry objects": Rule(
        allows=lambda user, w: ledger_rules.can_edit_team_objects(user, w.service.team),
        page=lambda w: f"/services/{w.service.slug}/edit",
        api=lambda w: ("patch", f"/api/services/{w.service.slug}/"),
    ),
    "review a license": Rule(
        allows=lambda user, w: ledger_rules.can_approve_licenses(user),
        page=lambda w: f"/assets/{w.asset.pk}/license-review",
        api=lambda w: ("post", f"/api/assets/{w.asset.pk}/license-review/"),
    ),
    "record accepting a gated license": Rule(
        allows=lambda user, w: ledger_rules.can_record_license_acceptance(user, w.asset),
        page=lambda w: f"/assets/{w.asset.pk}/license-acceptance",
        api=lambda w: ("post", f"/api/assets/{w.asset.pk}/license-acceptances/"),
    ),
    "register a backend": Rule(
        allows=lambda user, w: replay_rules.can_register_backends(user),
        page=lambda w: "/replay/backends/new",
        api=lambda w: ("post", "/api/replay/backends/"),
    ),
    "manage a backend": Rule(
        allows=lambda user, w: replay_rules.can_manage_backend(user, w.backend.revision),
        page=lambda w: f"/replay/backends/{w.backend.name}/edit",
        api=lambda w: ("patch", f"/api/replay/backends/{w.backend.name}/"),
    ),
    "import sample sets": Rule(
        allows=lambda user, w: replay_rules.can_manage_sample_sets(user),
        page=lambda w: "/replay/sample-sets/import",
        api=lambda w: ("post", "/api/replay/sample-sets/import/"),
    ),
    "request an audit export": Rule(
        allows=lambda user, w: release_rules.can_request_exports(user),
        page=lambda w: "/audit/exports/new/",
        api=lambda w: ("post", "/api/exports/"),
    ),
    "manage webhook subscriptions": Rule(
        allows=lambda user, w: release_rules.can_manage_webhooks(user),
        page=lambda w: "/webhooks/new/",
        api=lambda w: ("post", "/api/webhooks/"),
    ),
    "file a release": Rule(
        allows=lambda user, w: release_rules.can_file_release(user, w.service),
        page=lambda w: f"/services/{w.service.slug}/releases/new/",
        api=lambda w: ("post", "/api/releases/"),
        # Naming the service, and nothing else a draft needs: a 400 for who may.
        body=lambda w: {"service": w.service.slug},
    ),
    "record a rollback": Rule(
        allows=lambda user, w: release_rules.can_record_rollback(user, w.service),
        page=lambda w: f"/services/{w.service.slug}/rollbacks/new/",
        api=lambda w: ("post", f"/api/services/{w.service.slug}/rollbacks/"),
    ),
    "abort a rollout": Rule(
        allows=lambda user, w: release_rules.can_promote(user, w.release),
        page=lambda w: f"/releases/{w.release.pk}/rollout/abort/",
        api=lambda w: ("post", f"/api/releases/{w.release.pk}/abort/"),
    ),
    "end a stage's observation window early": Rule(
        allows=lambda user, w: release_rules.can_end_observation_window(user, w.release),
        page=lambda w: f"/releases/{w.release.pk}/rollout/end-window/",
        api=lambda w: ("post", f"/api/releases/{w.release.pk}/end-window/"),
    ),
    "hold a rollout": Rule(
        allows=lambda user, w: release_rules.can_hold(user, w.release),
        page=lambda w: f"/releases/{w.release.pk}/rollout/hold/",
        api=lambda w: ("post", f"/api/releases/{w.release.pk}/hold/"),
    ),
    "conclude a review": Rule(
        allows=lambda user, w: release_rules.can_conduct_review(user, w.review),
        page=lambda w: f"/reviews/{w.review.pk}/conclude/",
        api=lambda w: ("post", f"/api/reviews/{w.review.pk}/conclusion/"),
    ),
    "change a release form": Rule(
        allows=lambda user, w: release_rules.can_edit_release(user, w.release),
        page=lambda w: f"/releases/{w.release.pk}/edit/",
        api=lambda w: ("patch", f"/api/releases/{w.release.pk}/"),
    ),
}


@dataclass
class World:
    service: Any
    backend: Any
    people: dict[str, Any]
    release: Any = None
    review: Any = None

    @property
    def asset(self) -> Any:
        return self.backend.revision.model_asset


@pytest.fixture
def world(db, owner, sre, security, business, auditor, outsider, team):
    service = ServiceFactory(slug="kb-assistant", team=team)
    revision = RevisionFactory(service=service)
    services.set_live_revision(service, revision, actor=None)
    other = UserFactory(username="oscar", roles=["model_owner"])
    TeamFactory(slug="data-team", members=[other])
    people = {
        "superuser": UserFactory(username="root-user", is_superuser=True, is_staff=True),
        "owner": owner,
        "owner_of_another_team": other,
        "owner_without_team": UserFactory(username="nina", roles=["model_owner"]),
        "sre": sre,
        "security": security,
        "business": business,
        "auditor": auditor,
        "outsider": outsider,
    }
    release = release_services.create_release(
        actor=None,
        filed_by=owner,
        service=service,
        to_revision=RevisionFactory(service=service),
        change_kind="model_upgrade",
        summary="a candidate",
    )
    # A review raised by the sweep, its cadence due: assigned to the platform SRE.
    Service.objects.filter(pk=service.pk).update(
        created_at=timezone.now() - dt.timedelta(days=service.review_cadence_days + 1)
    )
    sweep_reviews()
    review = Review.objects.get(service=service)
    assert review.assignee == sre
    backend = BackendFactory(name="kb-vllm", revision=revision)
    return World(service, backend, people, release, review)


@pytest.mark.parametrize("who", PEOPLE)
@pytest.mark.parametrize("rule_name", sorted(RULES))
def test_page_and_api_follow_the_one_rule(client, world, rule_name, who):
    rule = RULES[rule_name]
    user = world.people[who]
    client.force_login(user)
    events = Event.objects.count()

    page = client.get(rule.page(world))
    method, url = rule.api(world)
    api = getattr(client, method)(url, rule.body(world), content_type="application/json")

    allowed = rule.allows(user, world)
    assert (page.status_code != 403, api.status_code != 403) == (allowed, allowed), (
        f"{who}: rule says {allowed}, page {page.status_code}, API {api.status_code}"
    )
    if allowed:
        assert page.status_code == 200
        assert api.status_code in (200, 400)
    assert Event.objects.count() == events


def test_every_rule_both_allows_and_refuses_someone(world):
    # A matrix where a rule says the same for everyone could not catch a disagreement.
    for name, rule in RULES.items():
        verdicts = {rule.allows(world.people[who], world) for who in PEOPLE}
        assert verdicts == {True, False}, name


# The `can_…` rules this matrix does not ask, each with why: no page and API pair that
# answers 403 for it without writing, or a pair that needs what this world has not (a
# release in another state, a gate that fails), pinned where named.
NO_PAGE_API_PAIR: dict[str, str] = {
    "ledger.permissions.can_set_live": "asked only by the verb (ledger.services.registry)",
    "ledger.permissions.can_record_run_summary": "an API for the gateway only; no page",
    "ledger.permissions.can_ingest_traces": (
        "OTLP's endpoint only (a token, no session, no page); walked in "
        "tests/ledger/traces/test_ingest.py"
    ),
    "ledger.permissions.can_record_price_sheet": (
        "its page is read by everyone and offers the form only to those allowed (no 403 "
        "on GET); page POST and API walked in tests/ledger/test_views_price_sheets.py and "
        "tests/ledger/test_api_price_sheets.py"
    ),
    "ledger.permissions.can_manage_accounts": "the admin's account pages; no API",
    "ledger.permissions.can_manage_teams": "asked only by the team verbs; no page or API",
    "releases.permissions.can_view_release": "a read rule of pages; not an action",
    "releases.permissions.can_explain_traces": (
        "a read rule (anyone signed in); page and API walked in "
        "tests/releases/explain/test_explain.py"
    ),
    "releases.permissions.can_view_cost": (
        "a read rule of the cost pages (anyone signed in); walked in "
        "tests/releases/cost/test_cost_pages.py"
    ),
    "releases.permissions.can_file_some_release": "asked only by create_release",
    "releases.permissions.can_sign": (
        "per role and state; page and verb walked in tests/releases/test_transitions.py, "
        "the bulk list in tests/releases/test_waiting_matrix.py"
    ),
    "releases.permissions.can_waive": "the permission part of can_waive_gate",
    "releases.permissions.can_waive_gate": (
        "per gate and state; page, verb and API in tests/releases/test_waivers.py"
    ),
    "releases.permissions.can_verify_rollback_target": (
        "page and API both queue a verification on POST (nothing to GET, a permitted "
        "request writes); tests/releases/test_verify_now.py"
    ),
    "releases.permissions.can_post_observation": (
        "needs a rollout in flight; state by page and verb in test_transitions.py"
    ),
    "releases.permissions.can_start_rollout": (
        "needs an approved release; state by page and verb in test_transitions.py"
    ),
    "releases.permissions.can_close_release": (
        "needs a finished release; state by page and verb in test_transitions.py"
    ),
    "releases.permissions.can_edit_playbooks": "a page only (the runbook); no API",
    "releases.permissions.can_reconcile": "pages only (service, rollback); no API",
    "releases.permissions.can_comment": (
        "a form on the release page every reader opens; no page answers 403 for it"
    ),
    "releases.permissions.can_manage_calendar": "asked only by the calendar verbs",
    "releases.permissions.can_plan_drill": (
        "asked by the verb with the plan's services; the page and API ask can_plan_some_drill"
    ),
    "releases.permissions.can_run_drill": "asked by run_drill (manage.py run_drill); no page",
    "releases.permissions.can_conclude_drill": (
        "needs a drill that ran; page and API walked in tests/releases/drills/test_pages.py "
        "and tests/releases/drills/test_api.py"
    ),
    "releases.permissions.can_manage_reviews": "pages only (service, reviews); no API",
    "releases.permissions.can_complete_review_action": "a page only (the review); no API",
}


def _asked_by_the_matrix() -> set[str]:
    """`module.can_x` named by some rule's `allows` (the names its code loads)."""
    aliases = {
        "ledger_rules": ledger_rules,
        "replay_rules": replay_rules,
        "release_rules": release_rules,
    }
    asked = set()
    for rule in RULES.values():
        names = rule.allows.__code__.co_names
        for alias, module in aliases.items():
            if alias in names:
                asked |= {f"{module.__name__}.{n}" for n in names if n.startswith("can_")}
    return asked


def test_every_can_rule_is_in_the_matrix_or_says_why_not():
    rules = {
        f"{module.__name__}.{name}"
        for module in (ledger_rules, replay_rules, release_rules)
        for name, function in inspect.getmembers(module, inspect.isfunction)
        if name.startswith("can_") and function.__module__ == module.__name__
    }
    asked = _asked_by_the_matrix()
    assert rules - asked - NO_PAGE_API_PAIR.keys() == set()
    # Neither list names what is not a rule, nor a rule twice.
    assert asked <= rules
    assert NO_PAGE_API_PAIR.keys() <= rules
    assert asked & NO_PAGE_API_PAIR.keys() == set()
