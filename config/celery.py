"""The Celery application (the documented Django recipe), with the ledger's logs and metrics.

- Logging: the worker keeps Django's LOGGING (JSON lines, or LOG_FORMAT=console)
  instead of installing its own handlers: a receiver of `setup_logging` tells
  Celery not to configure logging.
- The request id of the request that enqueued a task travels in its headers and
  is set for the task's log lines (lib/logs.py).
- Task counts, failures and durations per task (lib/metrics.py); a worker with
  WORKER_METRICS_PORT set serves them there once it is ready.
"""

import logging.config
import os

from celery import Celery, signals

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("ledger")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@signals.setup_logging.connect
def _use_django_logging(**kwargs) -> None:
    from django.conf import settings

    logging.config.dictConfig(settings.LOGGING)


@signals.worker_ready.connect
def _start_metrics_exporter(sender=None, **kwargs) -> None:
    from django.conf import settings

    from lib import metrics

    if not settings.WORKER_METRICS_PORT:
        return
    prefork = "prefork" in getattr(getattr(sender, "pool_cls", None), "__module__", "")
    if prefork and not metrics.multiprocess_dir():
        logging.getLogger(__name__).warning(
            "metrics: a prefork worker without PROMETHEUS_MULTIPROC_DIR reports only its "
            "main process; set it to an empty folder to count its children's tasks"
        )
    metrics.start_worker_exporter(
        settings.WORKER_METRICS_HOST,
        settings.WORKER_METRICS_PORT,
        settings.METRICS_TOKEN,
        loopback_without_token=settings.METRICS_LOOPBACK_WITHOUT_TOKEN,
    )


def _connect_observers() -> None:
    from lib import logs, metrics

    # weak=False: the receivers are module functions, but say it rather than rely on it.
    signals.before_task_publish.connect(logs.on_before_task_publish, weak=False)
    signals.task_prerun.connect(logs.on_task_prerun, weak=False)
    signals.task_postrun.connect(logs.on_task_postrun, weak=False)
    signals.task_prerun.connect(metrics.on_task_prerun, weak=False)
    signals.task_postrun.connect(metrics.on_task_postrun, weak=False)
    signals.task_failure.connect(metrics.on_task_failure, weak=False)


_connect_observers()
