"""Load demonstration data so that `make run` opens on a believable ledger.

Demo users of each role (password "demo"), then the demo registry of
`ledger.demo` applied through `apply_document` — so through the domain verbs,
with every event in the chain, then demo evidence, replay sets and releases in
every state (`releases.demo`), rollouts, rollbacks and reviews in every state
(`releases.demo.rollouts`, `releases.demo.reviews`), with a price sheet for each GPU
model its runtimes name (`ledger.demo.price_sheets`). `--scale N` adds N fleet
services with two dozen revisions each, for benchmarks.

Idempotent: running it again changes nothing and appends no event.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.test.utils import override_settings

from ledger.chain import head_hash
from ledger.declarative import Document, DocumentError, apply_document
from ledger.demo import demo_document, history_documents, seed_fleet
from ledger.demo.evidence import seed_evidence
from ledger.demo.price_sheets import seed_price_sheets
from ledger.demo.run_evidence import seed_fleet_run_evidence, seed_run_evidence
from ledger.models import Event, Service
from ledger.roles import Role
from ledger.services import accounts
from releases.cost.services import deferred_cost
from releases.demo import (
    DEMO_TRACE,
    seed_canary_lab,
    seed_drills,
    seed_gateway_drift,
    seed_releases,
    seed_reviews,
    seed_rollouts,
    seed_traces,
)
from replay.demo import seed_replay, unmonitor_demo_backends

DEMO_PASSWORD = "demo"  # noqa: S105 - printed on purpose: demo logins for a local run

# username, full name, role (None: superuser)
DEMO_PEOPLE: list[tuple[str, str, Role | None]] = [
    ("owner", "Olivia Owner", Role.MODEL_OWNER),
    # A second model owner of every model team: signs for the model team what owner files.
    ("owner2", "Omar Owner", Role.MODEL_OWNER),
    ("sre", "Sam Oncall", Role.PLATFORM_SRE),
    ("security", "Sofia Compliance", Role.SECURITY_COMPLIANCE),
    ("business", "Ben Business", Role.BUSINESS_OWNER),
    ("auditor", "Ada Auditor", Role.AUDITOR),
    ("admin", "Alex Admin", None),
]
# Who to call on the incident screen: the on-call SRE and the filer have a number to tap
# (fictional: the 555-01xx block is reserved for examples).
DEMO_PHONES = {"sre": "+1 202 555 0142", "owner": "+1 202 555 0117"}


class Command(BaseCommand):
    help = "Create (or refresh) the demo users of each role and the demo registry."

    def add_arguments(self, parser):
        parser.add_argument(
            "--quiet-logins", action="store_true", help="Do not print the demo logins."
        )
        parser.add_argument(
            "--scale",
            type=int,
            default=0,
            metavar="N",
            help="Also make sure N fleet services exist, each with 24 revisions, their "
            "capabilities and live-revision history (for benchmarks).",
        )

    def handle(self, *args, **options):
        if options["scale"] < 0:
            raise CommandError("--scale must be zero or more")
        # The demo people have example.com addresses: tell nobody about demo releases
        # (the emails go out on commit, hence around the transaction).
        with (
            override_settings(EMAIL_BACKEND="django.core.mail.backends.dummy.EmailBackend"),
            transaction.atomic(),
        ):
            self._users()
            self._registry()
            self._extras()
        if not options["quiet_logins"]:
            self.stdout.write(self.style.SUCCESS("Demo logins (password for each: demo):"))
            for username, _, role in DEMO_PEOPLE:
                self.stdout.write(f"  {username:<10} {role.label if role else 'administrator'}")
        if options["scale"]:
            self._fleet(options["scale"])

    def _users(self) -> None:
        User = get_user_model()
        for username, full_name, role in DEMO_PEOPLE:
            first, last = full_name.split(" ", 1)
            user, created = User.objects.get_or_create(
                username=username,
                defaults={
                    "first_name": first,
                    "last_name": last,
                    "email": f"{username}@example.com",
                },
            )
            if created:
                user.set_password(DEMO_PASSWORD)
            user.is_staff = role is None
            user.is_superuser = role is None
            user.save()
            if role is not None:
                user.groups.add(Group.objects.get(name=role.value))
            if created and username in DEMO_PHONES:
                accounts.set_phone(user, DEMO_PHONES[username], actor=None)
            verb = "created" if created else "kept"
            self.stdout.write(f"{verb} user {username}")

    def _registry(self) -> None:
        final = demo_document()
        slugs = [service["slug"] for service in final["services"]]
        # The past is replayed only into a registry that has none of the demo services yet.
        first_run = not Service.objects.filter(slug__in=slugs).exists()
        documents = [*history_documents(), final] if first_run else [final]
        created = updated = events = 0
        unchanged = 0
        for data in documents:
            try:
                result = apply_document(
                    Document(data, source="demo registry"), actor=None, reason="seed_demo"
                )
            except DocumentError as exc:
                raise CommandError(f"the demo registry does not apply:\n{exc}") from exc
            created += result.created
            updated += result.updated
            events += result.events
            unchanged = result.unchanged
        if not events:
            self.stdout.write(f"demo registry: no changes ({unchanged} objects unchanged)")
            return
        self.stdout.write(
            self.style.SUCCESS(
                f"demo registry: {created} created, {updated} updated; {events} events appended"
            )
        )

    def _extras(self) -> None:
        reports = seed_evidence()
        slugs = [service["slug"] for service in demo_document()["services"]]
        sets, backends = seed_replay(slugs)
        # Sixty days of seven services: their cost stored once per service, not per day.
        with deferred_cost():
            days = seed_run_evidence(slugs)
        self.stdout.write(
            f"demo evidence and replay: {reports} load-test reports, {sets} sample sets, "
            f"{backends} backends, {days} days of run evidence added"
        )
        # Before the releases: internal and production ones need a price (cost_record).
        prices = seed_price_sheets()
        self.stdout.write(
            f"demo price sheets: {prices} GPU models priced"
            if prices
            else "demo price sheets: kept as they are"
        )
        releases = seed_releases()
        self.stdout.write(
            f"demo releases: {releases} added" if releases else "demo releases: kept as they are"
        )
        rollouts = seed_rollouts()
        self.stdout.write(
            f"demo rollouts and rollbacks: {rollouts} added"
            if rollouts
            else "demo rollouts and rollbacks: kept as they are"
        )
        lab = seed_canary_lab()
        self.stdout.write(
            "demo canary-lab: an approved release its analysis rolls out from Prometheus"
            if lab
            else "demo canary-lab: kept as it is"
        )
        # Before the demo backends are disabled: the gateway then routes them.
        drifted = seed_gateway_drift()
        self.stdout.write(
            f"demo gateway: {drifted} service drifted" if drifted else "demo gateway: kept as it is"
        )
        reviews = seed_reviews()
        self.stdout.write(
            f"demo reviews: {reviews} raised by the sweep"
            if reviews
            else "demo reviews: kept as they are"
        )
        drills = seed_drills()
        self.stdout.write(
            f"demo drills: {drills} added (one concluded, one planned)"
            if drills
            else "demo drills: kept as they are"
        )
        traces = seed_traces()
        self.stdout.write(
            f"demo traces: a complaint's trace {DEMO_TRACE} of {traces} model calls"
            if traces
            else "demo traces: kept as they are"
        )
        if unmonitored := unmonitor_demo_backends():
            self.stdout.write(f"demo backends: {unmonitored} disabled (nothing serves them)")

    def _fleet(self, count: int) -> None:
        self.stdout.write(f"fleet: making sure {count} services exist, 24 revisions each")

        def progress(done: int, total: int, elapsed: float) -> None:
            rate = done / elapsed if elapsed else 0.0
            left = (total - done) / rate if rate else 0.0
            self.stdout.write(
                f"  fleet: {done}/{total} services ({100 * done // total}%), "
                f"{elapsed:.0f} s elapsed, about {left:.0f} s to go"
            )

        made = seed_fleet(count, progress=progress)
        self.stdout.write("fleet: 60 days of run evidence for each service that has none")
        with_days = seed_fleet_run_evidence(
            progress=lambda done, total: self.stdout.write(f"  run evidence: {done}/{total}")
        )
        self.stdout.write(f"fleet: run evidence added for {with_days} services")
        self.stdout.write(
            self.style.SUCCESS(
                f"fleet: {made} services created ({count - made} were there); "
                f"{Event.objects.count()} events in the chain, head {head_hash()[:16]}…"
            )
        )
