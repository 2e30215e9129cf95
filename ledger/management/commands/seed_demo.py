"""Load demonstration data so that `make run` opens on a believable ledger.

Idempotent: running it again updates the demo rows in place and creates
nothing twice. Later capabilities add their own demo data here.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand
from django.db import transaction

from ledger.roles import Role

DEMO_PASSWORD = "demo"  # noqa: S105 - printed on purpose: demo logins for a local run

# username, full name, role (None: superuser)
DEMO_PEOPLE: list[tuple[str, str, Role | None]] = [
    ("owner", "Olivia Owner", Role.MODEL_OWNER),
    ("sre", "Sam Oncall", Role.PLATFORM_SRE),
    ("security", "Sofia Compliance", Role.SECURITY_COMPLIANCE),
    ("business", "Ben Business", Role.BUSINESS_OWNER),
    ("auditor", "Ada Auditor", Role.AUDITOR),
    ("admin", "Alex Admin", None),
]


class Command(BaseCommand):
    help = "Create (or refresh) the demo users of each role and the demo data."

    def add_arguments(self, parser):
        parser.add_argument(
            "--quiet-logins", action="store_true", help="Do not print the demo logins."
        )

    @transaction.atomic
    def handle(self, *args, **options):
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
            verb = "created" if created else "kept"
            self.stdout.write(f"{verb} user {username}")
        if not options["quiet_logins"]:
            self.stdout.write(self.style.SUCCESS("Demo logins (password for each: demo):"))
            for username, _, role in DEMO_PEOPLE:
                self.stdout.write(f"  {username:<10} {role.label if role else 'administrator'}")
