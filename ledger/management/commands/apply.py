"""Make the registry say what a YAML document says.

Teams keep their services, model assets, runtimes and revisions in git the way
they keep Backstage catalog files, and apply them here. Every change goes
through the domain verbs, so each appends its Event; the document is applied
in one transaction or not at all, and applying it twice changes nothing. The
format is described in docs/registry-format.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from ledger.declarative import ApplyResult, DocumentError, apply_document, parse_yaml
from ledger.declarative.document import format_path
from ledger.declarative.run import show
from lib.actors import Actor


class Command(BaseCommand):
    help = (
        "Create or update teams, licenses, model assets, runtimes, services, their gateway "
        "policy versions, revisions and capabilities from a YAML registry document; all or "
        "nothing, idempotent."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", help="The YAML registry document, or - for standard input.")
        parser.add_argument(
            "--dry-run",
            action="store_true",
            help="Print what would change (with every refusal the domain would make) and write nothing.",
        )
        parser.add_argument(
            "--actor",
            metavar="USERNAME",
            help="Record the changes as made by this user, whose permissions then apply "
            "(default: the system).",
        )

    def handle(self, *args, **options):
        source = options["file"]
        if source == "-":
            text, name = sys.stdin.read(), "<stdin>"
        else:
            try:
                text, name = Path(source).read_text(encoding="utf-8"), source
            except OSError as exc:
                raise CommandError(f"cannot read {source}: {exc.strerror or exc}") from exc
            except UnicodeDecodeError as exc:
                raise CommandError(f"{source} is not UTF-8 text: {exc}") from exc
        actor = self._actor(options["actor"])
        dry_run = options["dry_run"]
        try:
            document = parse_yaml(text, source=name)
            result = apply_document(
                document, actor=actor, dry_run=dry_run, reason=f"manage.py apply {name}"
            )
        except DocumentError as exc:
            for line in exc.messages():
                self.stderr.write(line)
            count = len(exc.problems)
            raise CommandError(
                f"{count} problem{'s' if count != 1 else ''} in {name}; nothing was written."
            ) from exc
        self._report(result, name)

    def _actor(self, username: str | None) -> Actor:
        if not username:
            return None
        User = get_user_model()
        try:
            return User.objects.get(**{User.USERNAME_FIELD: username})
        except User.DoesNotExist as exc:
            raise CommandError(f"--actor: no user named {username!r}") from exc

    def _report(self, result: ApplyResult, name: str) -> None:
        for change in result.changes:
            where = format_path(change.path)
            if change.op == "create":
                # A capability is created with one value: say it on the same line.
                value = f": {show(change.fields[0][2])}" if change.noun == "capability" else ""
                line = self.style.SUCCESS(f"+ create {change.noun} {change.label}{value}")
                self.stdout.write(f"{line}  ({where})")
                if change.noun == "capability":
                    continue
            else:
                line = self.style.WARNING(f"~ update {change.noun} {change.label}")
                self.stdout.write(f"{line}  ({where})")
            for key, before, after in change.fields:
                if change.op == "create":
                    self.stdout.write(f"    {key}: {show(after)}")
                else:
                    self.stdout.write(f"    {key}: {show(before)} → {show(after)}")
        for warning in result.warnings:
            self.stdout.write(self.style.NOTICE(f"warning: {warning.render(name)}"))
        if not result.changes:
            self.stdout.write(
                self.style.SUCCESS(
                    f"No changes: the registry already says what {name} says "
                    f"({result.unchanged} objects unchanged)."
                )
            )
            return
        counts = (
            f"{result.created} to create, {result.updated} to update, {result.unchanged} unchanged"
        )
        if result.dry_run:
            self.stdout.write(
                self.style.MIGRATE_HEADING(
                    f"Dry run of {name}: {counts}; would append {result.events} events. "
                    "Nothing was written."
                )
            )
        else:
            self.stdout.write(
                self.style.SUCCESS(
                    f"Applied {name}: {result.created} created, {result.updated} updated, "
                    f"{result.unchanged} unchanged; {result.events} events appended."
                )
            )
