"""The release pages end to end through the client: what they show, what they let whom do,
what a plain form post saves, and how many queries they take."""

from __future__ import annotations

import datetime as dt

import pytest
from django.urls import reverse
from django.utils import timezone

from ledger.models import Event
from releases.governance import services
from releases.models import BlackoutWindow, Release, SignOff
from tests.releases.factories import file_release

pytestmark = pytest.mark.django_db


def _form_post(world, **overrides):
    """The release form as a browser without JavaScript posts it."""
    data = {
        "to_revision": str(world.candidate.pk),
        "change_kind": "model_upgrade",
        "risk": "",
        "summary": "Move kb-assistant to the new fine-tune",
        "impact_tenants": "support, sales",
        "impact_task_types": "",
        "impact_downstream": ["agent_runtime"],
        "required_sample_sets": world.sample_set.name,
        "metrics_declared": ["ttft", "tpot"],
        "path": "normal",
        "stage_0_traffic_pct": "5",
        "stage_0_observation_minutes": "60",
        "stage_0_ttft_p95_ms": "900",
        "stage_0_error_rate_pct": "1",
        "rollback_kind": "model",
        "rollback_triggers": "p95 TTFT above 1200 ms for 10 min\nerror rate above 2 %",
        "rollback_expected_minutes": "10",
    }
    data.update(overrides)
    return data


def test_plain_form_post_files_a_draft_and_redirects_to_its_form(client, owner, world):
    client.force_login(owner)
    response = client.post(
        reverse("releases:release_new", args=[world.service.slug]), _form_post(world)
    )
    release = Release.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("releases:release_edit", args=[release.pk])
    assert release.state == "draft"
    assert release.filed_by == owner
    assert release.from_revision == world.live
    assert release.impact_tenants == ["support", "sales"]
    assert release.gray_stages == [
        {
            "traffic_pct": 5,
            "observation_minutes": 60,
            "guards": {"ttft_p95_ms": 900, "error_rate_pct": 1},
        }
    ]
    assert release.rollback_triggers == [
        "p95 TTFT above 1200 ms for 10 min",
        "error rate above 2 %",
    ]
    assert Event.objects.filter(action="release.filed", subject_id=str(release.pk)).count() == 1


def test_plain_form_post_saves_an_edit_of_the_draft(client, owner, release):
    client.force_login(owner)
    page = client.get(reverse("releases:release_edit", args=[release.pk]))
    assert page.status_code == 200
    assert b'name="csrfmiddlewaretoken"' in page.content
    form = page.context["form"]
    data = {
        name: value
        for name, value in ((bf.html_name, bf.value()) for bf in form)
        if value is not None
    }
    # What the browser sends for lists and choices.
    for name in ("impact_tenants", "impact_task_types", "required_sample_sets"):
        data[name] = form.fields[name].prepare_value(data.get(name) or [])
    data["rollback_triggers"] = "\n".join(release.rollback_triggers)
    data["decommission_moves"] = ""
    data["summary"] = "A new summary the reviewers read"
    data["to_revision"] = str(release.to_revision_id)
    for key in [k for k, v in data.items() if v in (None, [])]:
        data.pop(key)
    response = client.post(reverse("releases:release_edit", args=[release.pk]), data)
    assert response.status_code == 302, (
        response.context["form"].errors if response.context else response
    )
    release.refresh_from_db()
    assert release.summary == "A new summary the reviewers read"
    assert release.gray_stages == [
        {
            "traffic_pct": 5,
            "observation_minutes": 60,
            "guards": {"ttft_p95_ms": 900, "error_rate_pct": 1, "structured_error_rate_pct": 2},
        },
        {
            "traffic_pct": 25,
            "observation_minutes": 120,
            "guards": {"ttft_p95_ms": 900, "error_rate_pct": 1, "structured_error_rate_pct": 2},
        },
        {"traffic_pct": 100, "observation_minutes": 60},
    ]


