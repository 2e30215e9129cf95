from django.apps import AppConfig


class ReplayConfig(AppConfig):
    name = "replay"
    verbose_name = "Replay and regression detection"

    def ready(self) -> None:
        from lib import metrics
        from replay.queries import run_work_counts

        metrics.register_gauges("replay_run", run_work_counts)
