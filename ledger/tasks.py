from __future__ import annotations

import logging
import os
import socket

from celery import shared_task
from django.db import connection

from ledger.services import retention

logger = logging.getLogger(__name__)


@shared_task(name="probe_worker")
def probe_worker() -> dict[str, object]:
    """Report which process ran the task and which database it reaches.

    Used by operators (and the suite) to prove a worker consumes from the
    configured broker and talks to the same database as the web process.
    """
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    report = {
        "pid": os.getpid(),
        "hostname": socket.gethostname(),
        "database_vendor": connection.vendor,
        "database_name": str(connection.settings_dict["NAME"]),
    }
    logger.info("probe_worker answered from pid %s", report["pid"])
    return report


@shared_task(name="checkpoint_ledger")
def checkpoint_ledger() -> dict[str, object]:
    """Beat, every LEDGER_CHECKPOINT_EVERY_MINUTES: record the chain head outside the database.

    Idempotent in effect: two checkpoints of one head say the same thing.
    """
    from ledger.checkpoints import take_checkpoint

    checkpoint = take_checkpoint(reason="beat")
    logger.info("checkpoint of event #%s stored as %s", checkpoint.sequence, checkpoint.name)
    return {"sequence": checkpoint.sequence, "hash": checkpoint.hash, "name": checkpoint.name}


@shared_task(name="purge_expired_request_data")
def purge_expired_request_data() -> int:
    count = retention.purge_expired_request_data(actor=None)
    logger.info("dropped request-level data of %d load-test reports past retention", count)
    return count


@shared_task(name="sweep_traces")
def sweep_traces() -> dict[str, object]:
    from ledger.traces.services import sweep_traces as sweep

    result = sweep(actor=None)
    logger.info("swept model-call spans before %s: %s", result["before"], result)
    return result


@shared_task(name="summarize_traces")
def summarize_traces() -> None:
    """Yesterday's run evidence of every service, from its traces."""
    from django.core.management import call_command

    call_command("summarize_traces")