def test_the_form_keeps_guard_settings_it_does_not_show(client, owner, world):
    """Relative, critical and dry-run guards and budgets come through the API; editing
    the bound of such a guard in the form keeps the rest of it."""
    stages = [
        {
            "traffic_pct": 5,
            "observation_minutes": 60,
            "guards": {
                "ttft_p95_ms": {"max": 900, "max_increase_pct": 20, "critical": True},
                "error_rate_pct": 1,
                "refusal_rate_pct": {"max": 2, "dry_run": True},
            },
            "failure_limit": 3,
        },
        {"traffic_pct": 100, "observation_minutes": 60},
    ]
    release = file_release(world, owner, gray_stages=stages)
    client.force_login(owner)
    page = client.get(reverse("releases:release_edit", args=[release.pk]))
    form = page.context["form"]
    assert form["stage_0_ttft_p95_ms"].value() == 900
    data = _form_post(world, stage_0_ttft_p95_ms="850", stage_1_traffic_pct="100")
    data["stage_1_observation_minutes"] = "60"
    response = client.post(reverse("releases:release_edit", args=[release.pk]), data)
    assert response.status_code == 302, response.context["form"].errors
    release.refresh_from_db()
    assert release.gray_stages[0] == {
        "traffic_pct": 5,
        "observation_minutes": 60,
        "guards": {
            "ttft_p95_ms": {"max_increase_pct": 20, "critical": True, "max": 850},
            "error_rate_pct": 1,
            "refusal_rate_pct": {"max": 2, "dry_run": True},
        },
        "failure_limit": 3,
    }


def test_bad_input_names_the_field_and_what_was_expected_and_saves_nothing(client, owner, world):
    client.force_login(owner)
    response = client.post(
        reverse("releases:release_new", args=[world.service.slug]),
        _form_post(
            world,
            rollback_expected_minutes="soon",
            stage_1_traffic_pct="10",
            decommission_moves="support to elsewhere",
        ),
    )
    assert response.status_code == 400
    errors = response.context["form"].errors
    assert "Enter a whole number." in errors["rollback_expected_minutes"]
    assert "Stage 2 needs both a traffic share" in errors["stage_1_observation_minutes"][0]
    assert (
        "Line 1 ('support to elsewhere'): expected 'KIND NAME -> WHERE'"
        in errors["decommission_moves"][0]
    )
    html = response.content.decode()
    assert "Nothing was saved" in html
    assert 'href="#id_rollback_expected_minutes">Expected minutes</a>' in html
    assert not Release.objects.exists()


def test_a_refusal_of_the_verb_lands_beside_its_field(client, owner, world):
    client.force_login(owner)
    response = client.post(
        reverse("releases:release_new", args=[world.service.slug]),
        _form_post(world, required_sample_sets="no-such-set"),
    )
    assert response.status_code == 400
    assert response.context["form"].errors["required_sample_sets"] == [
        "No sample set named no-such-set."
    ]
    assert not Release.objects.exists()


def test_htmx_change_saves_the_draft_and_answers_with_the_gates(client, owner, release):
    client.force_login(owner)
    url = reverse("releases:release_edit", args=[release.pk])
    form = client.get(url).context["form"]
    data = {bf.html_name: bf.value() for bf in form if bf.value() not in (None, [], "")}
    for name in ("impact_tenants", "impact_task_types", "required_sample_sets"):
        data[name] = form.fields[name].prepare_value(data.get(name) or [])
    data["rollback_triggers"] = "\n".join(release.rollback_triggers)
    data["logging_audit"] = "off"
    response = client.post(url, data, headers={"HX-Request": "true"})
    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith('<section class="gate-panel" id="gate-panel"')
    assert 'id="save-status" role="status" hx-swap-oob="true"' in html
    assert "Draft saved" in html
    assert "<html" not in html
    release.refresh_from_db()
    assert release.logging_policy["audit_logs"] == "off"


def test_planned_start_inside_a_blackout_window_warns_while_filling(client, owner, world):
    start = timezone.now() + dt.timedelta(days=2)
    BlackoutWindow.objects.create(
        name="Month-end close",
        starts_at=start - dt.timedelta(hours=1),
        ends_at=start + dt.timedelta(hours=5),
    )
    client.force_login(owner)
    local = timezone.localtime(start)
    response = client.post(
        reverse("releases:release_new", args=[world.service.slug]),
        _form_post(
            world, planned_start=local.strftime("%Y-%m-%dT%H:%M"), rollback_expected_minutes="x"
        ),
    )
    assert (
        "falls inside the blackout window “Month-end close” for every service"
        in response.content.decode()
    )


