"""seed_demo leaves releases in every state the flow has, each through the verbs."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from ledger.chain import verify_chain
from releases import gates
from releases.models import Release

pytestmark = pytest.mark.django_db


def test_seed_demo_makes_releases_in_every_state_once():
    call_command("seed_demo", "--quiet-logins")
    releases = {r.state: r for r in Release.objects.select_related("service")}
    assert set(releases) == {"draft", "submitted", "approved", "rejected", "rolling_out"}

    draft = gates.assess(releases["draft"])
    assert any(g["key"] == "license" and g["status"] == "fail" for g in draft.gates)
    waiting = gates.assess(releases["submitted"])
    assert waiting.gate("signoffs")["status"] == "pending"
    assert gates.assess(releases["rejected"]).gate("signoffs")["status"] == "fail"
    emergency = gates.assess(releases["rolling_out"])
    assert releases["rolling_out"].path == "emergency"
    assert emergency.overdue
    assert "overdue since" in emergency.gate("signoffs")["reason"]

    call_command("seed_demo", "--quiet-logins")
    assert Release.objects.count() == 5
    assert verify_chain().ok
