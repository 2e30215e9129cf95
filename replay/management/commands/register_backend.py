"""Register (or change) one replay backend from the command line.

A pipeline that deploys one endpoint should not have to write a whole registry
document to replay against it. This is `services.create_backend` (or, with
`--update`, `services.update_backend`): the same checks as the pages and the API
(the destination allow-list of replay.outbound, the credential namespace, the
revision's owners), and the same `replay.backend_created` / `replay.backend_updated`
event.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from ledger.engines import Engine
from ledger.models import Revision, Service
from lib.actors import Actor
from lib.env import env_str
from replay import services
from replay.management.commands._common import messages
from replay.models import Backend

# Model field -> the option that sets it, so that an error names what to change.
_OPTIONS = {
    "name": "NAME",
    "revision": "--revision",
    "base_url": "--base-url",
    "model_name": "--model",
    "engine": "--engine",
    "credential_env": "--credential-env",
    "concurrency_limit": "--concurrency-limit",
    "connect_timeout_s": "--connect-timeout",
    "first_token_timeout_s": "--first-token-timeout",
    "idle_timeout_s": "--idle-timeout",
    "total_timeout_s": "--total-timeout",
    "enabled": "--disabled",
}


class _DryRun(Exception):
    """Rolls the transaction of a dry run back."""


class Command(BaseCommand):
    help = (
        "Register a replay backend: an OpenAI-compatible endpoint serving a revision of a "
        "service. --update changes an existing one (only the options given)."
    )

    def add_arguments(self, parser):
        parser.add_argument("name", help="The backend's name (a slug), e.g. kb-assistant-vllm.")
        parser.add_argument("--service", metavar="SLUG", help="The service it serves.")
        parser.add_argument(
            "--revision",
            type=int,
            metavar="N",
            help="The service's revision number it serves (default: the live revision).",
        )
        parser.add_argument(
            "--base-url", metavar="URL", help="Root of the API, e.g. http://10.0.0.5:8000."
        )
        parser.add_argument(
            "--model", metavar="NAME", help="The `model` the server expects in requests."
        )
        parser.add_argument(
            "--engine",
            choices=Engine.values,
            help="The serving engine (default: the revision's runtime engine; "
            "openai-compatible or other for any other OpenAI-compatible server).",
        )
        parser.add_argument(
            "--credential-env",
            metavar="VARIABLE",
            help="Name of the environment variable holding the API key on the workers "
            "(LEDGER_BACKEND_KEY_…); the key itself is never given here. '' clears it.",
        )
        parser.add_argument("--concurrency-limit", type=int, metavar="N")
        parser.add_argument("--connect-timeout", type=float, metavar="SECONDS")
        parser.add_argument("--first-token-timeout", type=float, metavar="SECONDS")
        parser.add_argument("--idle-timeout", type=float, metavar="SECONDS")
        parser.add_argument("--total-timeout", type=float, metavar="SECONDS")
        state = parser.add_mutually_exclusive_group()
        state.add_argument("--disabled", action="store_true", help="Register it disabled.")
        state.add_argument("--enabled", action="store_true", help="With --update: enable it.")
        parser.add_argument(
            "--update", action="store_true", help="Change the backend of that name if it exists."
        )
        parser.add_argument(
            "--actor",
            metavar="USERNAME",
            help="Record the change as made by this user, whose permissions then apply "
            "(default: the system).",
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="Check everything and write nothing."
        )

    def handle(self, *args, **options):
        actor = self._actor(options["actor"])
        existing = Backend.objects.select_related("revision__service").filter(name=options["name"])
        backend = existing.first()
        if backend is not None and not options["update"]:
            raise CommandError(
                f"NAME: a backend named {options['name']!r} already exists (serving "
                f"{backend.revision}); pass --update to change it."
            )
        if backend is None and options["update"]:
            raise CommandError(f"NAME: no backend named {options['name']!r} to update.")
        fields = self._fields(options, backend)
        created = backend is None
        try:
            with transaction.atomic():
                if backend is None:
                    backend = services.create_backend(actor=actor, **fields)
                    changed = True
                else:
                    changed = services.update_backend(backend, actor=actor, **fields)
                    backend.refresh_from_db()
                if options["dry_run"]:
                    raise _DryRun
        except _DryRun:
            assert backend is not None
            self.stdout.write(f"Dry run: {self._describe(backend)}. Nothing was written.")
            return
        except ValidationError as error:
            raise CommandError("; ".join(self._messages(error))) from error
        except PermissionDenied as error:
            raise CommandError(f"--actor: {error}") from error
        if not changed:
            self.stdout.write(f"No changes: {self._describe(backend)}.")
            return
        verb = "Registered" if created else "Updated"
        self.stdout.write(self.style.SUCCESS(f"{verb} {self._describe(backend)}."))
        if backend.credential_env and not env_str(backend.credential_env):
            self.stderr.write(
                self.style.WARNING(
                    f"warning: {backend.credential_env} is not set here; replays need it (or "
                    f"{backend.credential_env}_FILE) set wherever they run."
                )
            )

    def _fields(self, options: dict[str, Any], backend: Backend | None) -> dict[str, Any]:
        fields: dict[str, Any] = {}
        if backend is None:
            fields["name"] = options["name"]
            missing = [
                flag
                for flag, key in (
                    ("--service", "service"),
                    ("--base-url", "base_url"),
                    ("--model", "model"),
                )
                if options[key] is None
            ]
            if missing:
                raise CommandError(f"{', '.join(missing)}: required to register a new backend.")
        if options["service"] is not None or options["revision"] is not None:
            fields["revision"] = self._revision(options, backend)
        simple = {
            "base_url": "base_url",
            "model_name": "model",
            "credential_env": "credential_env",
            "concurrency_limit": "concurrency_limit",
            "connect_timeout_s": "connect_timeout",
            "first_token_timeout_s": "first_token_timeout",
            "idle_timeout_s": "idle_timeout",
            "total_timeout_s": "total_timeout",
        }
        for field, option in simple.items():
            if options[option] is not None:
                fields[field] = options[option]
        engine = options["engine"]
        if engine is None and backend is None:
            engine = fields["revision"].runtime.engine
        if engine is not None:
            fields["engine"] = engine
        if options["disabled"]:
            fields["enabled"] = False
        elif options["enabled"]:
            fields["enabled"] = True
        return fields

    def _revision(self, options: dict[str, Any], backend: Backend | None) -> Revision:
        slug = options["service"]
        if slug is None:
            assert backend is not None  # a new backend's --service is required above
            service = backend.revision.service
        else:
            found = Service.objects.filter(slug=slug).first()
            if found is None:
                raise CommandError(f"--service: no service {slug!r}.")
            service = found
        number = options["revision"]
        if number is None:
            if service.live_revision_id is None:
                raise CommandError(
                    f"--revision: {service.slug} has no live revision; name the revision "
                    "number the backend serves."
                )
            return Revision.objects.select_related("runtime").get(pk=service.live_revision_id)
        revision = (
            Revision.objects.select_related("runtime")
            .filter(service=service, number=number)
            .first()
        )
        if revision is None:
            numbers = list(service.revisions.order_by("number").values_list("number", flat=True))
            known = ", ".join(f"r{n}" for n in numbers) or "none yet"
            raise CommandError(
                f"--revision: {service.slug} has no revision {number} (it has {known})."
            )
        return revision

    @staticmethod
    def _messages(error: ValidationError) -> list[str]:
        lines = []
        for line in messages(error):
            field, sep, text = line.partition(": ")
            option = _OPTIONS.get(field)
            lines.append(f"{option}: {text}" if sep and option else line)
        return lines

    @staticmethod
    def _describe(backend: Backend) -> str:
        key = f", credential {backend.credential_env}" if backend.credential_env else ""
        state = "" if backend.enabled else " (disabled)"
        return (
            f"backend {backend.name}{state} → {backend.base_url} model {backend.model_name} "
            f"({backend.get_engine_display()}), serving {backend.revision}, "
            f"concurrency {backend.concurrency_limit}{key}"
        )

    def _actor(self, username: str | None) -> Actor:
        if not username:
            return None
        User = get_user_model()
        try:
            return User.objects.get(**{User.USERNAME_FIELD: username})
        except User.DoesNotExist as exc:
            raise CommandError(f"--actor: no user named {username!r}") from exc
