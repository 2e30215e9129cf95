"""Webhook subscriptions for platform users: create one (its secret shown once), list
them, pause and resume, delete (after a confirmation), read a subscription's
delivery log and send a delivery again. Every action is a POST calling one verb of
`releases.audit.services.webhooks`; `releases.permissions.can_manage_webhooks` decides.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods

from lib.actors import AuthenticatedHttpRequest
from lib.http import post_only
from lib.pages import apply_errors, paginate
from releases import permissions
from releases.audit.forms.audit import WebhookSubscriptionForm
from releases.audit.services import webhooks as webhook_services
from releases.audit.webhook_types import EVENT_TYPES
from releases.models import Delivery, WebhookSubscription

# The secret of a subscription just created, kept in the session for one page view.
SESSION_SECRET_SLOT = "webhook-secret-{pk}"  # noqa: S105 - a session key name


def _subscription(request: AuthenticatedHttpRequest, pk: int) -> WebhookSubscription:
    permissions.ensure_can_manage_webhooks(request.user)
    subscription = WebhookSubscription.objects.select_related("created_by").filter(pk=pk).first()
    if subscription is None:
        raise Http404(f"No webhook subscription #{pk}.")
    return subscription


@require_GET
@login_required
def webhook_list(request: AuthenticatedHttpRequest) -> HttpResponse:
    permissions.ensure_can_manage_webhooks(request.user)
    page = paginate(request, WebhookSubscription.objects.order_by("name", "id"))
    return render(request, "releases/webhook_list.html", {"page": page, "types": EVENT_TYPES})


@require_http_methods(["GET", "POST"])
@login_required
def webhook_new(request: AuthenticatedHttpRequest) -> HttpResponse:
    permissions.ensure_can_manage_webhooks(request.user)
    form = WebhookSubscriptionForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        try:
            subscription = webhook_services.create_subscription(
                actor=request.user, **form.cleaned_data
            )
        except ValidationError as error:
            apply_errors(form, error)
        else:
            # Shown once, on the next page view, then gone from the session.
            request.session[SESSION_SECRET_SLOT.format(pk=subscription.pk)] = subscription.secret
            return redirect("releases:webhook_detail", pk=subscription.pk)
    status = 400 if request.method == "POST" else 200
    return render(request, "releases/webhook_new.html", {"form": form}, status=status)


@require_GET
@login_required
def webhook_detail(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    subscription = _subscription(request, pk)
    deliveries = Delivery.objects.filter(subscription=subscription).select_related("event")
    context = {
        "subscription": subscription,
        "secret": request.session.pop(SESSION_SECRET_SLOT.format(pk=pk), None),
        "types": [(t, EVENT_TYPES[t].label) for t in subscription.event_types if t in EVENT_TYPES],
        "page": paginate(request, deliveries.order_by("-created_at", "-id")),
    }
    return render(request, "releases/webhook_detail.html", context)


@post_only("pauses this subscription", page="releases:webhook_detail")
@login_required
def webhook_pause(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    subscription = webhook_services.pause_subscription(
        _subscription(request, pk), actor=request.user
    )
    messages.success(
        request,
        _("Paused %(name)s: nothing is sent until you resume it.") % {"name": subscription.name},
    )
    return redirect("releases:webhook_detail", pk=pk)


@post_only("resumes this subscription", page="releases:webhook_detail")
@login_required
def webhook_resume(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    subscription = webhook_services.resume_subscription(
        _subscription(request, pk), actor=request.user
    )
    messages.success(
        request,
        _("Resumed %(name)s: what happened meanwhile is sent next.") % {"name": subscription.name},
    )
    return redirect("releases:webhook_detail", pk=pk)


@require_http_methods(["GET", "POST"])
@login_required
def webhook_delete(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    """GET: what deleting does, and a button; POST: delete."""
    subscription = _subscription(request, pk)
    if request.method == "GET":
        count = subscription.deliveries.count()
        return render(
            request,
            "releases/webhook_delete.html",
            {"subscription": subscription, "deliveries": count},
        )
    name = subscription.name
    webhook_services.delete_subscription(subscription, actor=request.user)
    messages.success(request, _("Deleted %(name)s and its delivery log.") % {"name": name})
    return redirect("releases:webhook_list")


@post_only(
    "sends this delivery again",
    page=lambda pk, delivery_id: reverse("releases:webhook_detail", kwargs={"pk": pk}),
)
@login_required
def webhook_resend(request: AuthenticatedHttpRequest, pk: int, delivery_id: int) -> HttpResponse:
    subscription = _subscription(request, pk)
    delivery = Delivery.objects.filter(pk=delivery_id, subscription=subscription).first()
    if delivery is None:
        raise Http404(f"No delivery #{delivery_id} of this subscription.")
    webhook_services.resend_delivery(delivery, actor=request.user)
    messages.success(
        request,
        _("Delivery #%(pk)s (event #%(sequence)s) is being sent again.")
        % {"pk": delivery.pk, "sequence": delivery.event.sequence},
    )
    return redirect("releases:webhook_detail", pk=pk)
