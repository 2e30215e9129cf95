"""How rollout guards, stages and rollbacks read on a page."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any, NamedTuple

from django import template
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import ngettext, pgettext, pgettext_lazy

from lib.durations import in_words, minutes_in_words
from releases import policy
from releases.governance.playbooks import FAILURE_MODE_TITLES
from releases.guards import GUARD_METRICS, GuardSpec, guard_specs
from releases.models import Release, SignOff, Stage

register = template.Library()

# The words gates, guards, readiness and replay compute. They stay English in the
# records, the API and the event chain; only the page reads them in the reader's language.
WORDS = {
    "pass": pgettext_lazy("verdict", "pass"),
    "fail": pgettext_lazy("verdict", "fail"),
    "waived": pgettext_lazy("verdict", "waived"),
    "pending": pgettext_lazy("verdict", "pending"),
    "advisory": pgettext_lazy("verdict", "advisory"),
    "inconclusive": pgettext_lazy("verdict", "inconclusive"),
    "error": pgettext_lazy("verdict", "error"),
    "ready": pgettext_lazy("verdict", "ready"),
    "at risk": pgettext_lazy("verdict", "at risk"),
    "not ready": pgettext_lazy("verdict", "not ready"),
    "healthy": pgettext_lazy("verdict", "healthy"),
    "stale": pgettext_lazy("verdict", "stale"),
    "not monitored": pgettext_lazy("verdict", "not monitored"),
    "regressed": pgettext_lazy("verdict", "regressed"),
    "unreachable": pgettext_lazy("verdict", "unreachable"),
    "errored": pgettext_lazy("verdict", "errored"),
    "drift": pgettext_lazy("verdict", "drift"),
    "breach": pgettext_lazy("verdict", "breach"),
    "warning": pgettext_lazy("verdict", "warning"),
    "approve": pgettext_lazy("verdict", "approve"),
    "reject": pgettext_lazy("verdict", "reject"),
    "standard": pgettext_lazy("release path", "standard"),
    "emergency": pgettext_lazy("release path", "emergency"),
    "submit": pgettext_lazy("action", "submit"),
    "withdraw": pgettext_lazy("action", "withdraw"),
    "reopen": pgettext_lazy("action", "reopen"),
    "start": pgettext_lazy("action", "start"),
    "promote": pgettext_lazy("action", "promote"),
    "hold": pgettext_lazy("action", "hold"),
    "abort": pgettext_lazy("action", "abort"),
    "end-window": pgettext_lazy("action", "end the window"),
    # What the rollout analysis did by itself.
    "rollback": pgettext_lazy("action", "roll back"),
    "stop": pgettext_lazy("action", "stop the analysis"),
}


# A trace id cited in a comment or a close note: 32 hex digits standing alone (not a
# part of a longer digest).
_CITED_TRACE = re.compile(r"(?<![0-9A-Za-z])[0-9a-fA-F]{32}(?![0-9A-Za-z])")


@register.filter
def cited_traces(text: str | None) -> list[str]:
    """The trace ids a text cites, lower-cased, in order, each once: the page links each
    to its explanation beside the text (the text itself is shown escaped, as written)."""
    found = (match.lower() for match in _CITED_TRACE.findall(text or ""))
    return [t for t in dict.fromkeys(found) if set(t) != {"0"}]


@register.filter
def allowed(release: Release, action: str) -> bool:
    """`release|allowed:"promote"`: the state machine applies the action to its state."""
    return release.allowed(action)


@register.filter
def failure_mode(playbook: Any) -> object:
    """A playbook's title (or a failure mode's) in the reader's language."""
    mode = getattr(playbook, "mode", playbook)
    return FAILURE_MODE_TITLES.get(str(mode), getattr(playbook, "title", mode))


@register.filter
def stage_state(state: str) -> str:
    """A stage's state key (`breached`) as its badge says it, in the reader's language."""
    return str(Stage.State(state).label).lower() if state in Stage.State.values else state


@register.filter
def word(value: object) -> object:
    """A computed word (a gate's status, a verdict, a path) in the reader's language."""
    return WORDS.get(str(value), value)


def describe(spec: GuardSpec) -> str:
    """e.g. "≤ 900 ms · ≤ +20 % of live · critical"."""
    metric = GUARD_METRICS[spec["metric"]]
    parts = []
    if spec["max"] is not None:
        sign = "≤" if metric.higher_is_worse else "≥"
        parts.append(f"{sign} {spec['max']:g} {metric.unit}")
    if spec["max_increase_pct"] is not None:
        parts.append(
            _("≤ %(increase)s %% of live") % {"increase": f"{spec['max_increase_pct']:+g}"}
        )
    if spec["min_requests"]:
        parts.append(_("judged from %(requests)s requests") % {"requests": spec["min_requests"]})
    if spec["critical"]:
        parts.append(_("critical"))
    if spec["dry_run"]:
        parts.append(_("dry run"))
    return " · ".join(parts) or _("no bound")


@register.filter
def guard_text(spec: GuardSpec) -> str:
    return describe(spec)


@register.filter
def plan_guard(guards: dict[str, Any] | None, metric: str) -> str:
    """One guard of a gray-plan stage as the form wrote it, or a dash."""
    found = [s for s in guard_specs(guards) if s["metric"] == metric]
    return describe(found[0]) if found else "—"


@register.filter
def guard_label(metric: str) -> str:
    """A guard's metric by its name, in the reader's language."""
    known = GUARD_METRICS.get(metric)
    return _(known.label) if known else metric


@register.filter
def minutes(duration: dt.timedelta | None) -> str:
    """A duration in words: "12 min", "1 h 5 min", "40 s"."""
    return "—" if duration is None else in_words(duration)


@register.filter
def minutes_words(count: int | None) -> str:
    """A number of minutes (a plan's expected time, a stage's window) in words."""
    return minutes_in_words(count)


@register.simple_tag
def planned_start_in(moment: dt.datetime) -> str:
    """How far ahead `moment` is, in words: "2 days", "5 h 10 min"."""
    ahead = moment - timezone.now()
    if ahead >= dt.timedelta(days=1):
        days = round(ahead / dt.timedelta(days=1))
        return ngettext("%(count)s day", "%(count)s days", days) % {"count": days}
    return in_words(ahead)


class Left(NamedTuple):
    expired: bool
    text: str


@register.simple_tag
def time_left(until: dt.datetime) -> Left:
    """How long is left until `until`, in words: "3 days left", "5 h left", "12 min
    left", or "expired". `{% time_left waiver.expires_at as left %}`."""
    left = until - timezone.now()
    if left <= dt.timedelta(0):
        return Left(True, pgettext("waiver", "expired"))
    if left.days:
        text = ngettext("%(count)s day left", "%(count)s days left", left.days)
        return Left(False, text % {"count": left.days})
    hours, seconds = divmod(left.seconds, 3600)
    if hours:
        return Left(False, _("%(count)s h left") % {"count": hours})
    return Left(False, _("%(count)s min left") % {"count": max(1, seconds // 60)})


@register.filter
def gate_title(gate: str) -> str:
    """A gate's key (`load_evidence`) by its title, in the reader's language."""
    title = policy.GATES.get(gate)
    return _(title) if title else gate


@register.filter
def waived_by(gate: str) -> str:
    """The sign-off role that may waive `gate`, in the reader's language; "" for none."""
    owner = policy.waiver_owner(gate)
    return _(dict(SignOff.Role.choices)[owner]).lower() if owner else ""
