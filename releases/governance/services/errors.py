"""Refusals of the release verbs that are neither bad input nor a missing permission."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from releases.governance.gates import GateResult


class TransitionRefused(Exception):
    """The release is not in a state the verb applies to (the API answers 409).

    The message names the current state and what the verb needs.
    """

    def __init__(self, message: str, *, state: str) -> None:
        super().__init__(message)
        self.message = message
        self.state = state


class GatesNotPassed(Exception):
    """Submitting (or starting) needs gates that neither pass nor are waived (API: 422)."""

    def __init__(self, message: str, gates: list[GateResult]) -> None:
        super().__init__(message)
        self.message = message
        self.gates = gates
