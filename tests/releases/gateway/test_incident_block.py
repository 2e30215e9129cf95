"""The incident screen's "What the gateway should be doing": the policy in force, its
limits, the weights of the rollout in force, fallbacks and each task type's degradation,
rendered on the server (no JavaScript needed)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from ledger.models import TaskType
from tests.releases.factories import roll_out

pytestmark = pytest.mark.django_db


def _block(client, slug: str = "kb-assistant") -> str:
    page = client.get(reverse("releases:incident", args=[slug])).content.decode()
    start = page.index('id="gateway"')
    return page[start : page.index("</section>", start)]


def test_before_a_rollout_the_live_backend_carries_everything(client, sre, world):
    world.service.task_types.add(
        TaskType.objects.get_or_create(slug="sql", defaults={"name": "SQL"})[0]
    )
    client.force_login(sre)

    block = _block(client)

    assert "What the gateway should be doing" in block
    assert ">v1</a>" in block
    assert "input ≤ 8192 · output ≤ 1024 tokens · timeout 60 s · 64 in flight per backend" in block
    assert "<strong>100.0 %</strong> kb-assistant-live" in block
    assert "candidate" not in block
    # sql is served but the policy (made before) does not say how it degrades.
    assert 'sql: <span class="badge warn">not stated</span>' in block


def test_during_a_rollout_the_candidate_carries_its_stages_share(
    client, sre, world, release, owner, signers
):
    roll_out(release, owner, signers)
    client.force_login(sre)

    block = _block(client)

    assert "<strong>95.0 %</strong> kb-assistant-live" in block
    assert (
        '<strong>5.0 %</strong> kb-assistant-canary <span class="badge info">candidate</span>'
        in block
    )


def test_the_incident_api_carries_the_same_block(client, sre, world, release, owner, signers):
    roll_out(release, owner, signers)
    client.force_login(sre)

    gateway = client.get(reverse("api:service_incident", args=["kb-assistant"])).json()["gateway"]

    assert (gateway["policy"], gateway["policy_known"], gateway["routed"]) == ("v1", True, True)
    assert gateway["limits"]["max_input_tokens"] == 8192
    shares = {w["backend"]: (w["share_pct"], w["candidate"]) for w in gateway["weights"]}
    assert shares == {"kb-assistant-live": (95.0, False), "kb-assistant-canary": (5.0, True)}
    # Never checked: unknown, never in sync.
    assert gateway["check"] == {"state": "unknown", "checked_at": None, "stale": True}


def test_the_last_gateway_checks_are_read_in_the_admin(client, world):
    admin = get_user_model().objects.create_superuser("root-admin", "root@example.com", "x")
    client.force_login(admin)

    assert client.get("/admin/releases/gatewaycheck/").status_code == 200
