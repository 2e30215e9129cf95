"""The auditor's page and the change record, through the client: filters and counts per
record type, the filters in the URL, the empty state, the htmx fragment, the query
count, and a release read as a change record (separation of duties, evidence digests,
waivers and who granted them)."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.urls import reverse
from django.utils import timezone

from ledger.models import Event
from releases.audit.records import RECORD_TYPES, AuditFilters
from releases.governance import services
from releases.models import SignOff, Waiver
from tests.releases.factories import UNDECLARED, build_world, file_release

pytestmark = pytest.mark.django_db

OCT = dt.datetime(2026, 10, 1, tzinfo=dt.UTC)


def _approve(release, signers, owner):
    services.submit_release(release, actor=owner)
    for role, signer in signers.items():
        services.sign_off(release, actor=signer, role=role, decision="approve")
    release.refresh_from_db()
    return release


@pytest.fixture
def record(team, owner, signers, other_sre):
    """Two services: kb-assistant with an approved model upgrade (and a waiver, by another
    platform SRE than the one who signs) filed in October, sql-agent with a draft engine
    upgrade filed in November."""
    with time_machine.travel(OCT + dt.timedelta(days=3), tick=False):
        kb = build_world(team)
        approved = file_release(kb, owner, metrics_declared=UNDECLARED)
        services.grant_waiver(
            approved,
            actor=other_sre,
            gate="metrics_coverage",
            reason="the month-end freeze does not touch this tenant",
            expires_at=timezone.now() + dt.timedelta(days=7),
        )
        _approve(approved, signers, owner)
    with time_machine.travel(OCT + dt.timedelta(days=40), tick=False):
        sql = build_world(team, slug="sql-agent", tier="internal")
        draft = file_release(sql, owner, change_kind="engine_upgrade")
    return {"approved": approved, "draft": draft, "kb": kb, "sql": sql}


def _counts(response) -> dict[str, int]:
    return {record.key: count for record, count in response.context["counts"]}


def test_counts_per_record_type_follow_the_filters(client, auditor, record):
    client.force_login(auditor)

    everything = client.get(reverse("releases:audit"))
    kb = client.get(reverse("releases:audit"), {"service": "kb-assistant"})
    engine = client.get(reverse("releases:audit"), {"change_kind": "engine_upgrade"})
    november = client.get(
        reverse("releases:audit"), {"date_from": "2026-11-01", "date_to": "2026-11-30"}
    )

    assert _counts(everything)["releases"] == 2
    assert _counts(everything)["signoffs"] == 4
    assert _counts(everything)["waivers"] == 1
    assert _counts(kb) == {
        "releases": 1,
        "signoffs": 4,
        "waivers": 1,
        "rollbacks": 0,
        "reviews": 0,
        "drills": 0,
        # The release's from and to revisions, and the one policy version both run with.
        "revisions": 2,
        "gateway_policies": 1,
        "events": Event.objects.filter(service=record["kb"].service).count(),
    }
    # Sign-offs, waivers and events follow their release's change kind.
    draft_events = Event.objects.filter(
        subject_type="releases.release", subject_id=str(record["draft"].pk)
    ).count()
    assert _counts(engine) == {
        "releases": 1,
        "signoffs": 0,
        "waivers": 0,
        "rollbacks": 0,
        "reviews": 0,
        "drills": 0,
        "revisions": 2,
        "gateway_policies": 1,
        "events": draft_events,
    }
    assert _counts(november)["releases"] == 1
    assert _counts(november)["signoffs"] == 0
    assert list(november.context["page"].object_list) == [record["draft"]]


def test_each_record_type_lists_its_rows_with_the_filters_kept_in_the_links(
    client, auditor, record
):
    client.force_login(auditor)

    response = client.get(
        reverse("releases:audit"), {"type": "signoffs", "service": "kb-assistant"}
    )

    assert response.status_code == 200
    assert response.context["current"].key == "signoffs"
    body = response.content.decode()
    assert "Security &amp; compliance" in body
    assert "?type=waivers&amp;service=kb-assistant" in body
    assert reverse("releases:change_record", args=[record["approved"].pk]) in body


def test_an_htmx_filter_change_gets_only_the_results_and_pushes_the_address(
    client, auditor, record
):
    client.force_login(auditor)

    response = client.get(
        reverse("releases:audit"), {"tier": "internal", "service": ""}, HTTP_HX_REQUEST="true"
    )

    assert response.status_code == 200
    body = response.content.decode()
    assert "<html" not in body
    assert 'id="results"' not in body and "record-tabs" in body
    assert response["HX-Push-Url"] == "/audit/?tier=internal"


def test_no_match_says_what_to_do_next(client, auditor, record):
    client.force_login(auditor)

    response = client.get(reverse("releases:audit"), {"service": "no-such-service"})

    assert "No release matches these filters" in response.content.decode()


def test_an_empty_ledger_says_where_records_come_from(client, auditor):
    client.force_login(auditor)

    response = client.get(reverse("releases:audit"))

    assert "There is no release on record yet" in response.content.decode()


def test_a_bad_filter_is_ignored_and_said(client, auditor, record):
    client.force_login(auditor)

    response = client.get(reverse("releases:audit"), {"tier": "galactic"})

    assert "Some filters were ignored" in response.content.decode()
    assert _counts(response)["releases"] == 2


def test_the_page_reads_in_a_constant_number_of_queries(
    client, auditor, record, django_assert_num_queries
):
    client.force_login(auditor)
    client.get(reverse("releases:audit"))  # the session and the user's roles, cached

    # session, user, groups (roles), 9 counts (releases, sign-offs, waivers, rollbacks,
    # reviews, drills, revisions, gateway policies, events), the page's count, the page's rows
    with django_assert_num_queries(14):
        response = client.get(reverse("releases:audit"), {"type": "releases"})
    assert response.status_code == 200


def test_a_rollback_is_a_record_the_filters_narrow(client, auditor, record, sre):
    """A rollback of a release follows the release's filters; the period is its start."""
    kb = record["kb"]
    kb.live_backend.enabled = False
    kb.live_backend.save(update_fields=["enabled"])
    with time_machine.travel(OCT + dt.timedelta(days=5), tick=False):
        services.start_rollout(record["approved"], actor=sre)
        rollback = services.record_rollback(kb.service, actor=sre, reason="p95 TTFT doubled")
    client.force_login(auditor)
    rows = client.get(reverse("releases:audit"), {"type": "rollbacks", "service": "kb-assistant"})
    assert list(rows.context["page"].object_list) == [rollback]
    assert "p95 TTFT doubled" in rows.content.decode()
    assert (
        _counts(client.get(reverse("releases:audit"), {"service": "sql-agent"}))["rollbacks"] == 0
    )
    assert (
        _counts(client.get(reverse("releases:audit"), {"change_kind": "model_upgrade"}))[
            "rollbacks"
        ]
        == 1
    )
    november = client.get(reverse("releases:audit"), {"date_from": "2026-11-01"})
    assert _counts(november)["rollbacks"] == 0