def test_risk_is_suggested_from_change_kind_and_tier(client, owner, world):
    client.force_login(owner)
    response = client.get(reverse("releases:release_new", args=[world.service.slug]))
    assert "Pick a change kind to see the suggested risk." in response.content.decode()
    response = client.post(
        reverse("releases:release_new", args=[world.service.slug]),
        _form_post(world, change_kind="launch_parameters", summary=""),
    )
    # launch parameters are low on an internal service, one step up on production.
    assert "production service: <strong>medium</strong>" in response.content.decode()


def test_only_model_owners_of_the_team_may_file_as_the_api_says(client, world, sre, outsider):
    for user in (sre, outsider):
        client.force_login(user)
        assert (
            client.get(reverse("releases:release_new", args=[world.service.slug])).status_code
            == 403
        )
        assert (
            client.post(
                reverse("releases:release_new", args=[world.service.slug]), _form_post(world)
            ).status_code
            == 403
        )
    assert not Release.objects.exists()


def test_release_page_shows_diff_form_gates_and_timeline(client, owner, release):
    client.force_login(owner)
    response = client.get(reverse("releases:release_detail", args=[release.pk]))
    html = response.content.decode()
    assert response.status_code == 200
    assert f"{release.from_revision.label} → {release.to_revision.label}" in html
    assert 'id="gate-load_evidence" data-gate="load_evidence" data-status="pass"' in html
    assert "release.filed" in html
    assert "Submit…" in html
    # The filer is offered no sign-off.
    assert 'id="signoff-form"' not in html


def test_signer_sees_the_signoff_form_and_signs_with_the_snapshot_hash(client, owner, release, sre):
    services.submit_release(release, actor=owner)
    client.force_login(sre)
    page = client.get(reverse("releases:release_detail", args=[release.pk]))
    assert 'id="signoff-form"' in page.content.decode()
    snapshot = page.context["assessment"].snapshot_hash
    response = client.post(
        reverse("releases:release_signoff", args=[release.pk]),
        {"role": "platform", "decision": "approve", "comment": "rollback verified"},
    )
    assert response.status_code == 302
    signoff = SignOff.objects.get()
    assert signoff.snapshot_hash == snapshot
    html = client.get(reverse("releases:release_detail", args=[release.pk])).content.decode()
    assert snapshot[:16] in html


def test_the_page_refuses_a_signoff_the_api_refuses(client, owner, release, business):
    """A business owner may not sign for platform: the same refusal as the verb's."""
    services.submit_release(release, actor=owner)
    client.force_login(business)
    response = client.post(
        reverse("releases:release_signoff", args=[release.pk]),
        {"role": "platform", "decision": "approve"},
    )
    assert response.status_code == 403
    client.force_login(owner)
    response = client.post(
        reverse("releases:release_signoff", args=[release.pk]),
        {"role": "model_team", "decision": "approve"},
    )
    assert response.status_code == 403
    assert not SignOff.objects.exists()


def test_a_rejection_needs_a_comment_naming_the_field(client, owner, release, sre):
    services.submit_release(release, actor=owner)
    client.force_login(sre)
    response = client.post(
        reverse("releases:release_signoff", args=[release.pk]),
        {"role": "platform", "decision": "reject"},
    )
    assert response.status_code == 400
    assert response.context["signoff_form"].errors["comment"] == [
        "A rejection needs a comment: the filer reads it."
    ]


def test_submit_asks_for_confirmation_then_submits(client, owner, release):
    client.force_login(owner)
    url = reverse("releases:release_transition", args=[release.pk, "submit"])
    confirm = client.get(url)
    assert confirm.status_code == 200
    assert "the signers of the roles this release needs are emailed" in confirm.content.decode()
    release.refresh_from_db()
    assert release.state == "draft"
    response = client.post(url)
    assert response.status_code == 302
    release.refresh_from_db()
    assert release.state == "submitted"


def test_illegal_transition_shows_the_message_with_the_current_state(client, owner, release):
    services.submit_release(release, actor=owner)
    client.force_login(owner)
    events = Event.objects.count()
    response = client.post(reverse("releases:release_transition", args=[release.pk, "submit"]))
    assert response.status_code == 409
    assert (
        f"Release #{release.pk} is submitted; only a draft release can be submitted."
        in response.content.decode()
    )
    assert Event.objects.count() == events


