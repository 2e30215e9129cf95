"""Durations in words, in the reader's language: "40 s", "8 min", "1 h 5 min", "2 h".

The one place a duration becomes text, for pages, messages and emails alike (a page's
template reads it through `release_format`'s `duration` and `minutes_words` filters).
Recorded text (a gate's reason, an event's payload) keeps its own English words.
"""

from __future__ import annotations

import datetime as dt

from django.utils.translation import gettext as _


def in_words(delta: dt.timedelta) -> str:
    """Seconds under a minute, else whole minutes (rounded down) and hours."""
    seconds = max(0, int(delta.total_seconds()))
    if seconds < 60:
        return _("%(seconds)d s") % {"seconds": seconds}
    hours, minutes = divmod(seconds // 60, 60)
    if not hours:
        return _("%(minutes)d min") % {"minutes": minutes}
    if minutes:
        return _("%(hours)d h %(minutes)d min") % {"hours": hours, "minutes": minutes}
    return _("%(hours)d h") % {"hours": hours}


def minutes_in_words(minutes: int | None) -> str:
    """A number of minutes (a plan's expected time, a stage's window), or a dash."""
    if minutes is None:
        return "—"
    return in_words(dt.timedelta(minutes=minutes))
