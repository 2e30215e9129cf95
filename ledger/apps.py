from django.apps import AppConfig
from django.contrib.auth.signals import user_logged_in
from django.db.models.signals import post_migrate


def create_role_groups(sender, using="default", **kwargs) -> None:
    """One group per role, recreated after every migrate (and every test flush)."""
    from django.contrib.auth.models import Group

    from ledger.roles import Role

    for role in Role:
        Group.objects.using(using).get_or_create(name=role.value)


class LedgerConfig(AppConfig):
    name = "ledger"
    verbose_name = "Ledger: registry and events"

    def ready(self) -> None:
        from ledger import checks, locks  # noqa: F401 - checks registers itself
        from ledger.queries.staleness import live_evidence_counts
        from ledger.services.preferences import load_into_session
        from lib import metrics

        post_migrate.connect(create_role_groups, sender=self)
        user_logged_in.connect(load_into_session, dispatch_uid="ledger.preferences")
        locks.register(locks.has_served)
        metrics.register_gauges("live_revision_evidence", live_evidence_counts)