def test_submit_with_failing_gates_lists_them(client, owner, world):
    release = file_release(world, owner, rollback_kind="")
    client.force_login(owner)
    response = client.post(reverse("releases:release_transition", args=[release.pk, "submit"]))
    assert response.status_code == 422
    assert "Rollback plan complete and its target verified" in response.content.decode()


def test_withdraw_and_reopen(client, owner, release):
    client.force_login(owner)
    client.post(
        reverse("releases:release_transition", args=[release.pk, "withdraw"]),
        {"reason": "wrong candidate"},
    )
    release.refresh_from_db()
    assert release.state == "withdrawn"
    response = client.post(reverse("releases:release_transition", args=[release.pk, "reopen"]))
    copy = Release.objects.exclude(pk=release.pk).get()
    assert response["Location"] == reverse("releases:release_edit", args=[copy.pk])
    assert copy.reopened_from == release


def test_outsider_cannot_transition(client, outsider, release):
    client.force_login(outsider)
    assert (
        client.post(
            reverse("releases:release_transition", args=[release.pk, "withdraw"])
        ).status_code
        == 403
    )
    release.refresh_from_db()
    assert release.state == "draft"


def test_waiver_from_the_page_shows_on_it(client, owner, world, security):
    release = file_release(world, owner, logging_policy={})
    client.force_login(security)
    expires = (timezone.localtime() + dt.timedelta(days=3)).strftime("%Y-%m-%dT%H:%M")
    response = client.post(
        reverse("releases:release_waiver", args=[release.pk]),
        {"gate": "logging_policy", "reason": "logging reviewed offline", "expires_at": expires},
    )
    assert response.status_code == 302
    html = client.get(reverse("releases:release_detail", args=[release.pk])).content.decode()
    assert 'data-gate="logging_policy" data-status="waived"' in html
    assert "logging reviewed offline" in html


def test_model_owner_cannot_waive(client, owner, world):
    release = file_release(world, owner, logging_policy={})
    client.force_login(owner)
    expires = (timezone.localtime() + dt.timedelta(days=3)).strftime("%Y-%m-%dT%H:%M")
    response = client.post(
        reverse("releases:release_waiver", args=[release.pk]),
        {"gate": "logging_policy", "reason": "x", "expires_at": expires},
    )
    assert response.status_code == 403


def test_comment_thread(client, owner, release, sre):
    client.force_login(sre)
    response = client.post(
        reverse("releases:release_comment", args=[release.pk]),
        {"body": "Is the rollback verified?"},
    )
    assert response.status_code == 302
    html = client.get(reverse("releases:release_detail", args=[release.pk])).content.decode()
    assert "Is the rollback verified?" in html


def test_emergency_release_with_overdue_signoffs_is_flagged(client, owner, world):
    release = file_release(world, owner, path="emergency", emergency_reason="CVE in the engine")
    services.submit_release(release, actor=owner)
    services.start_rollout(release, actor=owner)
    Release.objects.filter(pk=release.pk).update(
        signoffs_due_at=timezone.now() - dt.timedelta(hours=1)
    )
    client.force_login(owner)
    html = client.get(reverse("releases:release_detail", args=[release.pk])).content.decode()
    assert "sign-offs overdue" in html


def test_release_list_filters_in_the_url_and_paginates(client, owner, world):
    first = file_release(world, owner)
    second = file_release(world, owner, change_kind="engine_upgrade", summary="engine")
    client.force_login(owner)
    response = client.get(reverse("releases:release_list"), {"change_kind": "engine_upgrade"})
    assert list(response.context["page"].object_list) == [second]
    response = client.get(reverse("releases:release_list"), {"state": "released"})
    assert "No release matches these filters" in response.content.decode()
    response = client.get(
        reverse("releases:release_list"),
        {"service": world.service.slug},
        headers={"HX-Request": "true"},
    )
    assert "<html" not in response.content.decode()
    assert response["HX-Push-Url"] == f"/releases/?service={world.service.slug}"
    assert {r.pk for r in response.context["page"].object_list} == {first.pk, second.pk}


