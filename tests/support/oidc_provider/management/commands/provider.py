"""Make the test provider's people, groups and clients (the sign-in tests' set-up).

provider user NAME --password P [--email E] [--groups a,b]    create or update; groups exactly
provider client ID --secret S --redirect-uri U [--redirect-uri U2] [--post-logout-uri U]
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Group, User
from django.core.management.base import BaseCommand, CommandParser
from oauth2_provider.models import get_application_model


class Command(BaseCommand):
    help = "Create or update the test provider's users and OIDC clients."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="what", required=True)
        user = sub.add_parser("user")
        user.add_argument("username")
        user.add_argument("--password", required=True)
        user.add_argument("--email", default="")
        user.add_argument("--groups", default="")
        user.add_argument("--inactive", action="store_true")
        client = sub.add_parser("client")
        client.add_argument("client_id")
        client.add_argument("--secret", required=True)
        client.add_argument("--redirect-uri", action="append", required=True)
        client.add_argument("--post-logout-uri", action="append", default=[])

    def handle(self, *args: Any, **options: Any) -> None:
        if options["what"] == "user":
            user, _ = User.objects.get_or_create(username=options["username"])
            user.set_password(options["password"])
            user.email = options["email"]
            user.is_active = not options["inactive"]
            user.save()
            names = [n for n in options["groups"].split(",") if n]
            user.groups.set([Group.objects.get_or_create(name=n)[0] for n in names])
            self.stdout.write(f"user {user.username}: {names}")
            return
        application_model = get_application_model()
        application_model.objects.filter(client_id=options["client_id"]).delete()
        application_model.objects.create(
            name=options["client_id"],
            client_id=options["client_id"],
            client_secret=options["secret"],
            client_type=application_model.CLIENT_CONFIDENTIAL,
            authorization_grant_type=application_model.GRANT_AUTHORIZATION_CODE,
            redirect_uris=" ".join(options["redirect_uri"]),
            post_logout_redirect_uris=" ".join(options["post_logout_uri"]),
            algorithm=application_model.RS256_ALGORITHM,
            skip_authorization=True,
        )
        self.stdout.write(f"client {options['client_id']}")
