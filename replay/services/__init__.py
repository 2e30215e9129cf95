"""The replay domain layer: every change to backends, sample sets, runs, probes and schedules.

Split by feature; import the verbs from this package (`from replay import services`).
Each verb checks who may do it (`replay.permissions`), writes its rows and appends the ledger Event in one
transaction, and enqueues work with `delay_on_commit`. `actor=None` is the system
(tasks, commands, `manage.py apply`).
"""

from replay.services.backends import (
    CredentialMissing,
    backend_config,
    create_backend,
    update_backend,
)
from replay.services.metrics import SCRAPED_ENGINES, ScrapeOutcome, scrape_backend
from replay.services.probing import probe_backend
from replay.services.runs import (
    compare_runs,
    execute_run,
    reap_stale_runs,
    start_run,
)
from replay.services.sample_sets import (
    export_sample_set,
    get_sample_set,
    import_sample_set,
)
from replay.services.schedules import (
    create_schedule,
    delete_schedule,
    fire_schedule,
    parse_crontab,
    update_schedule,
)

__all__ = [
    "SCRAPED_ENGINES",
    "CredentialMissing",
    "ScrapeOutcome",
    "backend_config",
    "compare_runs",
    "create_backend",
    "create_schedule",
    "delete_schedule",
    "execute_run",
    "export_sample_set",
    "fire_schedule",
    "get_sample_set",
    "import_sample_set",
    "parse_crontab",
    "probe_backend",
    "reap_stale_runs",
    "scrape_backend",
    "start_run",
    "update_backend",
    "update_schedule",
]
