"""The sentences pages and messages say: each reads as a person would write it (issue 27,
item 9), and the sign-off form says a rejection needs a comment (item 6)."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse
from django.utils import timezone

from releases.governance import services
from releases.governance.gates import assess
from releases.models import Release, SignOff
from tests.releases.factories import file_release, roll_out
from tests.releases.test_rollbacks import release_fully
from tests.replay.helpers import make_set, sample

pytestmark = pytest.mark.django_db


def _said(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def test_an_approval_and_a_rejection_say_what_was_decided(client, owner, release, sre, business):
    services.submit_release(release, actor=owner)
    snapshot = assess(release).snapshot_hash[:12]
    client.force_login(sre)
    approved = client.post(
        reverse("releases:release_signoff", args=[release.pk]),
        {"role": "platform", "decision": "approve"},
    )
    assert _said(approved) == [f"Approved for platform on snapshot {snapshot}."]
    client.force_login(business)
    rejected = client.post(
        reverse("releases:release_signoff", args=[release.pk]),
        {"role": "business_owner", "decision": "reject", "comment": "not before the audit"},
    )
    assert _said(rejected)[-1] == (
        f"Rejected for business owner on snapshot {snapshot}: the filer reads why."
    )


def test_submitting_says_what_happens_next(client, owner, release):
    client.force_login(owner)
    response = client.post(reverse("releases:release_transition", args=[release.pk, "submit"]))
    assert _said(response) == [f"Submitted release #{release.pk} for sign-off."]


def test_a_release_needing_no_signoff_says_it_is_approved(client, owner, team):
    from tests.releases.factories import build_world

    experimental = file_release(build_world(team, tier="experimental", slug="lab-chat"), owner)
    client.force_login(owner)
    response = client.post(reverse("releases:release_transition", args=[experimental.pk, "submit"]))
    experimental.refresh_from_db()
    assert experimental.state == Release.State.APPROVED
    assert _said(response) == [
        f"Submitted release #{experimental.pk}: no sign-off is needed, so it is approved."
    ]


def test_the_risk_gate_says_an_engine_upgrade(world, owner):
    release = file_release(world, owner, change_kind=Release.ChangeKind.ENGINE_UPGRADE)
    reason = assess(release).gate("risk")["reason"]
    assert "as suggested for an engine upgrade on a production service" in reason
    model = file_release(world, owner)
    assert "as suggested for a model upgrade" in assess(model).gate("risk")["reason"]


def test_a_waiver_names_the_gate_by_its_title(client, owner, world, security):
    release = file_release(world, owner, logging_policy={})
    client.force_login(security)
    expires = (timezone.localtime() + dt.timedelta(days=3)).strftime("%Y-%m-%dT%H:%M")
    response = client.post(
        reverse("releases:release_waiver", args=[release.pk]),
        {"gate": "logging_policy", "reason": "audit logs ship next sprint", "expires_at": expires},
    )
    said = _said(response)
    assert len(said) == 1
    assert said[0].startswith("Waived the gate “Logging policy recorded” until ")
    page = client.get(reverse("releases:release_detail", args=[release.pk])).content.decode()
    waivers = page[page.index('id="waivers"') :]
    assert "Logging policy recorded by sofia until" in waivers[: waivers.index("</ul>")]


def test_a_rollback_is_named_once_beside_what_is_live(client, world, release, owner, signers, sre):
    release_fully(roll_out(release, owner, signers), sre)
    make_set(world.verification_set.name, [sample("v1", "fake: reply=ok")])
    rollback = services.record_rollback(
        world.service, actor=sre, reason="canary errors", symptom="slow_first_token"
    )
    client.force_login(sre)
    incident = client.get(reverse("releases:incident", args=[world.service.slug])).content.decode()
    assert f"through rollback #{rollback.pk}: canary errors" in incident
    assert f"rollback #{rollback.pk}: rollback #{rollback.pk}" not in incident
    history = client.get(
        reverse("ledger:serving_history", args=[world.service.slug])
    ).content.decode()
    assert f"rollback #{rollback.pk}: rollback #{rollback.pk}" not in history
    detail = client.get(
        reverse("releases:rollback_detail", args=[world.service.slug, rollback.pk])
    ).content.decode()
    assert "<dd>Slow first token</dd>" in detail
    assert "slow_first_token" not in detail


def test_the_new_runtime_form_leaves_launch_parameters_empty(client, owner, team):
    client.force_login(owner)
    form = client.get(reverse("ledger:runtime_create")).context["form"]
    assert form["launch_parameters"].value() in (None, "")
    html = client.get(reverse("ledger:runtime_create")).content.decode()
    textarea = html[html.index('name="launch_parameters"') :]
    assert textarea[textarea.index(">") + 1 : textarea.index("</textarea>")].strip() == ""


def test_the_comment_field_says_a_rejection_needs_one(client, owner, release, sre):
    services.submit_release(release, actor=owner)
    client.force_login(sre)
    html = client.get(reverse("releases:release_detail", args=[release.pk])).content.decode()
    field = html[html.index('id="field-comment"') :]
    label = field[: field.index("</label>")]
    assert "(required to reject)" in label and "(optional)" not in label
    assert "A rejection needs a comment: the filer reads it." in field[: field.index("</div>")]
    response = client.post(
        reverse("releases:release_signoff", args=[release.pk]),
        {"role": "platform", "decision": "reject"},
    )
    assert response.status_code == 400
    assert response.context["signoff_form"].errors["comment"] == [
        "A rejection needs a comment: the filer reads it."
    ]
    assert not SignOff.objects.exists()


SLOW = {"requests": 1200, "ttft_p95_ms": 1400, "error_rate_pct": 0.2}


def _zh(client, url: str) -> str:
    response = client.get(url, headers={"Accept-Language": "zh-hans"})
    assert response.status_code == 200
    assert '<html lang="zh-hans"' in response.content.decode()
    return response.content.decode()


def _text(html: str) -> str:
    """What a reader sees: the page without its tags and attributes."""
    import re

    return re.sub(r"<[^>]+>", " ", html)


def test_labels_read_in_chinese_on_the_incident_screen_and_the_release_page(
    client, world, release, owner, signers, sre
):
    from tests.releases.factories import observe

    rolling = roll_out(release, owner, signers)
    observe(rolling, sre, SLOW)
    observe(rolling, sre, SLOW)  # the second failure breaches stage 1
    client.force_login(sre)

    incident = _zh(client, reverse("releases:incident", args=[world.service.slug]))
    shown = _text(incident)
    rollout = shown[shown.index("灰度发布") :]
    assert "已触发" in rollout[:400] and "breached" not in rollout[:400]
    assert "模型" in shown and ">Model<" not in incident  # the plan's rollback kind
    assert "<dd>10 分钟</dd>" in incident  # the plan's expected time
    assert "灰度发布已开始" in shown  # an event action by its label
    assert 'data-action="release.rollout_started"' in incident  # the key kept as recorded
    assert "release.rollout_started" not in shown
    owners = shown[shown.index("联系谁") :]
    assert "平台 SRE" in owners and "platform_sre" not in owners

    page = _text(_zh(client, reverse("releases:release_detail", args=[rolling.pk])))
    assert "压测证据有效且满足 SLO" in page  # a gate by its title
    assert "Load-test evidence current" not in page
    assert "1 小时" in page and "60 min" not in page  # a stage's window of 60 minutes
    assert "阶段已开始" in page  # the timeline's actions
