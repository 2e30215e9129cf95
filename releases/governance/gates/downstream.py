"""The impact_assessed gate: the downstream systems the revision diff suggests are each
ticked or dismissed with a reason, and every impacted task type has a required replay
sample set that covers it (`releases.governance.impact` says what suggests what)."""

from __future__ import annotations

from releases.governance.gates.base import Inputs, Verdict, listing
from releases.governance.impact import dismissed
from releases.schemas import DOWNSTREAM_SYSTEMS


def _named(system: str, fields: list[str]) -> str:
    label = DOWNSTREAM_SYSTEMS.get(system, system)
    if not fields:
        return f"{label} (any change)"
    return f"{label} ({listing(list(dict.fromkeys(fields)), 3)})"


def impact_assessed(inputs: Inputs) -> Verdict:
    release = inputs.release
    suggested = inputs.impact_suggested
    ticked = set(release.impact_downstream)
    reasons = dismissed(release.impact_dismissed)
    open_systems = [s for s in suggested if s not in ticked and s not in reasons]
    problems = []
    if open_systems:
        problems.append(
            "the diff suggests "
            + ", ".join(_named(s, suggested[s]) for s in open_systems)
            + ": tick each as touched or dismiss it with a reason"
        )
    impacted = [t for t in release.impact_task_types if isinstance(t, str)]
    uncovered = [t for t in impacted if not _covered(inputs, t)]
    if uncovered:
        problems.append(
            "no required replay sample set has a sample tagged "
            + ", ".join(uncovered)
            + ": name one that covers each impacted task type"
        )
    if problems:
        return "fail", "; ".join(problems) + ".", []
    said = []
    if suggested:
        labels = [DOWNSTREAM_SYSTEMS.get(s, s) for s in suggested]
        said.append(f"{listing(labels, 8)} suggested by the diff, each ticked or dismissed")
    else:
        said.append("the diff suggests no downstream system")
    if impacted:
        said.append(f"{', '.join(impacted)} covered by required sample sets")
    return "pass", "; ".join(said) + ".", []


def _covered(inputs: Inputs, task_type: str) -> bool:
    return any(task_type in tags for tags in inputs.set_tags.values())
