"""A strict Content-Security-Policy, and pages that live with it: no inline script
or style, htmx without eval, plotly's styles shipped as files.

tests/foundation/test_browser_csp.py drives the chart pages, an htmx swap, the
admin and the API docs in chromium and listens for violations.
"""

from __future__ import annotations

import re
from pathlib import Path

import plotly
import pytest

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = ROOT / "templates"


def directives(response) -> dict[str, list[str]]:
    header = response["Content-Security-Policy"]
    parsed = {}
    for part in header.split(";"):
        name, *values = part.split()
        parsed[name] = values
    return parsed


def inline_code(page: str) -> list[str]:
    """Inline scripts (not JSON data), <style> elements without a nonce, style attributes."""
    found = []
    for attrs, body in re.findall(r"<script\b([^>]*)>(.*?)</script>", page, re.S | re.I):
        if "src=" not in attrs and 'type="application/json"' not in attrs:
            found.append(f"<script{attrs}>{body[:60]}")
    found += re.findall(r"<style\b(?![^>]*\bnonce=)[^>]*>", page, re.I)
    found += re.findall(r"\sstyle=\"[^\"]*\"", page, re.I)
    found += re.findall(r"\son[a-z]+=\"", page, re.I)
    return found


def test_pages_send_a_strict_content_security_policy(client, owner):
    client.force_login(owner)

    response = client.get("/")

    policy = directives(response)
    assert policy["default-src"] == ["'self'"]
    assert policy["script-src"][0] == "'self'"
    assert policy["style-src"][0] == "'self'"
    assert policy["object-src"] == ["'none'"]
    assert policy["base-uri"] == ["'none'"]
    assert policy["frame-ancestors"] == ["'none'"]
    assert policy["form-action"] == ["'self'"]
    assert policy["img-src"] == ["'self'", "data:", "blob:"]
    header = response["Content-Security-Policy"]
    assert "unsafe-inline" not in header
    assert "unsafe-eval" not in header
    assert inline_code(response.content.decode()) == []


def test_the_login_and_admin_pages_carry_the_policy_too(client):
    for url in ("/accounts/login/", "/admin/login/"):
        response = client.get(url)

        assert "script-src 'self'" in response["Content-Security-Policy"], url
        assert "unsafe-" not in response["Content-Security-Policy"], url


def test_htmx_is_told_not_to_eval_nor_inject_its_indicator_styles_nor_delay_settling(client, owner):
    client.force_login(owner)

    page = client.get("/").content.decode()

    assert (
        """<meta name="htmx-config" content='{"includeIndicatorStyles": false, "allowEval": false, "defaultSettleDelay": 0}'>"""
        in page
    )
    css = (ROOT / "static" / "css" / "ledger.css").read_text()
    assert ".htmx-request .htmx-indicator" in css


TEMPLATE_FILES = sorted(TEMPLATES.rglob("*.html"))


@pytest.mark.parametrize("path", TEMPLATE_FILES, ids=lambda p: str(p.relative_to(TEMPLATES)))
def test_no_template_asks_htmx_to_evaluate_code(path):
    text = path.read_text()

    # hx-on:*, trigger filters ("change[...]") and js: values run through Function().
    assert not re.search(r"\bhx-on", text)
    assert not re.search(r"hx-trigger=\"[^\"]*\[", text)
    assert not re.search(r"hx-(vals|vars)=[\"']\s*js:", text)
    assert not re.search(r"\|\s*safe\b", text), "raw HTML: charts go through json_script"


def test_no_widget_attribute_asks_htmx_to_evaluate_code():
    source = (ROOT / "lib" / "forms.py").read_text()

    triggers = re.findall(r"\"hx-trigger\": ([^\n]+)", source)
    assert triggers
    assert not any("[" in trigger for trigger in triggers)
    assert "hx-on" not in source


def test_plotly_css_is_shipped_under_the_ids_this_plotly_js_checks():
    """plotly.js skips injecting its <style> elements when elements with these ids
    exist: the ids are specific to its build (scripts/extract-plotly-css.py)."""
    head = (TEMPLATES / "lib" / "_plotly_head.html").read_text()
    (src,) = re.findall(r"<script src=\"{% static '(vendor/plotly[^']+)' %}\"", head)
    bundle = (ROOT / "static" / src).read_text()

    assert re.findall(r'<link rel="stylesheet" id="([^"]+)"', head) == ["plotly.js-style-global"]
    assert '"plotly.js-style-"+e' in bundle and 'matches(".no-inline-styles")' in bundle
    assert (ROOT / "static" / "vendor" / "plotly.css").stat().st_size > 1000
    # maplibre's style, for map traces the basic bundle does not draw: an element
    # with its id stops the injection.
    (maplibre,) = re.findall(r'<meta name="plotly-maplibre-style" id="([0-9a-f]{64})"', head)
    assert f'document.getElementById("{maplibre}")' in bundle


def test_the_vendored_plotly_bundle_is_the_version_the_plotly_package_ships():
    """Figures are built by the Python package for its own plotly.js version."""
    shipped = (Path(plotly.__file__).parent / "package_data" / "plotly.min.js").read_text()
    version = re.search(r"plotly\.js v(\d+\.\d+\.\d+)", shipped[:300]).group(1)
    head = (TEMPLATES / "lib" / "_plotly_head.html").read_text()
    assert f"vendor/plotly-basic-{version}.min.js" in head


def test_api_docs_render_swagger_from_files_with_a_nonced_style(client, auditor):
    client.force_login(auditor)

    response = client.get("/api/docs/")

    page = response.content.decode()
    assert response.status_code == 200
    assert inline_code(page) == []
    nonce = re.search(r"<style nonce=\"([^\"]+)\">", page).group(1)
    assert f"'nonce-{nonce}'" in directives(response)["style-src"]
    script = re.search(r"<script src=\"(/api/docs/\?[^\"]*script=[^\"]*)\"", page).group(1)
    assert client.get(script.replace("&amp;", "&")).status_code == 200
