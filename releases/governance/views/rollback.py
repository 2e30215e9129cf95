"""Rolling a service back, from its incident screen: the confirmation that shows where
it goes and what changes going there, the rollback's own page (verifying, waiting for
confirmation, how long it took), reconciling an unauthorized change, and the service's
own playbooks."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.dateformat import format as format_date
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods

from ledger import queries as ledger_queries
from ledger.models import Revision, Service
from lib.actors import AuthenticatedHttpRequest
from lib.http import post_only
from lib.pages import apply_errors
from releases import permissions
from releases.governance import playbooks, services
from releases.governance.forms.rollout import (
    CacheQuestionsForm,
    ConfirmRollbackForm,
    DegradationForm,
    PlaybookForm,
    ReconcileForm,
    RollbackForm,
)
from releases.governance.queries import plan as plans
from releases.governance.services.errors import TransitionRefused
from releases.models import RollbackEvent, Runbook, UnauthorizedChange


def _service(slug: str) -> Service:
    return get_object_or_404(
        Service.objects.select_related(
            "team", "live_revision__model_asset__license", "live_revision__runtime"
        ),
        slug=slug,
    )


def _revision_choices(service: Service, plan: plans.RollbackPlan) -> list[tuple[int | str, str]]:
    """Every revision of the service but the live one (unless the target is the live
    one, as while a rollout is in flight): the default marked, the rolled-back ones
    saying so; an empty first choice when there is no default."""
    default = plan.target
    revisions = Revision.objects.filter(service=service).select_related("model_asset", "runtime")
    choices: list[tuple[int | str, str]] = []
    if default is None:
        choices.append(("", _("— pick the revision to go back to —")))
    for revision in revisions.order_by("-number"):
        if revision.pk == service.live_revision_id and not (default and default.pk == revision.pk):
            continue
        label = _("%(label)s: %(model)s@%(revision)s on %(engine)s %(version)s") % {
            "label": revision.label,
            "model": revision.model_asset.name,
            "revision": revision.model_asset.revision,
            "engine": revision.runtime.get_engine_display(),
            "version": revision.runtime.engine_version,
        }
        rolled_back = plan.rolled_back.get(revision.pk)
        if default and revision.pk == default.pk:
            label = _("%(revision)s — the plan's target") % {"revision": label}
        elif rolled_back is not None:
            label = _("%(revision)s — rolled back by rollback #%(pk)s on %(when)s") % {
                "revision": label,
                "pk": rolled_back.rollback_id,
                "when": format_date(timezone.localtime(rolled_back.at), "Y-m-d H:i T"),
            }
        choices.append((revision.pk, label))
    return choices


@require_http_methods(["GET", "POST"])
@login_required
def rollback_new(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    """Confirm (GET: where it goes, what changes, how ready it is), then record (POST)."""
    service = _service(slug)
    permissions.ensure_can_record_rollback(request.user, service)
    plan = plans.rollback_plan(service)
    choices = _revision_choices(service, plan)
    data = request.POST if request.method == "POST" else None
    form = RollbackForm(
        data,
        revisions=choices,
        offers_rolled_back=any(pk in plan.rolled_back for pk, _label in choices),
        initial={
            "target_revision": request.GET.get("target")
            or (plan.target.pk if plan.target else None),
            "symptom": request.GET.get("symptom", ""),
        },
    )
    if request.method == "POST" and form.is_valid():
        try:
            rollback = services.record_rollback(
                service,
                actor=request.user,
                reason=form.cleaned_data["reason"],
                symptom=form.cleaned_data["symptom"],
                target_revision=form.cleaned_data["target_revision"],
                confirm_rolled_back=form.cleaned_data.get("confirm_rolled_back", False),
                rolled_back_reason=form.cleaned_data.get("rolled_back_reason", ""),
                prefix_cache=form.cleaned_data["prefix_cache"],
                response_cache=form.cleaned_data["response_cache"],
            )
        except ValidationError as error:
            apply_errors(form, error)
        except TransitionRefused as refused:
            form.add_error(None, refused.message)
        else:
            messages.success(
                request,
                _("Recorded rollback #%(pk)s: %(revision)s is live on %(service)s.")
                % {
                    "pk": rollback.pk,
                    "revision": rollback.to_revision.label,
                    "service": service.slug,
                },
            )
            return redirect("releases:rollback_detail", slug=service.slug, pk=rollback.pk)
    chosen = _chosen_target(form, choices, plan.target)
    form.for_engine(chosen.runtime.engine if chosen is not None else None)
    context: dict[str, Any] = {
        "service": service,
        "live": service.live_revision,
        "plan": plan,
        "form": form,
        "target": chosen,
        "chosen_rolled_back": plan.rolled_back.get(chosen.pk) if chosen is not None else None,
        "readiness": plans.plan_readiness(
            service,
            plans.RollbackPlan(
                release=plan.release,
                target=chosen,
                kind=plan.kind,
                expected_minutes=plan.expected_minutes,
                rolled_back=plan.rolled_back,
                newest_rollback=plan.newest_rollback,
            ),
        )
        if chosen is not None
        else None,
        **_diff(service.live_revision, chosen),
    }
    return render(
        request, "releases/rollback_new.html", context, status=400 if form.errors else 200
    )


def _chosen_target(
    form: RollbackForm, choices: list[tuple[int | str, str]], default: Revision | None
) -> Revision | None:
    raw = form.data.get("target_revision") if form.is_bound else form.initial.get("target_revision")
    allowed = {pk for pk, _label in choices}
    try:
        pk = int(str(raw)) if raw not in (None, "") else None
    except ValueError:
        pk = None
    if pk is None or pk not in allowed:
        return default
    return Revision.objects.with_parts().filter(pk=pk).first()


def _diff(live: Revision | None, target: Revision | None) -> dict[str, Any]:
    if live is None or target is None or live.pk == target.pk:
        return {"changes": [], "breaking": []}
    changes = ledger_queries.revision_diff(live, target)
    return {
        "changes": changes,
        "breaking": ledger_queries.breaking_changes(changes),
        "from_revision": live,
        "to_revision": target,
    }


def _rollback(slug: str, pk: int) -> RollbackEvent:
    rollback = (
        RollbackEvent.objects.select_related(
            "service__team",
            "release",
            "from_revision",
            "to_revision__runtime",
            "recorded_by",
            "verification_run__sample_set",
        )
        .filter(pk=pk, service__slug=slug)
        .first()
    )
    if rollback is None:
        raise Http404(f"No rollback #{pk} of {slug}.")
    return rollback


@require_GET
@login_required
def rollback_detail(request: AuthenticatedHttpRequest, slug: str, pk: int) -> HttpResponse:
    rollback = _rollback(slug, pk)
    return render(request, "releases/rollback_detail.html", _rollback_context(request, rollback))


def _rollback_context(
    request: AuthenticatedHttpRequest,
    rollback: RollbackEvent,
    form: ConfirmRollbackForm | None = None,
    caches_form: CacheQuestionsForm | None = None,
) -> dict[str, Any]:
    may_record = permissions.can_record_rollback(request.user, rollback.service)
    can_confirm = rollback.state == RollbackEvent.State.AWAITING_CONFIRMATION and may_record
    awaiting = rollback.state == RollbackEvent.State.AWAITING_CONFIRMATION
    if caches_form is None and may_record:
        caches_form = CacheQuestionsForm(
            engine=rollback.to_revision.runtime.engine,
            initial={
                "prefix_cache": rollback.prefix_cache,
                "response_cache": rollback.response_cache,
            },
        )
    return {
        "rollback": rollback,
        "service": rollback.service,
        "confirm_form": form or (ConfirmRollbackForm() if can_confirm else None),
        "caches_form": caches_form,
        "can_reverify": awaiting
        and permissions.can_verify_rollback_target(request.user, rollback.service),
        "overran": bool(
            rollback.duration
            and rollback.expected_minutes
            and rollback.duration.total_seconds() > rollback.expected_minutes * 60
        ),
    }


@post_only("confirms how a rollback went", page="releases:rollback_detail")
@login_required
def rollback_confirm(request: AuthenticatedHttpRequest, slug: str, pk: int) -> HttpResponse:
    rollback = _rollback(slug, pk)
    permissions.ensure_can_record_rollback(request.user, rollback.service)
    form = ConfirmRollbackForm(request.POST)
    if form.is_valid():
        try:
            services.confirm_rollback(
                rollback,
                actor=request.user,
                succeeded=form.cleaned_data["succeeded"],
                note=form.cleaned_data["note"],
            )
        except ValidationError as error:
            apply_errors(form, error)
        else:
            messages.success(request, _("Rollback #%(pk)s confirmed.") % {"pk": rollback.pk})
            return redirect("releases:rollback_detail", slug=slug, pk=pk)
    context = _rollback_context(request, rollback, form)
    return render(request, "releases/rollback_detail.html", context, status=400)


@post_only("answers whether a rollback's caches were flushed", page="releases:rollback_detail")
@login_required
def rollback_caches(request: AuthenticatedHttpRequest, slug: str, pk: int) -> HttpResponse:
    rollback = _rollback(slug, pk)
    permissions.ensure_can_record_rollback(request.user, rollback.service)
    form = CacheQuestionsForm(request.POST, engine=rollback.to_revision.runtime.engine)
    if form.is_valid():
        try:
            services.answer_rollback_caches(
                rollback,
                actor=request.user,
                prefix_cache=form.cleaned_data["prefix_cache"],
                response_cache=form.cleaned_data["response_cache"],
            )
        except ValidationError as error:
            apply_errors(form, error)
        else:
            messages.success(
                request, _("Recorded the cache answers of rollback #%(pk)s.") % {"pk": rollback.pk}
            )
            return redirect("releases:rollback_detail", slug=slug, pk=pk)
    context = _rollback_context(request, rollback, caches_form=form)
    return render(request, "releases/rollback_detail.html", context, status=400)


@post_only("reconciles an unauthorized change", page="releases:service_detail")
@login_required
def unauthorized_reconcile(request: AuthenticatedHttpRequest, slug: str, pk: int) -> HttpResponse:
    change = get_object_or_404(
        UnauthorizedChange.objects.select_related("service__team"), pk=pk, service__slug=slug
    )
    permissions.ensure_can_reconcile(request.user, change.service)
    form = ReconcileForm(request.POST)
    if form.is_valid():
        try:
            services.reconcile_change(change, actor=request.user, note=form.cleaned_data["note"])
        except ValidationError as error:
            messages.error(request, " ".join(error.messages))
        else:
            messages.success(request, _("Reconciled: the finding is closed, with your note."))
    else:
        messages.error(request, _("Say how it was put back: the note is needed."))
    return redirect(reverse("releases:service_detail", args=[slug]) + "#unauthorized")


# ---------------------------------------------------------------- the runbook


@require_GET
@login_required
def runbook(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    """The service's playbooks and degradation policies: its own, or the tier's defaults."""
    service = get_object_or_404(
        Service.objects.select_related("team").prefetch_related("task_types"), slug=slug
    )
    own = Runbook.objects.filter(service=service).first()
    return render(
        request,
        "releases/runbook.html",
        {
            "service": service,
            "playbooks": playbooks.playbooks_for(service.tier, own.playbooks if own else None),
            "degradation": [
                (task.slug, playbooks.degradation_for(task.slug, own.degradation if own else None))
                for task in service.task_types.all()
            ],
            "runbook": own,
            "can_edit": permissions.can_edit_playbooks(request.user, service),
        },
    )


def _editable_service(request: AuthenticatedHttpRequest, slug: str) -> Service:
    service = get_object_or_404(Service.objects.select_related("team"), slug=slug)
    if not permissions.can_edit_playbooks(request.user, service):
        raise PermissionDenied(
            _(
                "Only platform or model owners of team %(team)s can change the playbooks of "
                "%(service)s."
            )
            % {"team": repr(service.team.slug), "service": service.slug}
        )
    return service


@require_http_methods(["GET", "POST"])
@login_required
def playbook_edit(request: AuthenticatedHttpRequest, slug: str, mode: str) -> HttpResponse:
    service = _editable_service(request, slug)
    if mode not in playbooks.FAILURE_MODES:
        raise Http404(f"No failure mode {mode!r}.")
    own = Runbook.objects.filter(service=service).first()
    current = next(
        p
        for p in playbooks.playbooks_for(service.tier, own.playbooks if own else None)
        if p.mode == mode
    )
    if request.method == "POST" and request.POST.get("action") == "default":
        services.clear_playbook(service, actor=request.user, mode=mode)
        messages.success(
            request,
            _("%(playbook)s: back to the %(tier)s default.")
            % {
                "playbook": playbooks.FAILURE_MODE_TITLES.get(mode, current.title),
                "tier": service.tier,
            },
        )
        return redirect(reverse("releases:runbook", args=[slug]) + f"#{mode}")
    form = PlaybookForm(
        request.POST if request.method == "POST" else None,
        initial={
            "diagnosis": "\n".join(current.diagnosis),
            "recovery": "\n".join(current.recovery),
        },
    )
    if request.method == "POST" and form.is_valid():
        try:
            services.set_playbook(service, actor=request.user, mode=mode, **form.cleaned_data)
        except ValidationError as error:
            apply_errors(form, error)
        else:
            messages.success(
                request,
                _("Saved %(service)s's own playbook for %(playbook)s.")
                % {
                    "service": service.slug,
                    "playbook": str(playbooks.FAILURE_MODE_TITLES.get(mode, current.title)).lower(),
                },
            )
            return redirect(reverse("releases:runbook", args=[slug]) + f"#{mode}")
    return render(
        request,
        "releases/playbook_edit.html",
        {"service": service, "playbook": current, "form": form},
        status=400 if form.errors else 200,
    )


@require_http_methods(["GET", "POST"])
@login_required
def degradation_edit(request: AuthenticatedHttpRequest, slug: str, task_type: str) -> HttpResponse:
    service = _editable_service(request, slug)
    if not service.task_types.filter(slug=task_type).exists():
        raise Http404(f"{service.slug} does not serve task type {task_type!r}.")
    own = Runbook.objects.filter(service=service).first()
    current = playbooks.degradation_for(task_type, own.degradation if own else None)
    if request.method == "POST" and request.POST.get("action") == "default":
        services.clear_degradation(service, actor=request.user, task_type=task_type)
        messages.success(
            request, _("%(task_type)s: back to the default policy.") % {"task_type": task_type}
        )
        return redirect(reverse("releases:runbook", args=[slug]) + "#degradation")
    form = DegradationForm(
        request.POST if request.method == "POST" else None,
        initial={"may_degrade": "yes" if current.may_degrade else "no", "how": current.how},
    )
    if request.method == "POST" and form.is_valid():
        try:
            services.set_degradation(
                service, actor=request.user, task_type=task_type, **form.cleaned_data
            )
        except ValidationError as error:
            apply_errors(form, error)
        else:
            messages.success(
                request,
                _("Saved how %(task_type)s degrades on %(service)s.")
                % {"task_type": task_type, "service": service.slug},
            )
            return redirect(reverse("releases:runbook", args=[slug]) + "#degradation")
    return render(
        request,
        "releases/degradation_edit.html",
        {"service": service, "task_type": task_type, "policy": current, "form": form},
        status=400 if form.errors else 200,
    )
