from django.apps import AppConfig
from django.db.models.signals import post_migrate


def grant_default_permissions(sender, using="default", **kwargs) -> None:
    """The operational permissions go to their default roles after every migrate (and
    test flush); an administrator may grant them to anyone else."""
    from django.contrib.auth.models import Group, Permission

    from releases.permissions import DEFAULT_GRANTS

    for name, roles in DEFAULT_GRANTS.items():
        app_label, codename = name.split(".")
        permission = (
            Permission.objects.using(using)
            .filter(content_type__app_label=app_label, codename=codename)
            .first()
        )
        if permission is None:  # its model's table is not migrated yet
            continue
        for role in roles:
            group, _ = Group.objects.using(using).get_or_create(name=role.value)
            group.permissions.add(permission)


class ReleasesConfig(AppConfig):
    name = "releases"
    verbose_name = "Releases and rollbacks"

    def ready(self) -> None:
        from ledger import event_actions, locks, queries
        from ledger.chain import events_appended
        from releases import checks  # noqa: F401 - registers the deployment checks
        from releases.event_actions import ACTION_LABELS
        from releases.gateway.services.config_record import queue_config_record
        from releases.governance.queries.rollout_shares import rollout_shares
        from releases.locks import referenced_by_release_past_draft

        locks.register(referenced_by_release_past_draft)
        event_actions.register(ACTION_LABELS)
        queries.register_share_reader(rollout_shares)
        # After a change of routing, the gateway's config is recorded (and announced).
        events_appended.connect(queue_config_record, dispatch_uid="gateway_config_record")
        # A day of run evidence, or a price sheet, recorded: its days' cost is stored.
        from releases.cost.services import record_cost_of_events

        events_appended.connect(record_cost_of_events, dispatch_uid="cost_record")
        from lib import metrics
        from releases.reviews.queries.reviews import review_work_counts

        metrics.register_gauges("review", review_work_counts)
        post_migrate.connect(grant_default_permissions, sender=self)
