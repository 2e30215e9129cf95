"""Migration 0016: each policy name a service's revisions carried becomes one unknown
version of that service's policy, in the order the revisions were made; going back
gives the revisions their names again."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from ledger import services
from ledger.models import GatewayPolicy, Revision
from tests.ledger.factories import RevisionFactory, ServiceFactory

BEFORE = [("ledger", "0015_loadtestreport_model_verified")]


def migrate(targets=None):
    """To `targets`, or forward to every app's latest: going back to ledger 0015 also
    unapplies the later migrations of other apps that depend on it, and the tests after
    this one on the same database need them all."""
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets or executor.loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
def test_names_become_versions_and_back(team):
    kb = ServiceFactory(slug="kb-assistant", team=team)
    other = ServiceFactory(slug="support-faq", team=team)
    r1 = RevisionFactory(service=kb, gateway_policy_version="gw-2026.02")
    r2 = RevisionFactory(service=kb, gateway_policy_version="gw-2026.03")
    r3 = RevisionFactory(service=kb, gateway_policy_version="gw-2026.02")
    faq = RevisionFactory(service=other, gateway_policy_version="gw-2026.03")
    # A revision that served: its row is frozen, the migration must still move it.
    services.set_live_revision(kb, r2, actor=None, reason="live")

    try:
        migrate(BEFORE)
        with connection.cursor() as cursor:
            cursor.execute("SELECT id, gateway_policy_version FROM ledger_revision ORDER BY id")
            names = dict(cursor.fetchall())
        assert [names[r.pk] for r in (r1, r2, r3, faq)] == [
            "gw-2026.02",
            "gw-2026.03",
            "gw-2026.02",
            "gw-2026.03",
        ]
    finally:
        migrate()

    policies = {
        (p.service.slug, p.version): (p.label, p.document, p.known)
        for p in GatewayPolicy.objects.select_related("service")
    }
    assert policies == {
        ("kb-assistant", 1): ("gw-2026.02", None, False),
        ("kb-assistant", 2): ("gw-2026.03", None, False),
        ("support-faq", 1): ("gw-2026.03", None, False),
    }
    labels = dict(
        Revision.objects.values_list("pk", "gateway_policy__label").filter(
            pk__in=[r1.pk, r2.pk, r3.pk, faq.pk]
        )
    )
    assert [labels[r.pk] for r in (r1, r2, r3, faq)] == [
        "gw-2026.02",
        "gw-2026.03",
        "gw-2026.02",
        "gw-2026.03",
    ]
