"""The ORM talks to real PostgreSQL, not SQLite standing in for it."""

from django.contrib.auth import get_user_model
from django.db import connection

from ledger.roles import Role, roles_of
from tests.factories import UserFactory


def test_a_user_with_roles_round_trips_through_postgresql(db):
    created = UserFactory(username="rt", roles=[Role.AUDITOR, Role.PLATFORM_SRE])

    loaded = get_user_model().objects.get(pk=created.pk)

    assert connection.vendor == "postgresql"
    assert loaded.email == "rt@example.com"
    assert roles_of(loaded) == [Role.PLATFORM_SRE, Role.AUDITOR]
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_database()")
        assert cursor.fetchone()[0] == connection.settings_dict["NAME"]
