"""Reading drills: the list and one drill, with what their pages show."""

from __future__ import annotations

from django.db.models import QuerySet

from releases.models import Drill


def drill_queryset() -> QuerySet[Drill]:
    return Drill.objects.select_related("created_by", "concluded_by", "revision").prefetch_related(
        "services"
    )
