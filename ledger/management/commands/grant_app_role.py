"""Give the application's database role what it needs and nothing more.

Privilege separation (docs in the README, used by docker-compose.yml): the
migrations run as the owner of the tables (DATABASE_MIGRATE_URL), and the web,
workers and beat connect as a role that owns nothing. That role may read and
write the application's tables, but on the event table only SELECT and INSERT:
no UPDATE, DELETE or TRUNCATE, and, not being a superuser or the table's
owner, it can neither set `session_replication_role` nor disable the triggers.
Run it as the owner after every `migrate` (new tables need their grants).
PostgreSQL only.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError
from django.db import connections, transaction

from ledger.models import Event


def grant_statements(role: str, *, using: str = "default") -> list[str]:
    ops = connections[using].ops
    quoted = ops.quote_name(role)
    events = ops.quote_name(Event._meta.db_table)
    return [
        f"GRANT USAGE ON SCHEMA public TO {quoted}",
        f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {quoted}",
        f"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {quoted}",
        f"REVOKE ALL ON {events} FROM PUBLIC",
        f"REVOKE ALL ON {events} FROM {quoted}",
        f"GRANT SELECT, INSERT ON {events} TO {quoted}",
    ]


class Command(BaseCommand):
    help = (
        "Grant the app's database role read/write on every table, but only SELECT and "
        "INSERT on the event table. Run as the tables' owner after migrate."
    )

    def add_arguments(self, parser):
        parser.add_argument("role", help="The role the web, workers and beat connect as.")
        parser.add_argument(
            "--database",
            default="default",
            help='The connection to grant through: the owner\'s ("owner" when '
            "DATABASE_MIGRATE_URL is set).",
        )
        parser.add_argument("--dry-run", action="store_true", help="Print the SQL only.")

    def handle(self, *args, role: str, database: str, dry_run: bool, **options):
        connection = connections[database]
        if connection.vendor != "postgresql":
            raise CommandError("grant_app_role is for PostgreSQL; SQLite has no roles.")
        statements = grant_statements(role, using=database)
        if dry_run:
            for statement in statements:
                self.stdout.write(f"{statement};")
            return
        with connection.cursor() as cursor:
            cursor.execute("SELECT rolsuper FROM pg_roles WHERE rolname = %s", [role])
            row = cursor.fetchone()
            if row is None:
                raise CommandError(
                    f"There is no role {role!r}: create it first (CREATE ROLE … LOGIN PASSWORD …)."
                )
            if row[0]:
                raise CommandError(
                    f"{role!r} is a superuser, which no grant can restrain: give the app a role "
                    "that is not."
                )
        with transaction.atomic(using=database), connection.cursor() as cursor:
            for statement in statements:
                cursor.execute(statement)
        self.stdout.write(
            self.style.SUCCESS(
                f"{role}: read and write on every table; SELECT and INSERT only on {Event._meta.db_table}"
            )
        )
