"""The release page: the diff first, then the form read-only, the gates, the sign-offs
with the snapshot each signer approved, the waivers, the comments and the timeline;
and the actions the reader may take (sign off, waive, comment, submit, withdraw, reopen).

Every action is a POST with CSRF calling one verb; submit, withdraw and reopen
first show a confirmation page saying what they will do. A refusal shows the
verb's message (naming the current state) on that page.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_stubs_ext import StrOrPromise

from ledger import queries as ledger_queries
from lib.actors import AuthenticatedHttpRequest
from lib.charts import figure_spec
from lib.pages import apply_errors
from releases import permissions, policy
from releases.cost.release_cost import release_cost
from releases.governance import gates as release_gates
from releases.governance import services
from releases.governance.charts import analysis_figure
from releases.governance.forms.release import STAGE_PARTS
from releases.governance.forms.release_fields import FIELD_SPECS, LOGGING_PARTS, SECTIONS
from releases.governance.forms.review import CommentForm, SignOffForm, WaiverForm
from releases.governance.queries import pages as page_queries
from releases.governance.queries.analysis import analysis_timeline, stage_analyses
from releases.governance.queries.rollout import rollout_of
from releases.governance.queries.waiting import signer_roles_of
from releases.governance.views.verification import verify_target_offered
from releases.models import Release, SignOff
from releases.schemas import CLASSIFICATIONS, DOWNSTREAM_SYSTEMS, METRICS
from releases.transitions import Action


def _release(pk: int) -> Release:
    release = page_queries.release_for_page(pk)
    if release is None:
        raise Http404(f"No release #{pk}.")
    return release


def _diff(release: Release, assessment: release_gates.Assessment) -> dict[str, Any]:
    """The diff of the release's revisions, as `release_for_page` read them with their
    parts, with the capabilities the gates read (none left to read when they did)."""
    a, b = release.from_revision, release.to_revision
    if a is None:
        return {"from_revision": None, "to_revision": b, "changes": []}
    declared = assessment.inputs.declared_capabilities if assessment.inputs else None
    changes = ledger_queries.revision_diff(a, b, capabilities=declared or None)
    return {
        "from_revision": a,
        "to_revision": b,
        "changes": changes,
        "breaking": ledger_queries.breaking_changes(changes),
    }


def _signable_roles(
    request: AuthenticatedHttpRequest, release: Release, assessment: release_gates.Assessment
) -> list[str]:
    if not release.allowed(Action.SIGN):
        return []
    held = signer_roles_of(request.user)
    signoffs = [state.signoff for state in assessment.signoffs]
    return [
        role
        for role in assessment.required_roles
        if role in held
        and permissions.can_sign(
            request.user, release, role, signoffs=signoffs, waivers=assessment.waivers
        )
    ]


def _waivable_gates(
    request: AuthenticatedHttpRequest, release: Release, assessment: release_gates.Assessment
) -> list[tuple[str, str]]:
    """The gates the reader may waive: not passing (`gates.waiver_refusal`), and their own
    role's (`permissions.waiver_refusal`)."""
    if not release.allowed(Action.WAIVE) or not permissions.can_waive(request.user):
        return []
    signoffs = [state.signoff for state in assessment.signoffs]
    return [
        (gate["key"], gate["title"])
        for gate in assessment.gates
        if release_gates.waiver_refusal(gate) is None
        and permissions.can_waive_gate(request.user, release, gate["key"], signoffs=signoffs)
    ]


def _waiver_form(release: Release, *args: Any, gates: list[tuple[str, str]]) -> WaiverForm:
    tier = release.service.tier
    return WaiverForm(
        *args,
        gates=gates,
        tier=tier,
        max_days=policy.waiver_max_days(tier),
        bound=policy.waiver_bound(tier, timezone.now()),
    )


