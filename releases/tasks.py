"""Celery finds an app's tasks in `<app>.tasks`; the releases app keeps them in its
rooms, and importing them here registers them with the worker."""

from releases.analysis import tasks as analysis_tasks
from releases.audit import tasks as audit_tasks
from releases.cost import tasks as cost_tasks
from releases.gateway import tasks as gateway_tasks
from releases.governance import tasks as governance_tasks
from releases.reviews import tasks as reviews_tasks

__all__ = [
    "analysis_tasks",
    "audit_tasks",
    "cost_tasks",
    "gateway_tasks",
    "governance_tasks",
    "reviews_tasks",
]
