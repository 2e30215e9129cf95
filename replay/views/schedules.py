"""Schedules of a backend: create, edit, enable or disable, delete (after confirmation)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import cast

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_http_methods
from django.views.decorators.vary import vary_on_headers

from lib.actors import AuthenticatedHttpRequest
from lib.http import post_only
from lib.pages import apply_errors, render_form, wants_fragment
from replay import services
from replay.forms import ScheduleEditForm, ScheduleForm
from replay.models import Schedule
from replay.permissions import can_manage_backend
from replay.services.schedules import crontab_text
from replay.views._common import backend_for


@dataclass
class ScheduleRow:
    schedule: Schedule
    crontab: str
    timezone: str
    enabled: bool
    next_run: dt.datetime | None
    last_run: dt.datetime | None


def next_run(schedule: Schedule, now: dt.datetime) -> dt.datetime | None:
    """When beat will fire it next, from its crontab and last run; None when disabled."""
    task = schedule.periodic_task
    if not task.enabled or task.crontab is None:
        return None
    remaining = task.crontab.schedule.remaining_estimate(task.last_run_at or now)
    due = now + max(remaining, dt.timedelta(0))
    # Crontabs fire on whole minutes; celery's estimate is off by its own clock reading.
    return (due + dt.timedelta(seconds=30)).replace(second=0, microsecond=0)


def schedule_rows(schedules: list[Schedule], *, now: dt.datetime) -> list[ScheduleRow]:
    """What the schedule table shows; `periodic_task__crontab` must be selected."""
    return [
        ScheduleRow(
            schedule=schedule,
            crontab=crontab_text(schedule),
            timezone=str(schedule.periodic_task.crontab.timezone)
            if schedule.periodic_task.crontab
            else "",
            enabled=schedule.periodic_task.enabled,
            next_run=next_run(schedule, now),
            last_run=schedule.periodic_task.last_run_at,
        )
        for schedule in schedules
    ]


def _schedule_for_edit(request: AuthenticatedHttpRequest, pk: int) -> Schedule:
    schedule = get_object_or_404(
        Schedule.objects.select_related(
            "backend__revision__service__team", "periodic_task__crontab"
        ),
        pk=pk,
    )
    if not can_manage_backend(request.user, schedule.backend.revision):
        team = schedule.backend.revision.service.team
        raise PermissionDenied(
            _("Only model owners of team %(team)s can change schedules.")
            % {"team": repr(team.slug)}
        )
    return schedule


def _back_to_backend(schedule_or_name) -> str:
    name = getattr(getattr(schedule_or_name, "backend", None), "name", schedule_or_name)
    return f"{reverse('replay:backend_detail', args=[name])}#schedules-heading"


@login_required
@require_http_methods(["GET", "POST"])
def schedule_create(request: AuthenticatedHttpRequest, name: str) -> HttpResponse:
    backend = backend_for(request, name, write=True)
    form = ScheduleForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        try:
            services.create_schedule(actor=request.user, backend=backend, **form.cleaned_data)
        except ValidationError as error:
            apply_errors(form, error)
        else:
            messages.success(
                request,
                _("Scheduled %(sample_set)s on %(backend)s at %(crontab)s.")
                % {
                    "sample_set": form.cleaned_data["sample_set_name"],
                    "backend": backend.name,
                    "crontab": form.cleaned_data["crontab"],
                },
            )
            return redirect(_back_to_backend(backend.name))
    return render_form(
        request,
        form,
        title=_("Schedule a replay on %(backend)s") % {"backend": backend.name},
        intro=_("Beat replays the set on this backend whenever the crontab fires.")
        if cast(forms.ChoiceField, form.fields["sample_set_name"]).choices
        else _("No sample set exists yet: import one under Sample sets first."),
        submit=_("Create schedule"),
        cancel_url=_back_to_backend(backend.name),
    )


@login_required
@require_http_methods(["GET", "POST"])
def schedule_edit(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    schedule = _schedule_for_edit(request, pk)
    initial = {"crontab": crontab_text(schedule), "enabled": schedule.periodic_task.enabled}
    form = ScheduleEditForm(request.POST if request.method == "POST" else None, initial=initial)
    if request.method == "POST" and form.is_valid():
        try:
            changed = services.update_schedule(
                schedule,
                actor=request.user,
                crontab=form.cleaned_data["crontab"],
                enabled=form.cleaned_data["enabled"],
            )
        except ValidationError as error:
            apply_errors(form, error)
        else:
            messages.success(request, _("Schedule saved.") if changed else _("Nothing changed."))
            return redirect(_back_to_backend(schedule))
    return render_form(
        request,
        form,
        title=_("Edit schedule: %(sample_set)s on %(backend)s")
        % {"sample_set": schedule.sample_set_name, "backend": schedule.backend.name},
        submit=_("Save schedule"),
        cancel_url=_back_to_backend(schedule),
    )


@post_only(
    gettext_lazy(
        "enables or disables a replay schedule (the Enable / Disable button on its backend's page)"
    )
)
@login_required
@vary_on_headers("HX-Request")
def schedule_toggle(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    """Enable or disable; htmx swaps the schedule's row, a plain form goes back to the page."""
    schedule = _schedule_for_edit(request, pk)
    enable = not schedule.periodic_task.enabled
    try:
        services.update_schedule(schedule, actor=request.user, enabled=enable)
    except ValidationError as error:
        messages.error(
            request, _("Schedule unchanged: %(reasons)s") % {"reasons": "; ".join(error.messages)}
        )
        return redirect(_back_to_backend(schedule))
    if wants_fragment(request):
        schedule = _schedule_for_edit(request, pk)
        context = {
            "row": schedule_rows([schedule], now=timezone.now())[0],
            "backend": schedule.backend,
            "can_run": True,
        }
        return render(request, "replay/backend_detail.html#schedule-row", context)
    names = {"sample_set": schedule.sample_set_name, "backend": schedule.backend.name}
    if enable:
        messages.success(request, _("Enabled %(sample_set)s on %(backend)s.") % names)
    else:
        messages.success(request, _("Disabled %(sample_set)s on %(backend)s.") % names)
    return redirect(_back_to_backend(schedule))


@login_required
@require_http_methods(["GET", "POST"])
def schedule_delete(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    """GET asks for confirmation and says what will happen; POST deletes."""
    schedule = _schedule_for_edit(request, pk)
    if request.method == "POST":
        backend_name = schedule.backend.name
        names = {"sample_set": schedule.sample_set_name, "backend": backend_name}
        services.delete_schedule(schedule, actor=request.user)
        messages.success(
            request,
            _("Deleted the schedule of %(sample_set)s on %(backend)s. Its past runs stay.") % names,
        )
        return redirect(_back_to_backend(backend_name))
    row = schedule_rows([schedule], now=timezone.now())[0]
    return render(request, "replay/schedule_delete.html", {"row": row, "schedule": schedule})
