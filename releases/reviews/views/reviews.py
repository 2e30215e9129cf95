"""Periodic reviews in the browser: every review (filters in the URL), "My reviews", the
review page (why it was raised, the checklist, the evidence, the conclusion), concluding
(with a confirmation first), an action marked done, a review given to someone else."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.http import require_GET, require_http_methods
from django.views.decorators.vary import vary_on_headers

from lib.actors import AuthenticatedHttpRequest
from lib.http import post_only
from lib.pages import apply_errors, paginate, render_list
from releases import permissions
from releases.governance.queries import plan as plans
from releases.governance.services import TransitionRefused
from releases.models import Review, ReviewAction
from releases.reviews.forms.periodic_review import (
    ActionDoneForm,
    ChecklistForm,
    ConclusionForm,
    ReassignForm,
    ReviewListFilter,
    answer_field,
    note_field,
)
from releases.reviews.queries import reviews as review_queries
from releases.reviews.services import periodic_reviews as verbs


def _review(pk: int) -> Review:
    review = review_queries.review_for_page(pk)
    if review is None:
        raise Http404(f"There is no review #{pk}.")
    return review


@require_GET
@login_required
@vary_on_headers("HX-Request")
def review_list(request: AuthenticatedHttpRequest) -> HttpResponse:
    reviews = ReviewListFilter(
        request.GET or None, queryset=review_queries.review_list_queryset(), request=request
    )
    page = paginate(request, reviews.qs)
    context = {
        "filter": reviews,
        "page": page,
        "filtered": any(request.GET.get(name) for name in reviews.filters),
        "today": review_queries.utc_today(),
    }
    return render_list(request, "releases/review_list.html", context)


@require_GET
@login_required
def my_reviews(request: AuthenticatedHttpRequest) -> HttpResponse:
    page = paginate(request, review_queries.my_reviews(request.user))
    context = {
        "page": page,
        "today": review_queries.utc_today(),
        "may_manage": permissions.can_manage_reviews(request.user),
    }
    return render(request, "releases/my_reviews.html", context)


def _page_context(
    request: AuthenticatedHttpRequest, review: Review, checklist_form: ChecklistForm | None = None
) -> dict[str, Any]:
    service = review.service
    may_conduct = review.is_open and permissions.can_conduct_review(request.user, review)
    items = list(review.items.all())
    if checklist_form is None and may_conduct:
        checklist_form = ChecklistForm(items=items)
    triggers = [(t, review_queries.trigger_links(t, service)) for t in review.triggers.all()]
    context: dict[str, Any] = {
        "review": review,
        "service": service,
        "triggers": triggers,
        "items": items,
        "form": checklist_form,
        "may_conduct": may_conduct,
        "may_reassign": review.is_open and permissions.can_manage_reviews(request.user),
        "unanswered": sum(1 for item in items if not item.answer),
        "late": review_queries.is_late(review),
        "actions": list(review.actions.all()),
        "events": review_queries.review_events(review),
    }
    if review.is_open and service.live_revision_id is not None:
        # The rollback target judged now, beside what the sweep found when it raised this.
        plan = plans.rollback_plan(service)
        context["readiness"] = plans.plan_readiness(service, plan)
    return context


@require_GET
@login_required
def review_detail(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    review = _review(pk)
    return render(request, "releases/review_detail.html", _page_context(request, review))


@post_only("saves the answers of a review's checklist", page="releases:review_detail")
@login_required
def review_checklist(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    review = _review(pk)
    permissions.ensure_can_conduct_review(request.user, review)
    form = ChecklistForm(request.POST, items=list(review.items.all()))
    if form.is_valid():
        try:
            changed = verbs.answer_checklist(review, actor=request.user, answers=form.answers())
        except TransitionRefused as refused:
            messages.error(request, refused.message)
            return redirect("releases:review_detail", pk=pk)
        except ValidationError as error:
            _checklist_errors(form, error)
        else:
            messages.success(
                request,
                ngettext("%(count)d answer saved.", "%(count)d answers saved.", len(changed))
                % {"count": len(changed)}
                if changed
                else _("Nothing changed."),
            )
            return redirect(reverse("releases:review_detail", args=[pk]) + "#checklist")
    context = _page_context(request, _review(pk), form)
    return render(request, "releases/review_detail.html", context, status=400)


def _checklist_errors(form: ChecklistForm, error: ValidationError) -> None:
    for name, found in error.message_dict.items():
        key, _, part = name.partition(".")
        field = note_field(key) if part == "note" else answer_field(key)
        if field in form.fields:
            form.add_error(field, found)
        else:
            form.add_error(None, [f"{name}: {message}" for message in found])


@post_only("starts a review: it shows as in progress", page="releases:review_detail")
@login_required
def review_start(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    review = _review(pk)
    try:
        verbs.start_review(review, actor=request.user)
    except TransitionRefused as refused:
        messages.error(request, refused.message)
    else:
        messages.success(request, _("Review #%(pk)s is in progress.") % {"pk": pk})
    return redirect("releases:review_detail", pk=pk)


@require_http_methods(["GET", "POST"])
@login_required
def review_conclude(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    """The conclusion form (GET); its summary to confirm (POST); then concluding (POST with
    `confirm`)."""
    review = _review(pk)
    permissions.ensure_can_conduct_review(request.user, review)
    context: dict[str, Any] = {
        "review": review,
        "service": review.service,
        "items": list(review.items.all()),
    }
    if not review.is_open:
        context["refusal"] = _("Review #%(pk)s was concluded on %(day)s: it is read-only.") % {
            "pk": pk,
            "day": f"{review.concluded_at:%Y-%m-%d}",
        }
        return render(request, "releases/review_conclude.html", context, status=409)
    form = ConclusionForm(request.POST or None, review=review)
    context["form"] = form
    context["unanswered"] = [item for item in context["items"] if not item.answer]
    if request.method == "GET":
        return render(request, "releases/review_conclude.html", context)
    if not form.is_valid():
        return render(request, "releases/review_conclude.html", context, status=400)
    actions = form.actions()
    if request.POST.get("confirm") != "yes":
        context.update(
            confirming=True,
            actions=actions,
            carried=[
                (name, value)
                for name, value in request.POST.items()
                if name not in ("csrfmiddlewaretoken", "confirm")
            ],
        )
        return render(request, "releases/review_conclude.html", context)
    try:
        verbs.conclude_review(
            review,
            actor=request.user,
            outcome=form.cleaned_data["outcome"],
            conclusion=form.cleaned_data["conclusion"],
            next_due_on=form.cleaned_data["next_due_on"],
            actions=actions,
        )
    except TransitionRefused as refused:
        context["refusal"] = refused.message
        return render(request, "releases/review_conclude.html", context, status=409)
    except ValidationError as error:
        for name, found in error.message_dict.items():
            field = form.verb_field(name)
            if field in form.fields:
                form.add_error(field, found)
            else:
                form.add_error(None, found)
        return render(request, "releases/review_conclude.html", context, status=400)
    messages.success(
        request,
        _("Review #%(pk)s concluded: %(service)s.") % {"pk": pk, "service": review.service.slug},
    )
    return redirect("releases:review_detail", pk=pk)


@require_http_methods(["GET", "POST"])
@login_required
def review_reassign(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    review = _review(pk)
    permissions.ensure_can_manage_reviews(request.user)
    form = ReassignForm(
        request.POST or None,
        initial={"assignee": review.assignee.get_username() if review.assignee else ""},
    )
    context = {"review": review, "service": review.service, "form": form}
    if request.method == "GET" or not form.is_valid():
        return render(
            request, "releases/review_reassign.html", context, status=400 if form.errors else 200
        )
    User = get_user_model()
    assignee = User.objects.filter(username=form.cleaned_data["assignee"]).first()
    try:
        if assignee is None:
            raise ValidationError(
                {"assignee": _("No user %(name)s.") % {"name": repr(form.cleaned_data["assignee"])}}
            )
        verbs.reassign_review(review, actor=request.user, assignee=assignee)
    except TransitionRefused as refused:
        messages.error(request, refused.message)
        return redirect("releases:review_detail", pk=pk)
    except ValidationError as error:
        apply_errors(form, error)
        return render(request, "releases/review_reassign.html", context, status=400)
    messages.success(
        request,
        _("Review #%(pk)s is now %(user)s's.") % {"pk": pk, "user": assignee.get_username()},
    )
    return redirect("releases:review_detail", pk=pk)


@post_only(
    "marks an action of a review done",
    page=lambda pk: reverse("releases:review_list"),
)
@login_required
def review_action_done(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    action = get_object_or_404(ReviewAction.objects.select_related("service__team", "owner"), pk=pk)
    if not permissions.can_complete_review_action(request.user, action):
        raise PermissionDenied(
            _(
                "Only the action's owner, platform, security & compliance or the service's model "
                "owners can mark it done."
            )
        )
    form = ActionDoneForm(request.POST)
    back = reverse("releases:service_detail", args=[action.service.slug]) + "#reviews"
    if not form.is_valid():
        messages.error(request, " ".join(str(e) for e in form.errors.get("note", [])))
        return redirect(back)
    try:
        verbs.complete_review_action(action, actor=request.user, note=form.cleaned_data["note"])
    except TransitionRefused as refused:
        messages.error(request, refused.message)
    else:
        messages.success(request, _("Action #%(pk)s is done.") % {"pk": pk})
    return redirect(back)