def test_only_exporters_are_offered_the_export_form(client, auditor, owner, record):
    client.force_login(owner)
    assert "Request export" not in client.get(reverse("releases:audit")).content.decode()
    client.force_login(auditor)
    assert "Request export" in client.get(reverse("releases:audit")).content.decode()


def test_a_new_record_type_joins_by_one_registry_entry():
    # What the page and the exports read of a type is the registry's entry alone.
    for record_type in RECORD_TYPES.values():
        assert record_type.columns and record_type.label
        assert record_type.queryset(AuditFilters()) is not None


# ---------------------------------------------------------------- the change record


def test_an_approved_release_reads_as_a_change_record(client, auditor, record, other_sre):
    release = record["approved"]
    client.force_login(auditor)

    response = client.get(reverse("releases:change_record", args=[release.pk]))

    assert response.status_code == 200
    change = response.context["record"]
    assert change.duties_held
    assert [d.title for d in change.duties] == [
        "The requester did not approve",
        "One person, one role",
        "Every required role approved",
        "No signer approved their own waiver",
    ]
    body = response.content.decode()
    # What changed, who asked, who approved in which role.
    assert "What changed" in body and "olivia" in body
    assert {a["signoff"].signer.username for a in change.approvals} == {
        "mona",
        "sam",
        "sofia",
        "ben",
    }
    assert "platform sre" in body  # sam's own role beside the role he signed
    # Test evidence with digests, from the snapshot the approvers signed.
    assert change.evidence_source == "the snapshot the approvers signed"
    for report in record["kb"].reports.values():
        assert report.raw_sha256 in body
    assert record["kb"].candidate_run.fingerprint in body
    # Implementation, rollback plan, waivers and who granted them, the review.
    assert "Not rolled out." in body
    assert "no rollback is recorded" in body
    assert "the month-end freeze does not touch this tenant" in body
    assert change.waivers[0].granted_by == other_sre
    assert "No post-implementation review is recorded" in body


def test_a_filer_who_signed_breaks_separation_of_duties_and_the_record_says_so(
    client, auditor, record, owner
):
    draft = record["draft"]
    # Written as a row: the verbs refuse it, an old import or a manual fix might not.
    SignOff.objects.create(
        release=draft,
        role="model_team",
        signer=owner,
        decision="approve",
        snapshot_hash="0" * 64,
        snapshot={},
        signed_at=timezone.now(),
    )
    client.force_login(auditor)

    response = client.get(reverse("releases:change_record", args=[draft.pk]))

    change = response.context["record"]
    assert not change.duties_held
    assert not change.duties[0].held
    assert "olivia filed the release and also signed for model team" in response.content.decode()


def test_a_signer_who_waived_a_gate_of_their_role_breaks_separation_and_the_record_says_so(
    client, auditor, record, sre
):
    approved = record["approved"]
    # Written as a row, as a record made before the verbs refused it (issue 26).
    Waiver.objects.create(
        release=approved,
        gate="rollback_plan",
        reason="verified by hand",
        expires_at=OCT + dt.timedelta(days=10),
        granted_by=sre,
        granted_at=OCT + dt.timedelta(days=3),
    )
    client.force_login(auditor)

    response = client.get(reverse("releases:change_record", args=[approved.pk]))

    change = response.context["record"]
    assert not change.duties_held
    assert [d.title for d in change.duties if not d.held] == ["No signer approved their own waiver"]
    assert "sam waived rollback_plan and signed for platform." in response.content.decode()


def test_the_change_record_is_readable_by_everyone_signed_in_but_not_anonymously(
    client, outsider, record
):
    url = reverse("releases:change_record", args=[record["approved"].pk])
    assert client.get(url).status_code == 302
    client.force_login(outsider)
    assert client.get(url).status_code == 200
    assert client.get(reverse("releases:change_record", args=[999999])).status_code == 404
