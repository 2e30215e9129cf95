"""After a rollback, the SRE sees the right target in a real browser, on a desktop and on
a 390 px phone: the incident screen names the revision before, says why not the one
just rolled back (when, why, a link to the rollback), and the rollback form preselects
it; choosing the rolled-back one anyway asks for a confirmation and a reason. Verify
now queues the target's verification from the incident screen. The phone reads it all
with JavaScript off.

Set RELEASE_SCREENSHOTS to a folder to keep screenshots of the pages.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from ledger import services as ledger_services
from releases.governance import services
from releases.models import RollbackEvent
from replay.models import Run
from tests.foundation.test_browser_csp import CSP_LISTENER
from tests.ledger.factories import RevisionFactory
from tests.releases.factories import file_release, roll_out
from tests.releases.test_browser_release import log_in, no_sideways_scroll, screenshot
from tests.releases.test_rollbacks import release_fully
from tests.replay.factories import BackendFactory
from tests.replay.helpers import make_set, sample

pytestmark = pytest.mark.browser

REASON = "p95 TTFT doubled for tenant support"


@pytest.fixture
def rolled_back(world, owner, signers, sre):
    """r3 served before r1; the release of r2 went out and was rolled back to r1."""
    earlier = RevisionFactory(service=world.service, runtime=world.live.runtime)
    BackendFactory(name="kb-assistant-r3-standby", revision=earlier)
    ledger_services.set_live_revision(world.service, earlier, actor=None, reason="what ran")
    ledger_services.set_live_revision(world.service, world.live, actor=None, reason="back")
    world.service.refresh_from_db()
    make_set(world.verification_set.name, [sample("v1", "fake: reply=ok")])
    release = file_release(world, owner, path="emergency", emergency_reason="a fix for INC-7")
    release_fully(roll_out(release, owner, signers), sre)
    rollback = services.record_rollback(world.service, actor=sre, reason=REASON)
    return earlier, rollback


@pytest.mark.parametrize(
    ("viewport", "javascript"),
    [({"width": 1280, "height": 900}, True), ({"width": 390, "height": 844}, False)],
    ids=["desktop", "phone-without-javascript"],
)
def test_after_a_rollback_the_sre_sees_the_revision_before_as_the_target(
    live_server, browser, world, rolled_back, sre, viewport, javascript
):
    earlier, rollback = rolled_back
    phone = viewport["width"] < 500
    context = browser.new_context(viewport=viewport, java_script_enabled=javascript)
    page = context.new_page()
    if javascript:
        page.add_init_script(CSP_LISTENER)
    try:
        log_in(page, live_server, sre)
        page.goto(f"{live_server.url}/services/kb-assistant/incident/")
        rollback_section = page.locator("section[aria-labelledby=rollback-heading]")
        expect(rollback_section).to_contain_text(f"Target {earlier.label}")
        notice = page.locator("#passed-over")
        expect(notice).to_be_visible()
        expect(notice).to_contain_text(f"{world.candidate.label} is not the target")
        expect(notice).to_contain_text(REASON)
        expect(notice.locator("time")).to_have_attribute(
            "datetime", rollback.started_at.isoformat()
        )
        assert no_sideways_scroll(page)
        screenshot(page, f"incident-after-rollback-{'phone' if phone else 'desktop'}")
        notice.get_by_role("link", name=f"rollback #{rollback.pk}").click()
        expect(page.get_by_role("heading", level=1)).to_contain_text(f"Rollback #{rollback.pk}")
        page.goto(f"{live_server.url}/services/kb-assistant/incident/")

        # Verify now: the target's verification is queued, and the screen says so.
        page.get_by_role("button", name="Verify now").click()
        expect(page.locator(".messages")).to_contain_text("Queued verification run #")
        run = Run.objects.get(trigger="verification", state="queued", revision=earlier)
        expect(page.locator("#target-verification")).to_contain_text(f"run #{run.pk}")

        page.get_by_role("link", name="Record rollback").last.click()
        expect(page.get_by_label("Roll back to")).to_have_value(str(earlier.pk))
        expect(page.locator("#passed-over")).to_be_visible()
        assert no_sideways_scroll(page)

        # Choosing the rolled-back revision anyway: the page says so, and asks.
        page.get_by_label("Compare with").select_option(str(world.candidate.pk))
        page.get_by_role("button", name="Show what changes").click()
        expect(page.locator("#chosen-rolled-back")).to_contain_text(
            f"You chose {world.candidate.label}"
        )
        page.get_by_label("Roll back to").select_option(str(world.candidate.pk))
        page.get_by_label("Reason", exact=True).fill("the fix is out")
        page.get_by_role("button", name="Record rollback").click()
        expect(page.locator(".error-summary")).to_contain_text("was rolled back off kb-assistant")
        assert RollbackEvent.objects.count() == 1
        page.get_by_label("Go back to a rolled-back revision anyway").check()
        page.get_by_label("Why go back to it anyway").fill("the errors came from the gateway")
        page.get_by_role("button", name="Record rollback").click()
        expect(page.locator(".messages")).to_contain_text(
            f"{world.candidate.label} is live on kb-assistant"
        )
        if javascript:
            assert page.evaluate("window.__csp") == []
    finally:
        context.close()
