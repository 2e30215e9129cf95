"""简体中文 in a real browser: the top bar's switcher turns the home page, a service page
and the release form into Chinese and remembers it; a browser that asks for Chinese
from Asia/Shanghai gets Chinese pages with times in its own zone, named."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from ledger.models import UserPreference
from tests.factories import PASSWORD
from tests.releases.factories import build_world

pytestmark = pytest.mark.browser

CJK = re.compile(r"[\u4e00-\u9fff]")
# What a Chinese page still shows in Latin letters on purpose: identifiers (slugs,
# event actions, model names, digests, paths, r3), metric names and units.
IDENTIFIER = re.compile(r"[\d_./:@#-]|^([A-Z0-9]{2,}|ms|s|GiB|UTC|CST|Token)$")


def english_words(text: str) -> list[str]:
    tokens = [token.strip("()[]{},;!?\"'…·") for token in text.split()]
    latin = [t for t in tokens if re.search(r"[A-Za-z]{2,}", t) and not CJK.search(t)]
    return [token for token in latin if not IDENTIFIER.search(token)]


def log_in(page, live_server, user) -> None:
    page.goto(f"{live_server.url}/accounts/login/")
    page.locator("#id_username").fill(user.username)
    page.locator("#id_password").fill(PASSWORD)
    page.locator("form.stacked button[type=submit], form button.primary").first.click()
    page.wait_for_url(f"{live_server.url}/")


def assert_reads_chinese(page, *, slugs: tuple[str, ...] = ()) -> None:
    expect(page.locator("html")).to_have_attribute("lang", "zh-hans")
    expect(page.locator("h1")).to_have_text(CJK)
    shown = page.locator("main").inner_text()
    for slug in slugs:
        shown = shown.replace(slug, "")
    chinese = len(CJK.findall(shown))
    left = english_words(shown)
    # Names people typed (services, teams, summaries) stay as typed: a handful, not the page.
    assert chinese > 10 * len(left), (page.url, chinese, left)


def test_the_switcher_turns_the_pages_into_chinese_and_remembers_it(live_server, page, owner, team):
    world = build_world(team)
    log_in(page, live_server, owner)
    expect(page.locator("html")).to_have_attribute("lang", "en")

    # With scripts the switcher switches on picking (its button is for pages without).
    expect(page.locator("form.language button")).to_be_hidden()
    page.locator("#topbar-language").select_option("zh-hans")

    expect(page.locator("html")).to_have_attribute("lang", "zh-hans")
    assert_reads_chinese(page, slugs=(owner.username, owner.get_full_name()))
    # The browser remembers it (a cookie); the account's preference is left as it was.
    assert {c["name"]: c["value"] for c in page.context.cookies()}["django_language"] == "zh-hans"
    assert not UserPreference.objects.filter(user=owner).exists()

    page.goto(f"{live_server.url}/services/{world.service.slug}/")
    assert_reads_chinese(page, slugs=(world.service.slug, world.service.name, team.name))

    page.goto(f"{live_server.url}/services/{world.service.slug}/releases/new/")
    assert_reads_chinese(page, slugs=(world.service.slug, world.service.name, team.name))
    expect(page.locator("label[for=id_change_kind]")).to_have_text(CJK)


def test_a_chinese_browser_in_shanghai_reads_chinese_in_its_own_zone(
    live_server, browser, owner, team
):
    build_world(team)
    context = browser.new_context(locale="zh-CN", timezone_id="Asia/Shanghai")
    page = context.new_page()
    try:
        log_in(page, live_server, owner)
        expect(page.locator("html")).to_have_attribute("lang", "zh-hans")
        # The first page told the server the browser's zone (static/js/timezone.js).
        page.goto(f"{live_server.url}/events/")
        expect(page.locator("footer")).to_contain_text("Asia/Shanghai")
        expect(page.locator("main")).to_contain_text("CST")
    finally:
        context.close()


def test_without_javascript_the_switcher_has_its_button(live_server, browser, owner, team):
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    try:
        log_in(page, live_server, owner)
        page.locator("#topbar-language").select_option("zh-hans")
        page.locator("form.language button").click()
        expect(page.locator("html")).to_have_attribute("lang", "zh-hans")
        expect(page.locator("footer")).to_contain_text("推理发布台账")
    finally:
        context.close()
