"""Every action the code records has a label a page shows, in both languages; the
recorded key stays as it is."""

from __future__ import annotations

import re
from pathlib import Path

from django.utils import translation

from ledger.event_actions import ACTION_LABELS, action_label

ROOT = Path(__file__).resolve().parents[2]
# `action=` and what follows on its line: each quoted "noun.verb" there is an action.
_ACTION_ARGUMENT = re.compile(r"action=(?P<rest>.+)")
_KEY = re.compile(r'"([a-z_]+\.[a-z_]+)"')
# Actions built with an f-string, spelled out: a stage's state, a capability's check.
_BUILT = {
    'f"release.stage_{stage.state}"': ["release.stage_breached", "release.stage_held"],
    'f"capability.{status}"': ["capability.verified", "capability.failed"],
}


def recorded_actions() -> set[str]:
    found: set[str] = set()
    for app in ("ledger", "replay", "releases"):
        for path in (ROOT / app).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            for match in _ACTION_ARGUMENT.finditer(path.read_text()):
                rest = match["rest"]
                found.update(_KEY.findall(rest))
                for built, actions in _BUILT.items():
                    if rest.startswith(built):
                        found.update(actions)
    return found


def test_every_recorded_action_has_a_label():
    actions = recorded_actions()
    assert "release.submitted" in actions and "release.stage_breached" in actions
    assert sorted(actions - ACTION_LABELS.keys()) == []


def test_an_action_reads_in_the_readers_language_and_an_unknown_one_as_recorded():
    assert action_label("release.submitted") == "Release submitted"
    assert action_label("test.something") == "test.something"
    with translation.override("zh-hans"):
        assert action_label("release.submitted") == "发布已提交"
        assert action_label("service.live_revision_changed") == "当前线上版本已变更"