def test_waiting_for_me_lists_what_awaits_my_role(client, owner, release, sre, business):
    services.submit_release(release, actor=owner)
    client.force_login(sre)
    html = client.get(reverse("releases:waiting_for_me")).content.decode()
    assert f"Release #{release.pk} of" in html
    assert "Rollback plan complete and its target verified" in html  # a platform gate
    services.sign_off(release, actor=sre, role="platform", decision="approve")
    html = client.get(reverse("releases:waiting_for_me")).content.decode()
    assert f"Release #{release.pk} of" not in html
    client.force_login(owner)  # the filer waits for nobody on their own release
    assert (
        f"Release #{release.pk} of"
        not in client.get(reverse("releases:waiting_for_me")).content.decode()
    )


# ---------------------------------------------------------------- query counts


@pytest.mark.parametrize("extra", [0, 6])
def test_service_page_shows_open_and_recent_releases_in_constant_queries(
    client, owner, world, extra, django_assert_num_queries
):
    shown = file_release(world, owner, summary="the one open")
    for _ in range(extra):
        services.withdraw_release(file_release(world, owner), actor=owner)
    client.force_login(owner)
    # As the ledger's service page tests count (32: serving history and rollout shares,
    # run-evidence trend, the open and the recently closed releases, the rollback and the
    # reviews sections included), plus 33 the latest probes of the backends this world has.
    with django_assert_num_queries(33):
        response = client.get(reverse("releases:service_detail", args=[world.service.slug]))
    assert response.context["open_releases"] == [shown]
    assert len(response.context["recent_releases"]) == extra


@pytest.mark.parametrize("count", [1, 10])
def test_waiting_for_me_query_count_is_constant(
    client, owner, world, sre, count, django_assert_num_queries
):
    for _ in range(count):
        services.submit_release(file_release(world, owner), actor=owner)
    client.force_login(sre)
    url = reverse("releases:waiting_for_me")
    client.get(url)  # warm the content types
    # Whatever the number of releases listed: 1 session, 2 user, 3 the reader's
    # roles, 4 the releases awaiting a signature and 5 their standing sign-offs (as
    # values), 6 the releases listed and 7 their revisions, as the gates read them;
    # then the gates of all of them at once: 8 the candidates' reports, 9 the latest
    # runs of the required sets, 10 the rollback targets' last verifications and 11
    # the revisions rolled back off their services, 12 the services' task types (their
    # gateway policies must cover them), 13 the price sheets of the candidates' GPU models
    # (the cost_record gate), 14 the revisions' capabilities (impact_assessed and
    # metrics_coverage), 15 blackout windows, 16 waivers and 17 sign-offs.
    with django_assert_num_queries(17):
        response = client.get(url)
    rows = response.context["rows"]
    assert len(rows) == count
    platform_reads = ["image_pinned", "rollback_plan", "gray_plan", "blackout", "load_evidence"]
    for row in rows:
        assert [(g["key"], g["status"]) for g in row["gates"]] == [
            *((key, "pass") for key in platform_reads),
            ("signoffs", "pending"),
        ]


def _busy(release, owner, signers, comments):
    """A release with sign-offs, comments and events to list."""
    services.submit_release(release, actor=owner)
    for role in ("platform", "security_compliance")[: min(comments, 2)]:
        services.sign_off(release, actor=signers[role], role=role, decision="approve")
    for n in range(comments):
        services.add_comment(release, actor=signers["platform"], body=f"comment {n}")


@pytest.mark.parametrize("comments", [0, 5])
def test_release_page_query_count_is_constant(
    client, owner, release, signers, sre, comments, django_assert_num_queries
):
    _busy(release, owner, signers, comments)
    client.force_login(sre)
    client.get(reverse("releases:release_detail", args=[release.pk]))  # warm the content types
    # Whatever the number of sign-offs, comments and events: 1 session, 2 user; 3 the
    # release and 4 its revisions, with every part the page and the gates show (read
    # once for both), the gates' 5 reports, 6 latest runs, 7 last verification, 8
    # revisions rolled back off the service, 9 the service's task types, 10 the price
    # sheet of the candidate's GPU model (the cost_record gate), 11 the revisions'
    # capabilities (impact_assessed and metrics_coverage; the page's diff reuses them),
    # 12 blackout windows, 13 waivers and 14 sign-offs (what the reader signed among
    # them); the reader's 15 roles and 16 permissions (may they waive); 17 comments and 18
    # the timeline; the cost section's 19 load-test throughputs of both revisions and 20
    # price sheets in force.
    with django_assert_num_queries(20):
        response = client.get(reverse("releases:release_detail", args=[release.pk]))
    assert len(response.context["comments"]) == comments


