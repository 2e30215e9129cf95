"""Queue a Celery task by its name once the transaction commits.

A verb that queues work must not import the tasks module, which imports the verbs
back. Task names are a public API (`@shared_task(name=...)`, beat entries), so the
verb names the task instead; `tests/foundation/test_task_names.py` holds every name
sent this way to a registered task.
"""

from __future__ import annotations

import functools
from typing import Any

from celery import current_app
from django.db import transaction


def send_on_commit(name: str, *args: Any, **kwargs: Any) -> None:
    """What `task.delay_on_commit(*args, **kwargs)` does, by name: nothing is sent if
    the transaction rolls back."""
    transaction.on_commit(functools.partial(current_app.send_task, name, args=args, kwargs=kwargs))
