"""Driving a release's gray rollout from its page: start, promote, hold and abort, each
confirmed first and saying what it will do; observations posted for the stage carrying
traffic; and how a finished release ended."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_http_methods
from django.views.decorators.vary import vary_on_headers
from django_stubs_ext import StrOrPromise

from lib.actors import AuthenticatedHttpRequest
from lib.durations import minutes_in_words
from lib.pages import apply_errors, wants_fragment
from releases import permissions
from releases.governance import services
from releases.governance.forms.rollout import CloseForm, EarlyStartForm, ObservationForm, ReasonForm
from releases.governance.queries.rollout import rollout_of, window_end
from releases.governance.services.rollout import active_stage, promotion_refusal
from releases.models import Release, Stage
from releases.transitions import Action

# What each rollout action does, for its confirmation page; and whether it takes a reason.
ACTIONS: dict[str, tuple[StrOrPromise, StrOrPromise, bool]] = {
    "start": (
        gettext_lazy("Start the rollout"),
        gettext_lazy(
            "Stage 1 of the gray plan starts carrying its share of traffic, and its guards are "
            "judged from the observations posted for it. Outside a blackout window only, except "
            "on the emergency path."
        ),
        False,
    ),
    "promote": (
        gettext_lazy("Promote"),
        gettext_lazy(
            "The stage carrying traffic ends and the next one starts with its larger share. "
            "Promoting into the stage at %(full)s releases the candidate: it becomes the "
            "service's live revision."
        ),
        False,
    ),
    "hold": (
        gettext_lazy("Hold"),
        gettext_lazy(
            "The stage keeps its traffic but is not promoted until someone promotes it; whoever "
            "picks it up reads your reason."
        ),
        True,
    ),
    "end-window": (
        gettext_lazy("End the observation window now"),
        gettext_lazy(
            "This ends the observation window of stage %(stage)s now, before the %(minutes)s "
            "the plan gives it, and promotes the stage: the next one starts with its larger "
            "share. Its guards still count: a failing, breached or unobserved stage is refused "
            "as a promotion is. Your reason is kept with the promotion in the ledger."
        ),
        True,
    ),
    "abort": (
        gettext_lazy("Abort the rollout"),
        gettext_lazy(
            "The candidate's traffic goes back to the live revision and the release ends as "
            "aborted. To roll back during an incident, record a rollback instead: it is timed "
            "and verified."
        ),
        True,
    ),
}


def _release(pk: int) -> Release:
    return get_object_or_404(
        Release.objects.select_related("service__team", "to_revision", "from_revision"), pk=pk
    )


def _may(request: AuthenticatedHttpRequest, release: Release, action: str) -> None:
    if action == "start":
        permissions.ensure_can_start_rollout(request.user, release)
    elif action == "hold":
        permissions.ensure_can_hold(request.user, release)
    elif action == "end-window":
        permissions.ensure_can_end_observation_window(request.user, release)
    else:
        permissions.ensure_can_promote(request.user, release)


def _promotion_ahead(
    request: AuthenticatedHttpRequest, release: Release, action: str
) -> dict[str, Any]:
    """What the promote and end-window pages know before anything is pressed: the stage,
    why a promotion would be refused, and, when only its window stands in the way, when
    that ends and what may be done meanwhile."""
    if action not in ("promote", "end-window") or not release.allowed(Action.PROMOTE):
        return {}
    stage = active_stage(release)
    if stage is None:
        return {}
    now = timezone.now()
    refusal = promotion_refusal(stage, release, now)
    blocking = promotion_refusal(stage, release, now, window=False)  # beyond the window
    window_only = refusal is not None and blocking is None
    ahead = refusal if action == "promote" else blocking
    if action == "end-window" and ahead is None and not window_only:
        ahead = _("The observation window of stage %(stage)s has ended: promote it instead.") % {
            "stage": stage.number
        }
    return {
        "stage": stage,
        "refusal_ahead": ahead,
        "window_only": window_only,
        "window_ends_at": window_end(stage),
        "may_hold": permissions.can_hold(request.user, release)
        and stage.state == Stage.State.OBSERVING,
        "may_end_window": window_only
        and permissions.can_end_observation_window(request.user, release),
    }


@require_http_methods(["GET", "POST"])
@login_required
def rollout_action(request: AuthenticatedHttpRequest, pk: int, action: str) -> HttpResponse:
    """Confirm (GET), then apply (POST) one rollout verb."""
    if action not in ACTIONS:
        raise Http404(
            f"No rollout action {action!r}: expected start, promote, hold, end-window or abort."
        )
    release = _release(pk)
    _may(request, release, action)
    title, explanation, needs_reason = ACTIONS[action]
    planned = services.early_start(release, timezone.now()) if action == "start" else None
    posted = request.POST if request.method == "POST" else None
    form: forms.Form | None = None
    if planned is not None:
        form = EarlyStartForm(posted)
    elif needs_reason:
        form = ReasonForm(posted)
    context: dict[str, Any] = {
        "release": release,
        "action": action,
        "title": title,
        "form": form,
        "rollout": rollout_of(release),
        "planned_start": planned,
        **_promotion_ahead(request, release, action),
    }
    stage = context.get("stage")
    # "%(full)s" keeps the percent sign out of the message, where it would read as a format.
    context["explanation"] = explanation % {
        "full": "100 %",
        "stage": stage.number if stage else "",
        "minutes": minutes_in_words(stage.observation_minutes if stage else None),
    }
    if request.method == "GET":
        return render(request, "releases/rollout_confirm.html", context)
    if form is not None and not form.is_valid():
        return render(request, "releases/rollout_confirm.html", context, status=400)
    said = form.cleaned_data if form is not None else {}
    try:
        note = _apply(
            request, release, action, said.get("reason", ""), said.get("early_reason", "")
        )
    except services.TransitionRefused as refused:
        context.update(refusal=refused.message, release=_release(pk), rollout=rollout_of(release))
        return render(request, "releases/rollout_confirm.html", context, status=409)
    except services.GatesNotPassed as failed:
        context.update(refusal=failed.message, failing=failed.gates)
        return render(request, "releases/rollout_confirm.html", context, status=422)
    except ValidationError as error:
        if form is not None:
            apply_errors(form, error)
        context["refusal"] = " ".join(error.messages)
        return render(request, "releases/rollout_confirm.html", context, status=400)
    messages.success(request, note)
    return redirect(reverse("releases:release_detail", args=[pk]) + "#rollout")


def _apply(
    request: AuthenticatedHttpRequest,
    release: Release,
    action: str,
    reason: str,
    early_reason: str = "",
) -> str:
    if action == "start":
        services.start_rollout(release, actor=request.user, early_reason=early_reason)
        return _("Release #%(pk)s is rolling out: stage 1 carries traffic.") % {"pk": release.pk}
    if action == "promote":
        result = services.promote_release(release, actor=request.user)
        stage = result.stages.filter(started_at__isnull=False).order_by("-number").first()
        if result.state == Release.State.RELEASED:
            said = {"revision": release.to_revision.label, "service": release.service.slug}
            if stage is None or not stage.is_full:  # a plan that stopped short of 100 %
                return _("Released: %(revision)s is live on %(service)s.") % said
            return _(
                "Released: %(revision)s is live on %(service)s (stage %(number)s carries "
                "100 %% of traffic)."
            ) % {**said, "number": stage.number}
        assert stage is not None  # a rollout still going has a stage carrying traffic
        return _("Promoted: stage %(number)s carries %(pct)s %% of traffic.") % {
            "number": stage.number,
            "pct": f"{float(stage.traffic_pct):g}",
        }
    if action == "end-window":
        ended = active_stage(release)
        result = services.end_observation_window(release, actor=request.user, reason=reason)
        stage = result.stages.filter(started_at__isnull=False).order_by("-number").first()
        assert ended is not None and stage is not None
        return _(
            "Ended the observation window of stage %(ended)s early: stage %(number)s carries "
            "%(pct)s %% of traffic."
        ) % {"ended": ended.number, "number": stage.number, "pct": f"{float(stage.traffic_pct):g}"}
    if action == "hold":
        stage = services.hold_release(release, actor=request.user, reason=reason)
        return _("Stage %(number)s is held.") % {"number": stage.number}
    services.abort_release(release, actor=request.user, reason=reason)
    return _("Aborted the rollout of release #%(pk)s.") % {"pk": release.pk}


@require_http_methods(["GET", "POST"])
@login_required
@vary_on_headers("HX-Request")
def release_observation(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    """The observation form of the stage carrying traffic (the release page fetches it when
    its "Post an observation" panel opens), and the observation it records."""
    release = _release(pk)
    permissions.ensure_can_post_observation(request.user, release)
    if request.method == "GET":
        return _observation_form_page(request, release)
    form = ObservationForm(request.POST)
    if form.is_valid():
        try:
            observation = services.record_observation(
                release,
                actor=request.user,
                window_start=form.cleaned_data["window_start"],
                window_end=form.cleaned_data["window_end"],
                candidate=form.side("candidate"),
                baseline=form.side("baseline"),
                source=form.cleaned_data["source"] or "a person",
                source_error=form.cleaned_data["source_error"],
            )
        except ValidationError as error:
            apply_errors(form, error)
        except services.TransitionRefused as refused:
            form.add_error(None, refused.message)
        else:
            messages.success(
                request,
                _("Observation recorded: %(verdict)s.")
                % {"verdict": observation.get_verdict_display().lower()},
            )
            return redirect(reverse("releases:release_detail", args=[pk]) + "#rollout")
    return render(
        request,
        "releases/observation_form.html",
        {"release": release, "form": form, "rollout": rollout_of(release)},
        status=400,
    )


def _observation_form_page(request: AuthenticatedHttpRequest, release: Release) -> HttpResponse:
    rollout = rollout_of(release)
    if rollout is None or not rollout.observable:
        nothing = _("Release #%(pk)s has no stage carrying traffic: there is nothing to observe.")
        nothing %= {"pk": release.pk}
        if wants_fragment(request):  # the panel of a page read before the rollout ended
            return HttpResponse(format_html('<p class="empty">{}</p>', nothing))
        messages.info(request, nothing)
        return redirect(reverse("releases:release_detail", args=[release.pk]) + "#rollout")
    stage = rollout.current.stage if rollout.current else None
    form = ObservationForm(stage_started_at=stage.started_at if stage else None)
    context = {"release": release, "form": form, "rollout": rollout}
    if wants_fragment(request):
        return render(request, "releases/_observation_form.html", context)
    return render(request, "releases/observation_form.html", context)


@require_http_methods(["GET", "POST"])
@login_required
def release_close(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    release = _release(pk)
    permissions.ensure_can_close(request.user, release)
    incidents = "\n".join(
        f"{i.get('ticket', '')} {i.get('url', '')}".strip()
        for i in release.incidents
        if isinstance(i, dict)
    )
    form = CloseForm(
        request.POST if request.method == "POST" else None,
        initial={
            "close_code": release.close_code,
            "note": release.close_note,
            "incidents": incidents,
        },
    )
    if request.method == "POST" and form.is_valid():
        try:
            services.close_release(release, actor=request.user, **form.cleaned_data)
        except ValidationError as error:
            apply_errors(form, error)
        except services.TransitionRefused as refused:
            form.add_error(None, refused.message)
        else:
            messages.success(request, _("Saved how release #%(pk)s ended.") % {"pk": release.pk})
            return redirect(reverse("releases:release_detail", args=[pk]) + "#rollout")
    return render(
        request,
        "releases/release_close.html",
        {"release": release, "form": form},
        status=400 if form.errors else 200,
    )
