"""Django admin for replay: a window onto backends, sample sets, runs and results.

Every change goes through `replay.services`, which validates it and records it as an
Event. Schedules are the one thing edited here, and only through their verbs
(create_schedule, update_schedule, delete_schedule), which also keep
django-celery-beat's periodic task in step. Everything else is view-only; the
django-celery-beat admin stays registered for looking at beat itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict, cast

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.db.models import Count
from django.http import HttpRequest
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from ledger.admin import LedgerAdmin, ReadOnlyAdmin
from lib.actors import admin_actor
from replay import services
from replay.forms import CRONTAB_HELP
from replay.models import Backend, Probe, Result, Run, Sample, SampleSet, Schedule
from replay.views.schedules import crontab_text, next_run

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations

READ_ONLY_NOTICE = _(
    "Read-only in the admin. Replay changes go through the app (the replay pages, the REST "
    "API or `manage.py apply`), which validate them and record each one as an event in the "
    "hash-chained ledger."
)


class ReplayReadOnlyAdmin(ReadOnlyAdmin):
    # Lazy: the admin renders it in the reader's language.
    notice = cast(str, READ_ONLY_NOTICE)


@admin.register(Backend)
class BackendAdmin(ReplayReadOnlyAdmin):
    list_display = [
        "name",
        "revision",
        "engine",
        "model_name",
        "base_url",
        "credential_env",
        "concurrency_limit",
        "enabled",
    ]
    list_filter = ["engine", "enabled", "revision__service"]
    search_fields = ["name", "model_name", "base_url", "revision__service__slug"]
    list_select_related = ["revision__service"]


@admin.register(Probe)
class ProbeAdmin(ReplayReadOnlyAdmin):
    list_display = [
        "backend",
        "started_at",
        "reachable",
        "engine_version",
        "max_context",
        "drift_count",
    ]
    list_filter = ["reachable", "backend__engine", "backend"]
    search_fields = ["backend__name", "engine_version", "fingerprint"]
    list_select_related = ["backend"]
    date_hierarchy = "started_at"

    @admin.display(description=_("drift flags"))
    def drift_count(self, probe: Probe) -> int:
        return len(probe.drift or [])


class SampleSetAnnotations(TypedDict):
    """Set by `SampleSetAdmin.get_queryset`."""

    sample_total: int


@admin.register(SampleSet)
class SampleSetAdmin(ReplayReadOnlyAdmin):
    list_display = ["name", "version", "sample_count", "created_by", "created_at"]
    list_filter = ["created_at"]
    search_fields = ["name", "description"]
    list_select_related = ["created_by"]

    def get_queryset(self, request: HttpRequest):
        return super().get_queryset(request).annotate(sample_total=Count("samples"))

    @admin.display(description=_("samples"), ordering="sample_total")
    def sample_count(self, sample_set: WithAnnotations[SampleSet, SampleSetAnnotations]) -> int:
        return sample_set.sample_total


@admin.register(Sample)
class SampleAdmin(ReplayReadOnlyAdmin):
    list_display = [
        "key",
        "sample_set",
        "category",
        "repeat",
        "min_pass_rate",
        "rerunnable",
        "sensitive",
    ]
    list_filter = ["category", "rerunnable", "sensitive"]
    search_fields = ["key", "sample_set__name"]
    list_select_related = ["sample_set"]


@admin.register(Run)
class RunAdmin(ReplayReadOnlyAdmin):
    list_display = [
        "id",
        "sample_set",
        "backend",
        "revision",
        "trigger",
        "state",
        "verdict",
        "created_at",
        "finished_at",
    ]
    list_filter = ["state", "verdict", "trigger", "backend__engine"]
    search_fields = ["backend__name", "sample_set__name", "revision__service__slug", "fingerprint"]
    list_select_related = ["sample_set", "backend", "revision__service"]
    date_hierarchy = "created_at"


@admin.register(Result)
class ResultAdmin(ReplayReadOnlyAdmin):
    list_display = [
        "id",
        "run",
        "sample",
        "attempt",
        "outcome",
        "mode",
        "error_code",
        "ttft_ms",
        "tpot_ms",
        "redacted",
    ]
    list_filter = ["outcome", "mode", "error_code", "sample__category", "redacted"]
    search_fields = ["sample__key", "error_code", "run__backend__name"]
    list_select_related = ["run__sample_set", "run__backend", "sample"]


# ---------------------------------------------------------------- written through verbs


class ScheduleAdminForm(forms.ModelForm):
    crontab = forms.CharField(label=_("When (crontab)"), max_length=200, help_text=CRONTAB_HELP)
    enabled = forms.BooleanField(
        required=False,
        initial=True,
        label=_("Enabled"),
        help_text=_("A disabled schedule does not fire."),
    )

    class Meta:
        model = Schedule
        fields = ["backend", "sample_set_name", "purpose"]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.initial["crontab"] = crontab_text(self.instance)
            self.initial["enabled"] = self.instance.periodic_task.enabled
        if "sample_set_name" in self.fields:
            names = SampleSet.objects.order_by("name").values_list("name", flat=True).distinct()
            self.fields["sample_set_name"] = forms.ChoiceField(
                label=_("Sample set"),
                choices=[(name, name) for name in names],
                help_text=_("Each firing replays the latest version of this set."),
            )

    def clean_crontab(self) -> str:
        # The domain's own parser: the same message the verb would give, before anything is saved.
        try:
            services.parse_crontab(self.cleaned_data["crontab"])
        except ValidationError as error:
            raise ValidationError(error.message_dict.get("crontab", error.messages)) from None
        return self.cleaned_data["crontab"]


@admin.register(Schedule)
class ScheduleAdmin(LedgerAdmin):
    """Schedules change only through the domain verbs, which keep beat's periodic task in step."""

    form = ScheduleAdminForm
    list_display = [
        "__str__",
        "backend",
        "sample_set_name",
        "purpose",
        "crontab",
        "enabled",
        "next_run_at",
    ]
    list_filter = ["purpose", "periodic_task__enabled", "backend"]
    search_fields = ["sample_set_name", "backend__name"]
    list_select_related = ["backend", "periodic_task__crontab"]

    def get_readonly_fields(self, request: HttpRequest, obj=None):
        # What a schedule replays, and where, is its identity: make another one instead.
        return ["backend", "sample_set_name", "purpose"] if obj is not None else []

    def notice_for(self, request: HttpRequest, obj) -> str:
        return str(
            _(
                "Saved through the replay domain: the change is validated, django-celery-beat's "
                "periodic task follows, and an event is recorded."
            )
        )

    @admin.display(description=_("crontab"))
    def crontab(self, schedule: Schedule) -> str:
        return crontab_text(schedule)

    @admin.display(description=_("enabled"), boolean=True)
    def enabled(self, schedule: Schedule) -> bool:
        return schedule.periodic_task.enabled

    @admin.display(description=_("next run"))
    def next_run_at(self, schedule: Schedule):
        return next_run(schedule, timezone.now()) or "—"

    def save_model(self, request: HttpRequest, obj: Schedule, form, change: bool) -> None:
        data = form.cleaned_data
        if not change:
            schedule = services.create_schedule(
                actor=admin_actor(request),
                backend=data["backend"],
                sample_set_name=data["sample_set_name"],
                crontab=data["crontab"],
                purpose=data["purpose"],
            )
            if not data["enabled"]:
                services.update_schedule(schedule, actor=admin_actor(request), enabled=False)
            obj.pk = schedule.pk
            obj.periodic_task_id = schedule.periodic_task_id
            return
        stored = Schedule.objects.select_related("backend__revision__service__team").get(pk=obj.pk)
        services.update_schedule(
            stored, actor=admin_actor(request), crontab=data["crontab"], enabled=data["enabled"]
        )

    def save_related(self, request: HttpRequest, form, formsets, change: bool) -> None:
        pass  # a schedule has no relations of its own to save; the verb wrote everything

    def delete_model(self, request: HttpRequest, obj: Schedule) -> None:
        services.delete_schedule(obj, actor=admin_actor(request))

    def delete_queryset(self, request: HttpRequest, queryset) -> None:
        for schedule in queryset.select_related("backend__revision__service__team"):
            services.delete_schedule(schedule, actor=admin_actor(request))