def _read_only_form(
    release: Release,
) -> list[tuple[str, StrOrPromise, list[tuple[StrOrPromise, Any]]]]:
    """The form's sections as (label, value) rows for the page."""
    labels = {spec.name: spec.shown_as for spec in FIELD_SPECS}
    logging = release.logging_policy if isinstance(release.logging_policy, dict) else {}
    values: dict[str, Any] = {
        **{name: logging.get(key) for name, key in LOGGING_PARTS.items()},
        "impact_downstream": [_(DOWNSTREAM_SYSTEMS.get(v, v)) for v in release.impact_downstream],
        "impact_dismissed": [
            f"{_(DOWNSTREAM_SYSTEMS.get(str(d.get('system')), str(d.get('system'))))}: "
            f"{d.get('reason', '')}"
            for d in release.impact_dismissed
            if isinstance(d, dict)
        ],
        "metrics_declared": [_(METRICS.get(v, v)) for v in release.metrics_declared],
        "rollback_target": (
            release.rollback_target.label if release.rollback_target else _("the live revision")
        ),
        "to_revision": _("%(label)s: %(model)s@%(revision)s on %(runtime)s")
        % {
            "label": release.to_revision.label,
            "model": release.to_revision.model_asset.name,
            "revision": release.to_revision.model_asset.revision,
            "runtime": release.to_revision.runtime.name,
        },
        "standard_template": str(release.standard_template) if release.standard_template else None,
        "risk": release.get_risk_display() if release.risk else None,
        # English in the model (gettext_noop: they reach hashed and sent text); shown translated.
        "change_kind": _(release.get_change_kind_display()),
        "rollback_kind": _(release.get_rollback_kind_display()) if release.rollback_kind else None,
        "path": _(release.get_path_display()),
        "decommission_moves": [
            f"{m.get('kind')} {m.get('name')} → {m.get('moved_to')}"
            for m in release.decommission_moves
            if isinstance(m, dict)
        ],
    }
    sections = []
    for key, title, names in SECTIONS:
        if key == "decommission" and release.change_kind != Release.ChangeKind.DECOMMISSION:
            continue
        rows = []
        for name in names:
            label = labels[name]
            value = values[name] if name in values else getattr(release, name)
            if isinstance(value, list):
                value = ", ".join(str(item) for item in value) or None
            elif isinstance(value, dt.datetime):
                value = f"{timezone.localtime(value):%Y-%m-%d %H:%M %Z}"
            rows.append((label, value))
        sections.append((key, title, rows))
    return sections