def test_the_page_offers_no_other_role_to_who_signed_one(client, owner, release):
    from tests.factories import UserFactory

    root = UserFactory(username="root-user", is_superuser=True)
    services.submit_release(release, actor=owner)
    client.force_login(root)
    url = reverse("releases:release_detail", args=[release.pk])
    # Every role but the model team's: an administrator outside the team does not sign
    # for it (issue 26, 8a).
    assert client.get(url).context["signable_roles"] == [
        "platform",
        "security_compliance",
        "business_owner",
    ]
    services.sign_off(release, actor=root, role="platform", decision="approve")
    # Only the role they signed stays theirs (where a voided sign-off is given again).
    assert client.get(url).context["signable_roles"] == ["platform"]


def test_a_withdrawn_release_links_the_draft_reopened_from_it(client, owner, release):
    services.withdraw_release(release, actor=owner)
    copy = services.reopen_release(release, actor=owner)
    client.force_login(owner)
    html = client.get(reverse("releases:release_detail", args=[release.pk])).content.decode()
    assert f'reopened as <a href="/releases/{copy.pk}/">#{copy.pk}</a>' in html
    html = client.get(reverse("releases:release_detail", args=[copy.pk])).content.decode()
    assert f'reopened from <a href="/releases/{release.pk}/">#{release.pk}</a>' in html


@pytest.mark.parametrize("count", [3, 30])
def test_release_list_query_count_is_constant(
    client, owner, world, count, django_assert_num_queries
):
    for _ in range(count):
        file_release(world, owner)
    client.force_login(owner)
    # 1 session, 2 user, 3 the count, 4 the page of releases and (prefetched)
    # their 5 services, 6 from- and 7 to-revisions and 8 filers, 9 the user's
    # groups and 10 the services they may file for.
    with django_assert_num_queries(10):
        response = client.get(reverse("releases:release_list"), {"service": world.service.slug})
    assert len(response.context["page"].object_list) == min(count, 25)


def test_htmx_change_with_a_bad_field_saves_nothing_and_names_it(client, owner, release):
    client.force_login(owner)
    url = reverse("releases:release_edit", args=[release.pk])
    events = Event.objects.count()
    response = client.post(
        url,
        {
            "to_revision": str(release.to_revision_id),
            "change_kind": "model_upgrade",
            "summary": "changed while a field is wrong",
            "path": "normal",
            "rollback_expected_minutes": "ten",
        },
        headers={"HX-Request": "true"},
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert 'id="form-errors" hx-swap-oob="true"' in html
    assert (
        'href="#id_rollback_expected_minutes">Expected minutes</a>: Enter a whole number.' in html
    )
    assert "not saved" in html
    release.refresh_from_db()
    assert release.summary != "changed while a field is wrong"
    assert Event.objects.count() == events


def test_recheck_answers_with_the_gate_panel_and_without_htmx_goes_to_the_page(
    client, sre, release
):
    client.force_login(sre)
    url = reverse("releases:release_gates_panel", args=[release.pk])
    panel = client.get(url, headers={"HX-Request": "true"})
    assert panel.content.decode().lstrip().startswith('<section class="gate-panel"')
    plain = client.get(url)
    assert plain.status_code == 302
    assert plain["Location"] == reverse("releases:release_detail", args=[release.pk]) + "#gates"


def test_a_released_or_withdrawn_form_no_longer_opens_for_editing(client, owner, release):
    services.withdraw_release(release, actor=owner)
    client.force_login(owner)
    response = client.get(reverse("releases:release_edit", args=[release.pk]), follow=True)
    assert response.redirect_chain[-1][0] == reverse("releases:release_detail", args=[release.pk])
    assert f"Release #{release.pk} is withdrawn: its form can no longer change." in (
        response.content.decode()
    )


def test_the_form_says_an_edit_voids_sign_offs_only_once_the_release_left_draft(
    client, owner, release
):
    client.force_login(owner)
    notice = "a change now voids the sign-offs it touches"
    draft = client.get(f"/releases/{release.pk}/edit/")
    assert draft.status_code == 200 and notice not in draft.content.decode()

    services.submit_release(release, actor=owner)
    submitted = client.get(f"/releases/{release.pk}/edit/")
    assert notice in submitted.content.decode()
