"""The state of one `apply` and the machinery its steps share.

A `Run` holds the rows a document names (loaded by `resolve`, then the ones
the steps create), what happened to each object, and every problem found.
`Run.call` runs one domain verb in a savepoint and maps a refusal onto the
entry's document path, so one bad entry is reported without hiding the others.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.core.exceptions import NON_FIELD_ERRORS, PermissionDenied, ValidationError
from django.db import IntegrityError, transaction

from ledger import services as verbs
from ledger.chain import canonical_json
from ledger.declarative.document import Path, Problem
from ledger.declarative.schema import Entry, ValidDocument, parse_asset_ref
from ledger.models import (
    Capability,
    GatewayPolicy,
    License,
    ModelAsset,
    Revision,
    Runtime,
    Service,
    Team,
)
from lib.actors import Actor


@dataclass
class Change:
    """One object the document creates or updates; `fields` are (key, before, after)."""

    op: str  # "create" or "update"
    noun: str
    label: str
    path: Path
    fields: list[tuple[str, Any, Any]] = field(default_factory=list)


# ---------------------------------------------------------------- comparing values


def same(before: Any, after: Any) -> bool:
    if isinstance(before, Decimal) or isinstance(after, Decimal):
        if before is None or after is None:
            return before is after
        return Decimal(str(before)) == Decimal(str(after))
    return canonical_json(before) == canonical_json(after)


def show(value: Any) -> str:
    """A value as the reader wrote it in YAML."""
    if value is None:
        return "(none)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Decimal):
        return format(value.normalize(), "f")
    if isinstance(value, str):
        return value if value else '""'
    if isinstance(value, dict | list):
        return canonical_json(value)
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


def diff(entry: Entry, view: dict[str, Any], keys: list[str]) -> list[tuple[str, Any, Any]]:
    return [
        (key, view[key], entry[key])
        for key in keys
        if entry.has(key) and not same(view[key], entry[key])
    ]


class Failed(Exception):
    """An entry was refused; the problem is recorded, the entry skipped."""


class Skip(Exception):
    """An entry depends on one that was refused; its problem is already reported."""


class Run:
    def __init__(self, document: ValidDocument, actor: Actor, reason: str) -> None:
        self.doc = document
        self.actor = actor
        self.reason = reason
        self.problems: list[Problem] = []
        self.warnings: list[Problem] = []
        # (noun, identity) -> the change made, or None when the row already matched.
        self.outcomes: dict[tuple[str, Any], Change | None] = {}
        self.failed: set[tuple[str, Any]] = set()
        self.users: dict[str, Any] = {}
        self.teams: dict[str, Team] = {}
        self.licenses: dict[str, License] = {}
        self.assets: dict[tuple[str, str], ModelAsset] = {}
        self.runtimes: dict[str, Runtime] = {}
        self.services: dict[str, Service] = {}
        self.revisions: dict[tuple[str, int], Revision] = {}
        # (service slug, version) -> the stored version of its gateway policy.
        self.policies: dict[tuple[str, int], GatewayPolicy] = {}
        self.next_policy_version: dict[str, int] = {}
        self.capabilities: dict[int, dict[str, Capability]] = {}
        self.next_number: dict[str, int] = {}
        self.late_retirements: list[tuple[Entry, ModelAsset, dict[str, Any]]] = []

    def each(
        self, entry: Entry, noun: str, apply: Callable[[Entry], None], identity: Any = None
    ) -> None:
        try:
            apply(entry)
        except (Failed, Skip):
            self.failed.add((noun, entry.identity if identity is None else identity))

    def call(self, path: Path, verb: Callable, *args, error_paths: dict | None = None, **kwargs):
        """Run one verb in a savepoint; map a refusal onto the document path and raise Failed."""
        try:
            with transaction.atomic():
                return verb(*args, **kwargs)
        except ValidationError as exc:
            self.problems.extend(validation_problems(exc, path, error_paths or {}))
        except PermissionDenied as exc:
            self.problems.append(Problem(path, f"permission denied: {exc}"))
        except IntegrityError as exc:
            self.problems.append(Problem(path, f"the database refused it: {exc}".strip()))
        raise Failed

    def record(self, noun: str, identity: Any, change: Change | None) -> None:
        """Note what happened to one object; a later change to it adds to the first."""
        key = (noun, identity)
        previous = self.outcomes.get(key)
        if change is None:
            self.outcomes.setdefault(key, None)
        elif previous is None:
            self.outcomes[key] = change
        else:
            previous.fields.extend(change.fields)

    def changed(self, noun: str, identity: Any, label: str, path: Path, fields) -> None:
        if fields:
            self.record(noun, identity, Change("update", noun, label, path, list(fields)))
        else:
            self.record(noun, identity, None)

    def team(self, slug: str) -> Team:
        if ("team", slug) in self.failed:
            raise Skip
        return self.teams[slug]

    def license(self, spdx_id: str) -> License:
        if ("license", spdx_id) in self.failed:
            raise Skip
        return self.licenses[spdx_id]

    def asset(self, ref_text: str) -> ModelAsset:
        ref = parse_asset_ref(ref_text)
        if ("model asset", ref) in self.failed:
            raise Skip
        return self.assets[ref]

    def runtime(self, name: str) -> Runtime:
        if ("runtime", name) in self.failed:
            raise Skip
        return self.runtimes[name]

    def policy_label(self, slug: str, label: str) -> str:
        """A revision's policy name, once the version the document declares under it is in."""
        if ("gateway policy", (slug, label)) in self.failed:
            raise Skip
        return label

    def refuse_locked(self, obj, path: Path, differences, reason, advice: str) -> None:
        """A clear, path-named refusal before the domain's own lock check would fire."""
        mutable = verbs.MUTABLE_WHEN_LOCKED.get(type(obj), set())
        locked = [d for d in differences if d[0] not in mutable]
        if not locked or not obj.lock_reasons():
            return
        why = reason()
        for key, before, after in locked:
            self.problems.append(
                Problem(
                    (*path, *key.split(".")),
                    f"{why}: its {key} cannot change from {show(before)} to {show(after)}. {advice}",
                )
            )
        raise Failed


def validation_problems(exc: ValidationError, path: Path, fields: dict) -> list[Problem]:
    if not hasattr(exc, "error_dict"):
        return [Problem(path, " ".join(exc.messages))]
    problems = []
    for name, messages in exc.message_dict.items():
        if name == NON_FIELD_ERRORS:
            suffix: tuple = ()
        elif name in fields:
            suffix = fields[name]
        else:
            suffix = (name,)
        problems.append(Problem((*path, *suffix), " ".join(messages)))
    return problems
