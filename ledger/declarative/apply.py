"""Applying a registry document through the domain verbs, all or nothing.

The document is checked for shape (`schema`), then its references are
resolved against itself and the database (`resolve`); only then is anything
written, inside one transaction, each entry through its verb in
`ledger.services` (`steps`), so every change appends its Event. An error in
any entry is mapped back to the entry's document path and the whole
transaction is rolled back. A dry run does exactly the same work and rolls
back at the end, so it reports what the domain would refuse too.

Keys a document leaves out keep their stored value (a new row gets the
default). Nothing is deleted. Gateway policy versions are only ever added: one
the registry has must be written as it was recorded. Retirements are applied
last, so a document exported from a registry in which a revision was made
before its asset was retired can be applied to an empty database.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from django.db import transaction
from django.db.models import Max

from ledger.declarative import steps
from ledger.declarative.document import Document, DocumentError, Problem
from ledger.declarative.extensions import extensions
from ledger.declarative.resolve import resolve
from ledger.declarative.run import Change, Run
from ledger.declarative.schema import declared_label, validate
from ledger.models import Event
from lib.actors import Actor


@dataclass
class ApplyResult:
    changes: list[Change]
    unchanged: int
    events: int
    warnings: list[Problem]
    dry_run: bool

    @property
    def created(self) -> int:
        return sum(1 for change in self.changes if change.op == "create")

    @property
    def updated(self) -> int:
        return sum(1 for change in self.changes if change.op == "update")


def apply_document(
    document: Document,
    *,
    actor: Actor = None,
    dry_run: bool = False,
    reason: str = "registry document",
) -> ApplyResult:
    """Make the registry say what the document says; raise DocumentError and write nothing if any entry is refused."""
    valid = validate(document)
    run = Run(valid, actor, reason)
    with transaction.atomic():
        head_before = _head_sequence()
        resolve(run)
        if not run.problems:
            _run_steps(run)
        events = _head_sequence() - head_before
        if run.problems or dry_run:
            transaction.set_rollback(True)
    if run.problems:
        raise DocumentError([document.locate(problem) for problem in run.problems], document.source)
    return ApplyResult(
        changes=[change for change in run.outcomes.values() if change is not None],
        unchanged=sum(1 for change in run.outcomes.values() if change is None),
        events=events,
        warnings=[document.locate(warning) for warning in run.warnings],
        dry_run=dry_run,
    )


def _head_sequence() -> int:
    return Event.objects.aggregate(top=Max("sequence"))["top"] or 0


def _run_steps(run: Run) -> None:
    """Each kind in dependency order, then other apps' sections; retirements last."""
    doc = run.doc
    for entry in doc.teams:
        run.each(entry, "team", lambda e: steps.apply_team(run, e))
    for entry in doc.licenses:
        run.each(entry, "license", lambda e: steps.apply_license(run, e))
    for entry in steps.assets_in_lineage_order(run):
        run.each(entry, "model asset", lambda e: steps.apply_asset(run, e))
    for entry in doc.runtimes:
        run.each(entry, "runtime", lambda e: steps.apply_runtime(run, e))
    for entry in doc.services:
        run.each(entry, "service", lambda e: steps.apply_service(run, e))
    # Every service before any policy (a fallback names another service), every policy
    # before any revision (a revision names a version the document declares).
    for entry in doc.services:
        if ("service", entry.identity) in run.failed:
            continue
        for policy in sorted(
            entry.children.get("gateway_policies", []), key=lambda e: e["version"]
        ):
            run.each(
                policy,
                "gateway policy",
                partial(steps.apply_gateway_policy, run, entry),
                identity=(entry["slug"], declared_label(policy)),
            )
    for entry in doc.services:
        if ("service", entry.identity) in run.failed:
            continue
        for revision in sorted(entry.children.get("revisions", []), key=lambda e: e["number"]):
            run.each(
                revision,
                "revision",
                partial(steps.apply_revision, run, entry),
                identity=(entry["slug"], revision["number"]),
            )
    for entry in doc.services:
        if entry.has("live_revision") and ("service", entry.identity) not in run.failed:
            run.each(entry, "live revision", lambda e: steps.apply_live_revision(run, e))
    for extension in extensions():
        if extension.key in doc.extensions:
            extension.apply(run, doc.extensions[extension.key])
    for entry, asset, changes in run.late_retirements:
        run.each(entry, "retirement", partial(steps.retire, run, asset=asset, changes=changes))
