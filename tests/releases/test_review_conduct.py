"""Conducting a review: the checklist the sweep pre-fills, the reviewer's answers, the
conclusion that goes into the ledger whole and makes the review read-only, the actions
it leaves, and a sweep whose reads do not grow with the number of services."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import DatabaseError, connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from ledger import services as ledger_services
from ledger.models import Event
from releases.governance.services import TransitionRefused
from releases.models import Review, ReviewAction, ReviewChecklistItem
from releases.reviews.services import periodic_reviews as verbs
from tests.factories import UserFactory
from tests.ledger.factories import RevisionFactory, ServiceFactory
from tests.releases.factories import report
from tests.releases.review_helpers import answer_all, checklist, push_days, sweep
from tests.replay.factories import SampleFactory

pytestmark = pytest.mark.django_db

TODAY = dt.date.today


@pytest.fixture
def review(world, sre):
    """kb-assistant drifted: its 7-day p95 TTFT is 950 ms against an 800 ms SLO."""
    ledger_services.update_service(world.service, actor=None, task_types=["chat", "sql"])
    SampleFactory(sample_set=world.sample_set, tags=["chat", "smoke"])
    report(
        world.live,
        "short",
        ttft_p95_ms=600.0,
        tpot_p95_ms=25.0,
        output_tokens_per_s=1000.0,
        measured_at=world.live.served_at,
    )
    push_days(world.service, [950] * 7)
    sweep()
    return Review.objects.get(service=world.service)


def conclude(review, actor, **fields):
    values = {"outcome": "pass", "conclusion": "", "actions": ()} | fields
    return verbs.conclude_review(review, actor=actor, **values)


# ---------------------------------------------------------------- the pre-filled checklist


def test_the_checklist_is_prefilled_with_the_facts_found(review, world):
    items = checklist(review)

    assert list(review.items.values_list("key", flat=True)) == [
        "versions",
        "license",
        "sample_sets",
        "cost_latency",
        "rollback_target",
        "capabilities",
        "evidence",
    ]
    sets = items["sample_sets"]
    assert sets.flags == ["task types without a sample set: sql"]
    assert sets.suggestion == "attention"
    golden = next(f for f in sets.facts if f["label"] == f"Sample set {world.sample_set}")
    assert "covers chat" in golden["value"]
    assert golden["url"] == f"/replay/runs/{world.live_run.pk}/"

    facts = {f["label"]: f["value"] for f in items["cost_latency"].facts}
    assert facts["7-day p95 TTFT (run evidence)"] == "950 ms against an SLO of 800 ms"
    assert facts["Cost at release"].startswith("0.28 GPU-hours per million output tokens")
    assert "p95 TTFT 600 ms, p95 TPOT 25 ms" in facts["Baseline at release"]
    assert any("7-day p95 TTFT 950 ms" in flag for flag in items["cost_latency"].flags)

    assert items["rollback_target"].flags == ["there is no rollback target"]
    assert items["capabilities"].flags == [f"{world.live.label} declares no capability"]
    license_facts = {f["label"]: f["value"] for f in items["license"].facts}
    assert license_facts["License"] == "Apache-2.0 (permissive), approved"
    assert items["license"].suggestion == "clear"
    evidence = items["evidence"]
    assert evidence.facts[0]["value"].startswith("current, measured")
    assert evidence.flags == [
        "no high_concurrency, long_context, streaming load test, which production services need",
        "no structured load test, which production services serving sql need",
    ]
    versions = {f["label"]: f["value"] for f in items["versions"].facts}
    assert versions["Newer engine versions in the registry"].startswith("none")


# ---------------------------------------------------------------- answering


def test_answers_start_the_review_and_go_into_the_ledger(review, sre):
    verbs.answer_checklist(
        review,
        actor=sre,
        answers=[
            {"key": "sample_sets", "answer": "action_needed", "note": "no SQL set yet"},
            {"key": "license", "answer": "ok"},
        ],
    )

    review.refresh_from_db()
    assert (review.state, review.started_by) == ("in_progress", sre)
    items = checklist(review)
    assert (items["sample_sets"].answer, items["sample_sets"].note) == (
        "action_needed",
        "no SQL set yet",
    )
    assert items["sample_sets"].answered_by == sre
    event = Event.objects.get(action="review.checklist_answered")
    assert event.payload_data["before"] == {"state": "open"}
    assert [a["key"] for a in event.payload_data["answers"]] == ["sample_sets", "license"]

    # The same answers again (a retried post) change nothing and append nothing.
    assert (
        verbs.answer_checklist(review, actor=sre, answers=[{"key": "license", "answer": "ok"}])
        == []
    )
    assert Event.objects.filter(action="review.checklist_answered").count() == 1


def test_an_answer_other_than_ok_needs_a_note_and_refusals_name_the_item(review, sre):
    with pytest.raises(ValidationError) as refused:
        verbs.answer_checklist(
            review,
            actor=sre,
            answers=[
                {"key": "evidence", "answer": "not_applicable", "note": " "},
                {"key": "versions", "answer": "maybe"},
                {"key": "weather", "answer": "ok"},
            ],
        )

    assert set(refused.value.message_dict) == {"evidence.note", "versions.answer", "weather.key"}
    assert not ReviewChecklistItem.objects.exclude(answer="").exists()


@pytest.mark.parametrize(
    ("who", "allowed"), [("sre", True), ("security", True), ("owner", False), ("auditor", False)]
)
def test_who_may_answer_and_conclude(review, request, who, allowed):
    user = request.getfixturevalue(who)
    answer = [{"key": "license", "answer": "ok"}]
    if allowed:
        verbs.answer_checklist(review, actor=user, answers=answer)
        return
    with pytest.raises(PermissionDenied):
        verbs.answer_checklist(review, actor=user, answers=answer)
    with pytest.raises(PermissionDenied):
        conclude(review, user)


def test_the_assignee_conducts_a_review_of_any_role(review, world, team):
    owner_of_team = UserFactory(username="mo", roles=["model_owner"])
    team.members.add(owner_of_team)
    verbs.reassign_review(review, actor=None, assignee=owner_of_team)
    review.refresh_from_db()

    verbs.answer_checklist(
        review, actor=owner_of_team, answers=[{"key": "license", "answer": "ok"}]
    )

    assert Event.objects.get(action="review.reassigned").payload_data["after"] == {"assignee": "mo"}


def test_only_people_who_could_conduct_it_are_assignees(review, sre, auditor, owner):
    with pytest.raises(PermissionDenied):
        verbs.reassign_review(review, actor=owner, assignee=sre)
    with pytest.raises(ValidationError, match="cannot conduct a review"):
        verbs.reassign_review(review, actor=sre, assignee=auditor)


# ---------------------------------------------------------------- concluding


def test_concluding_needs_every_answer_and_an_outcome_that_fits_them(review, sre, owner):
    with pytest.raises(ValidationError) as refused:
        conclude(review, sre)
    assert "7 are unanswered" in refused.value.message_dict["checklist"][0]

    answer_all(review, sre)
    verbs.answer_checklist(
        review,
        actor=sre,
        answers=[{"key": "sample_sets", "answer": "action_needed", "note": "add a SQL set"}],
    )
    with pytest.raises(ValidationError) as refused:
        conclude(review, sre, outcome="pass", next_due_on=TODAY())
    assert set(refused.value.message_dict) == {"outcome", "next_due_on"}
    assert "“action needed”" in refused.value.message_dict["outcome"][0]

    with pytest.raises(ValidationError) as refused:
        conclude(review, sre, outcome="pass_with_actions")
    assert "at least one action" in refused.value.message_dict["actions"][0]

    with pytest.raises(ValidationError) as refused:
        conclude(
            review,
            sre,
            outcome="pass_with_actions",
            actions=[{"description": "", "owner": "nobody", "due_on": TODAY() - dt.timedelta(1)}],
        )
    assert set(refused.value.message_dict) == {
        "actions[0].description",
        "actions[0].owner",
        "actions[0].due_on",
    }
    with pytest.raises(ValidationError, match="Say why the service fails"):
        conclude(review, sre, outcome="fail")
    review.refresh_from_db()
    assert review.state == "in_progress"
    assert not Event.objects.filter(action="review.concluded").exists()


def test_the_conclusion_and_the_whole_checklist_go_into_the_ledger(review, sre, owner):
    answer_all(review, sre, answer="ok")
    verbs.answer_checklist(
        review,
        actor=sre,
        answers=[{"key": "sample_sets", "answer": "action_needed", "note": "add a SQL set"}],
    )
    due = TODAY() + dt.timedelta(days=21)

    conclude(
        review,
        sre,
        outcome="pass_with_actions",
        conclusion="Drift explained by the new tenant; SQL coverage missing.",
        actions=[{"description": "Import a SQL sample set", "owner": "olivia", "due_on": due}],
    )

    review.refresh_from_db()
    assert (review.state, review.outcome, review.concluded_by) == (
        "concluded",
        "pass_with_actions",
        sre,
    )
    assert review.next_due_on == TODAY() + dt.timedelta(days=90)  # the service's cadence
    assert set(review.items.values_list("frozen", flat=True)) == {True}
    action = ReviewAction.objects.get()
    assert (action.owner, action.due_on, action.service) == (owner, due, review.service)

    event = Event.objects.get(action="review.concluded")
    payload = event.payload_data
    assert payload["outcome"] == "pass_with_actions"
    assert payload["next_due_on"] == review.next_due_on.isoformat()
    assert [item["key"] for item in payload["checklist"]] == [
        "versions",
        "license",
        "sample_sets",
        "cost_latency",
        "rollback_target",
        "capabilities",
        "evidence",
    ]
    sets = next(item for item in payload["checklist"] if item["key"] == "sample_sets")
    assert (sets["answer"], sets["note"], sets["answered_by"]) == (
        "action_needed",
        "add a SQL set",
        "sam",
    )
    assert sets["flags"] == ["task types without a sample set: sql"]
    assert sets["facts"] == checklist(review)["sample_sets"].facts
    assert payload["triggers"][0]["kind"] == "latency_drift"
    assert payload["actions"] == [
        {
            "id": action.pk,
            "description": "Import a SQL sample set",
            "owner": "olivia",
            "due_on": due.isoformat(),
        }
    ]


def test_a_concluded_review_is_read_only_for_the_verbs_and_the_database(review, sre):
    answer_all(review, sre)
    conclude(review, sre, outcome="pass", conclusion="fine")

    with pytest.raises(TransitionRefused, match="read-only"):
        verbs.answer_checklist(
            review, actor=sre, answers=[{"key": "license", "answer": "ok", "note": "x"}]
        )
    with pytest.raises(TransitionRefused, match="read-only"):
        conclude(review, sre, outcome="fail", conclusion="changed my mind")
    with pytest.raises(TransitionRefused):
        verbs.start_review(review, actor=sre)

    with pytest.raises(DatabaseError, match="Cannot update"), transaction.atomic():
        Review.objects.filter(pk=review.pk).update(conclusion="rewritten later")
    with pytest.raises(DatabaseError, match=r"Cannot (update|delete)"), transaction.atomic():
        Review.objects.filter(pk=review.pk).delete()
    with pytest.raises(DatabaseError, match="Cannot update"), transaction.atomic():
        ReviewChecklistItem.objects.filter(review=review).update(note="rewritten later")
    review.refresh_from_db()
    assert review.conclusion == "fine"


def test_a_conclusion_quiets_its_triggers_until_the_next_due_date(review, world, sre):
    answer_all(review, sre)
    conclude(review, sre, outcome="pass", next_due_on=TODAY() + dt.timedelta(days=30))

    assert sweep().raised == []  # the drift holds, but the conclusion answered it

    later = timezone.now() + dt.timedelta(days=30)
    with time_machine.travel(later, tick=False):
        push_days(world.service, [990] * 7)
        sweep()
    fresh = Review.objects.exclude(pk=review.pk).get(service=world.service)
    assert sorted(fresh.triggers.values_list("kind", flat=True)) == ["cadence", "latency_drift"]
    cadence = fresh.triggers.get(kind="cadence")
    assert cadence.numbers["since_what"] == f"review #{review.pk} concluded"


def test_actions_are_marked_done_once_by_who_may(review, sre, owner, outsider):
    answer_all(review, sre)
    conclude(
        review,
        sre,
        outcome="pass_with_actions",
        actions=[{"description": "Add a SQL set", "owner": "olivia", "due_on": TODAY()}],
    )
    action = ReviewAction.objects.get()

    with pytest.raises(PermissionDenied):
        verbs.complete_review_action(action, actor=outsider)
    verbs.complete_review_action(action, actor=owner, note="kb-sql@1 imported")
    with pytest.raises(TransitionRefused, match="was marked done"):
        verbs.complete_review_action(action, actor=owner)

    action.refresh_from_db()
    assert (action.done_by, action.done_note) == (owner, "kb-sql@1 imported")
    assert (
        Event.objects.get(action="review.action_done").payload_data["note"] == "kb-sql@1 imported"
    )
    with pytest.raises(DatabaseError, match="Cannot update"), transaction.atomic():
        ReviewAction.objects.filter(pk=action.pk).update(done_note="edited")


# ---------------------------------------------------------------- the sweep's reads


def _fleet(team, count: int) -> None:
    for n in range(count):
        service = ServiceFactory(slug=f"svc-{n}", team=team, tier="production", slo_ttft_p95_ms=800)
        revision = RevisionFactory(service=service)
        ledger_services.set_live_revision(service, revision, actor=None)
        report(revision, "short", measured_at=timezone.now())
        push_days(service, [500] * 7)


@pytest.mark.parametrize("count", [3, 9])
def test_the_sweep_reads_each_batch_in_a_constant_number_of_queries(team, sre, count):
    _fleet(team, count)

    with CaptureQueriesContext(connection) as one_batch:
        report_ = sweep(batch_size=10)
    with CaptureQueriesContext(connection) as in_threes:
        sweep(batch_size=3)

    assert (report_.scanned, report_.raised) == (count, [])
    # Read once: engine versions, platform people, reviews past due, the services to
    # review. Then per batch, whatever the number of services in it: a savepoint, the
    # lock, its release, and eleven reads (services, task types, run evidence, load
    # tests, capabilities, the revisions rolled back off them, serving history, newest
    # runs, license events, reviews, triggers); reads with nothing to look up (no
    # release in force here) are not even sent. The cost and quota triggers add two:
    # the stored cost of the last 7 days (`stored_cost_days`: the cost pages' own read,
    # so the drift is judged on the numbers they show) and the tenants' rate-limit hits.
    per_batch = len(one_batch) - 4
    assert per_batch == 16
    assert len(in_threes) == 4 + per_batch * (count // 3)
