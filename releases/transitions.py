"""The release's state machine, stated once: for each action, the states it applies to
and the states it can leave the release in.

draft → submitted → approved → rolling_out → released, or rejected, withdrawn,
aborted, rolled_back. The verbs (`releases.governance.services`) refuse an action whose state it
does not apply to with `Release.refusal(action)` (the API's 409); the pages offer it
only where `Release.allowed(action)` holds. Who may act, and whether the gates pass,
are asked separately (`releases.permissions`, `releases.governance.gates`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType


class Action(StrEnum):
    EDIT = "edit"
    SUBMIT = "submit"
    WITHDRAW = "withdraw"
    REOPEN = "reopen"
    SIGN = "sign"
    WAIVE = "waive"
    START_ROLLOUT = "start_rollout"
    OBSERVE = "observe"
    PROMOTE = "promote"
    HOLD = "hold"
    ABORT = "abort"
    ROLL_BACK = "roll_back"
    CLOSE = "close"


@dataclass(frozen=True)
class Transition:
    """`leads_to`: each state the action applies to (in the order its refusal names
    them) → the states the release can be in after it (itself: it stays).
    `emergency_leads_to`: the states it also applies to on the emergency path."""

    doing: str  # "only a draft release can be {doing}"
    leads_to: Mapping[str, tuple[str, ...]]
    emergency_leads_to: Mapping[str, tuple[str, ...]] = field(
        default_factory=lambda: MappingProxyType({})
    )

    def sources(self, path: str) -> tuple[str, ...]:
        extra = tuple(self.emergency_leads_to) if path == "emergency" else ()
        return (*self.leads_to, *extra)

    def results(self, state: str, path: str) -> tuple[str, ...]:
        """Where the action can take a release in `state` ((): it does not apply)."""
        if state in self.leads_to:
            return self.leads_to[state]
        if path == "emergency":
            return self.emergency_leads_to.get(state, ())
        return ()


def _t(
    doing: str, leads_to: dict[str, tuple[str, ...]], **emergency: tuple[str, ...]
) -> Transition:
    return Transition(doing, MappingProxyType(leads_to), MappingProxyType(emergency))


TRANSITIONS: Mapping[Action, Transition] = MappingProxyType(
    {
        # A change after submission voids the sign-offs it touches: approved goes back to
        # submitted until they are given again.
        Action.EDIT: _t(
            "changed",
            {
                "draft": ("draft",),
                "submitted": ("submitted",),
                "approved": ("approved", "submitted"),
            },
        ),
        # Approved at once when no sign-off is required (experimental).
        Action.SUBMIT: _t("submitted", {"draft": ("submitted", "approved")}),
        Action.WITHDRAW: _t(
            "withdrawn",
            {"draft": ("withdrawn",), "submitted": ("withdrawn",), "approved": ("withdrawn",)},
        ),
        # The release stays as it was; the copy it files is a draft.
        Action.REOPEN: _t("reopened", {"rejected": ("draft",), "withdrawn": ("draft",)}),
        # The last approval approves; a rejection rejects, except while rolling out (the
        # emergency path signs after the start), where it stands on the page.
        Action.SIGN: _t(
            "signed off",
            {
                "submitted": ("submitted", "approved", "rejected"),
                "approved": ("approved", "submitted", "rejected"),
                "rolling_out": ("rolling_out",),
            },
        ),
        Action.WAIVE: _t(
            "given a waiver",
            {
                "draft": ("draft",),
                "submitted": ("submitted",),
                "approved": ("approved", "submitted"),
                "rolling_out": ("rolling_out",),
            },
        ),
        # A plan whose first stage is 100 % releases at once. The emergency path may start
        # before its sign-offs, from submitted.
        Action.START_ROLLOUT: _t(
            "rolled out",
            {"approved": ("rolling_out", "released")},
            submitted=("rolling_out", "released"),
        ),
        Action.OBSERVE: _t("observed", {"rolling_out": ("rolling_out",)}),
        # Promoting the stage before 100 % releases it.
        Action.PROMOTE: _t("promoted", {"rolling_out": ("rolling_out", "released")}),
        Action.HOLD: _t("held", {"rolling_out": ("rolling_out",)}),
        Action.ABORT: _t("aborted", {"rolling_out": ("aborted",)}),
        # Before 100 % a rollback aborts the rollout; after, it rolls the release back.
        Action.ROLL_BACK: _t(
            "rolled back", {"rolling_out": ("aborted",), "released": ("rolled_back",)}
        ),
        # Correcting the close code and incidents of a finished release.
        Action.CLOSE: _t(
            "closed",
            {"released": ("released",), "aborted": ("aborted",), "rolled_back": ("rolled_back",)},
        ),
    }
)


def allowed(state: str, path: str, action: Action | str) -> bool:
    return bool(TRANSITIONS[Action(action)].results(state, path))