@require_GET
@login_required
def release_detail(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    release = _release(pk)
    if not permissions.can_view_release(request.user, release):
        raise PermissionDenied(_("Sign in to read releases."))
    return render(request, "releases/release_detail.html", _page_context(request, release))


def _analysis_timeline(release: Release) -> dict[str, Any]:
    ticks = analysis_timeline(release)
    figure = analysis_figure(ticks) if ticks else None
    return {"ticks": ticks, "analysis_chart": figure_spec(figure) if figure else None}


def _rollout_context(request: AuthenticatedHttpRequest, release: Release) -> dict[str, Any]:
    """The rollout section: shown once a rollout can start or has."""
    startable = release.allowed(Action.START_ROLLOUT)
    # Rolling out (it promotes) or finished (it closes): a rollout has started.
    started = release.allowed(Action.PROMOTE) or release.allowed(Action.CLOSE)
    if not startable and not started:
        return {"show_rollout": False}
    user = request.user
    rollout = rollout_of(release)
    return {
        "show_rollout": True,
        "rollout": rollout,
        "analyses": stage_analyses(
            release, [view.stage for view in rollout.stages] if rollout else []
        ),
        **_analysis_timeline(release),
        "rollbacks": list(
            release.rollbacks.select_related("to_revision").order_by("-started_at", "-pk")
        ),
        "can_start": startable and permissions.can_start_rollout(user, release),
        "can_promote": release.allowed(Action.PROMOTE) and permissions.can_promote(user, release),
        "can_abort": release.allowed(Action.ABORT) and permissions.can_promote(user, release),
        "can_hold": release.allowed(Action.HOLD) and permissions.can_hold(user, release),
        "can_observe": release.allowed(Action.OBSERVE)
        and rollout is not None
        and rollout.observable
        and permissions.can_post_observation(user, release),
        "can_roll_back": release.allowed(Action.ROLL_BACK)
        and permissions.can_record_rollback(user, release.service),
        "can_close": release.allowed(Action.CLOSE) and permissions.can_close_release(user, release),
    }


def _page_context(
    request: AuthenticatedHttpRequest, release: Release, **forms: Any
) -> dict[str, Any]:
    assessment = release_gates.assess(release, reload=False)
    signable = _signable_roles(request, release, assessment)
    waivable = _waivable_gates(request, release, assessment)
    can_edit = permissions.can_edit_release(request.user, release)
    return {
        "release": release,
        "service": release.service,
        "assessment": assessment,
        **_diff(release, assessment),
        "sections": _read_only_form(release),
        "stage_parts": STAGE_PARTS,
        "classifications": CLASSIFICATIONS,
        "signable_roles": signable,
        "required_labels": [
            _(dict(SignOff.Role.choices)[r]).lower() for r in assessment.required_roles
        ],
        "signoff_form": forms.get("signoff_form")
        or (SignOffForm(roles=signable) if signable else None),
        "waiver_form": forms.get("waiver_form")
        or (_waiver_form(release, gates=waivable) if waivable else None),
        "comment_form": (
            forms.get("comment_form") or CommentForm()
            if permissions.can_comment(request.user, release)
            else None
        ),
        "comments": page_queries.comments(release),
        "timeline": page_queries.timeline(release),
        "can_edit": can_edit and release.allowed(Action.EDIT),
        "can_submit": can_edit and release.allowed(Action.SUBMIT),
        "can_withdraw": can_edit and release.allowed(Action.WITHDRAW),
        "can_reopen": permissions.can_file_release(request.user, release.service)
        and release.allowed(Action.REOPEN),
        "reopened_as": page_queries.reopened_as(release),
        "verify_target_offered": verify_target_offered(request, release, assessment),
        "cost": release_cost(release),
        **_rollout_context(request, release),
    }


@require_POST
@login_required
def release_signoff(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    release = _release(pk)
    form = SignOffForm(request.POST, roles=list(policy.SIGNER_ROLES))
    if form.is_valid():
        try:
            signoff = services.sign_off(
                release,
                actor=request.user,
                role=form.cleaned_data["role"],
                decision=form.cleaned_data["decision"],
                comment=form.cleaned_data["comment"],
            )
        except ValidationError as error:
            apply_errors(form, error)
        except services.TransitionRefused as refused:
            form.add_error(None, refused.message)
        else:
            said = (
                _("Approved for %(role)s on snapshot %(snapshot)s.")
                if signoff.decision == SignOff.Decision.APPROVE
                else _("Rejected for %(role)s on snapshot %(snapshot)s: the filer reads why.")
            )
            messages.success(
                request,
                said
                % {
                    "role": _(signoff.get_role_display()).lower(),
                    "snapshot": signoff.snapshot_hash[:12],
                },
            )
            return redirect("releases:release_detail", pk=pk)
    context = _page_context(request, release, signoff_form=form)
    return render(request, "releases/release_detail.html", context, status=400)


@require_POST
@login_required
def release_waiver(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    release = _release(pk)
    permissions.ensure_can_waive(request.user)
    form = _waiver_form(release, request.POST, gates=list(policy.GATES.items()))
    if form.is_valid():
        # Who may waive this gate, asked here as the verb asks it: a 403 saying why. (A
        # gate nobody waives is the verb's 400, beside the field.)
        gate = form.cleaned_data["gate"]
        if policy.waiver_owner(gate) is not None:
            refusal = permissions.waiver_refusal(request.user, release, gate)
            if refusal:
                raise PermissionDenied(refusal)
        try:
            waiver = services.grant_waiver(release, actor=request.user, **form.cleaned_data)
        except ValidationError as error:
            apply_errors(form, error)
        except services.TransitionRefused as refused:
            form.add_error(None, refused.message)
        else:
            messages.success(
                request,
                _("Waived the gate “%(gate)s” until %(until)s.")
                % {
                    "gate": _(policy.GATES[waiver.gate]),
                    "until": f"{waiver.expires_at:%Y-%m-%d %H:%M %Z}",
                },
            )
            return redirect("releases:release_detail", pk=pk)
    context = _page_context(request, release, waiver_form=form)
    return render(request, "releases/release_detail.html", context, status=400)


@require_POST
@login_required
def release_comment(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    release = _release(pk)
    permissions.ensure_can_comment(request.user, release)
    form = CommentForm(request.POST)
    if form.is_valid():
        try:
            services.add_comment(release, actor=request.user, body=form.cleaned_data["body"])
        except ValidationError as error:
            apply_errors(form, error)
        else:
            return redirect(reverse("releases:release_detail", args=[pk]) + "#comments")
    context = _page_context(request, release, comment_form=form)
    return render(request, "releases/release_detail.html", context, status=400)


# What each transition does, for its confirmation page.
TRANSITIONS: dict[str, tuple[StrOrPromise, StrOrPromise]] = {
    "submit": (
        gettext_lazy("Submit for sign-off"),
        gettext_lazy(
            "The form, the gates and the evidence are frozen into a snapshot, the revision "
            "becomes immutable, and the signers of the roles this release needs are emailed. "
            "Submitting needs every gate but sign-offs to pass or be waived."
        ),
    ),
    "withdraw": (
        gettext_lazy("Withdraw"),
        gettext_lazy(
            "The release stops here: no one can sign it or roll it out. You can reopen it later "
            "as a new draft copy of its form."
        ),
    ),
    "reopen": (
        gettext_lazy("Reopen as a new draft"),
        gettext_lazy(
            "A new draft is filed with a copy of this release's form, from the revision live "
            "now. This release stays as it is, for the record."
        ),
    ),
}


def _ensure_may(request: AuthenticatedHttpRequest, release: Release, action: str) -> None:
    if action == "reopen":
        permissions.ensure_can_file(request.user, release.service)
    else:
        permissions.ensure_can_edit(request.user, release)


@require_http_methods(["GET", "POST"])
@login_required
def release_transition(request: AuthenticatedHttpRequest, pk: int, action: str) -> HttpResponse:
    """Confirm (GET), then apply (POST) one state change through its verb."""
    if action not in TRANSITIONS:
        raise Http404(f"No action {action!r}: expected submit, withdraw or reopen.")
    release = get_object_or_404(Release.objects.select_related("service__team"), pk=pk)
    _ensure_may(request, release, action)
    title, explanation = TRANSITIONS[action]
    context: dict[str, Any] = {
        "release": release,
        "action": action,
        "title": title,
        "explanation": explanation,
    }
    if request.method == "GET":
        if action == "submit":
            context["failing"] = release_gates.assess(release).failing(but=frozenset({"signoffs"}))
        elif action == "reopen":
            context["lapsing_waivers"] = page_queries.waivers_lapsing_on_reopen(release)
        return render(request, "releases/release_confirm.html", context)
    try:
        if action == "submit":
            result = services.submit_release(release, actor=request.user)
            if result.state == Release.State.APPROVED:
                note = _("Submitted release #%(pk)s: no sign-off is needed, so it is approved.")
            else:
                note = _("Submitted release #%(pk)s for sign-off.")
            note %= {"pk": result.pk}
        elif action == "withdraw":
            result = services.withdraw_release(
                release, actor=request.user, reason=request.POST.get("reason", "")[:2000]
            )
            note = _("Withdrew release #%(pk)s.") % {"pk": result.pk}
        else:
            result = services.reopen_release(release, actor=request.user)
            note = _("Reopened release #%(pk)s as draft #%(draft)s.") % {
                "pk": release.pk,
                "draft": result.pk,
            }
    except services.TransitionRefused as refused:
        release.refresh_from_db()
        context.update(refusal=refused.message, release=release)
        return render(request, "releases/release_confirm.html", context, status=409)
    except services.GatesNotPassed as failed:
        context.update(refusal=failed.message, failing=failed.gates)
        return render(request, "releases/release_confirm.html", context, status=422)
    messages.success(request, note)
    target = "releases:release_edit" if action == "reopen" else "releases:release_detail"
    return redirect(target, pk=result.pk)
