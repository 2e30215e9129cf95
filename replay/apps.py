from django.apps import AppConfig


class ReplayConfig(AppConfig):
    name = "replay"
    verbose_name = "Replay and regression detection"

    def ready(self) -> None:
        from ledger import event_actions
        from lib import metrics
        from replay.event_actions import ACTION_LABELS
        from replay.queries import run_work_counts

        event_actions.register(ACTION_LABELS)

        metrics.register_gauges("replay_run", run_work_counts)
