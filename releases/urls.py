"""Pages of the releases app and those composing all three apps (home is mounted at
the root as `home` in config/urls.py). URL names equal the view functions."""

from django.urls import path

from releases.analysis import views as analysis
from releases.audit.views import audit, webhooks
from releases.cost import views as cost
from releases.drills import views as drills
from releases.explain import views as explain
from releases.gateway.views import check as gateway_check
from releases.gateway.views import policy as gateway_policy
from releases.gateway.views import release_policy
from releases.governance.views import (
    release_detail,
    release_form,
    release_list,
    rollback,
    rollout,
    verification,
)
from releases.overview.views import catalog, incident, service
from releases.reviews.views import reviews

app_name = "releases"

urlpatterns = [
    path("services/", catalog.service_list, name="service_list"),
    path("services/<slug:slug>/", service.service_detail, name="service_detail"),
    path("services/<slug:slug>/incident/", incident.incident_screen, name="incident"),
    path("services/<slug:slug>/cost/", cost.service_cost, name="service_cost"),
    path("cost/", cost.fleet_cost, name="fleet_cost"),
    path("explain/", explain.explain, name="explain"),
    path("drills/", drills.drill_list, name="drill_list"),
    path("drills/new/", drills.drill_new, name="drill_new"),
    path("drills/<int:pk>/", drills.drill_detail, name="drill_detail"),
    path("drills/<int:pk>/conclude/", drills.drill_conclude, name="drill_conclude"),
    path("services/<slug:slug>/rollbacks/new/", rollback.rollback_new, name="rollback_new"),
    path(
        "services/<slug:slug>/rollbacks/<int:pk>/",
        rollback.rollback_detail,
        name="rollback_detail",
    ),
    path(
        "services/<slug:slug>/rollbacks/<int:pk>/confirm/",
        rollback.rollback_confirm,
        name="rollback_confirm",
    ),
    path(
        "services/<slug:slug>/rollbacks/<int:pk>/caches/",
        rollback.rollback_caches,
        name="rollback_caches",
    ),
    path(
        "services/<slug:slug>/rollbacks/<int:pk>/reverify/",
        verification.rollback_reverify,
        name="rollback_reverify",
    ),
    path("services/<slug:slug>/verify-target/", verification.verify_target, name="verify_target"),
    path(
        "services/<slug:slug>/unauthorized/<int:pk>/reconcile/",
        rollback.unauthorized_reconcile,
        name="unauthorized_reconcile",
    ),
    path(
        "services/<slug:slug>/gateway-policy/",
        gateway_policy.gateway_policy,
        name="gateway_policy",
    ),
    path(
        "services/<slug:slug>/gateway-policy/<int:version>/",
        gateway_policy.gateway_policy_version,
        name="gateway_policy_version",
    ),
    path(
        "services/<slug:slug>/gateway-policy/<int:version>/release/",
        gateway_policy.gateway_policy_release,
        name="gateway_policy_release",
    ),
    path("services/<slug:slug>/gateway/check/", gateway_check.gateway_check, name="gateway_check"),
    path("services/<slug:slug>/runbook/", rollback.runbook, name="runbook"),
    path(
        "services/<slug:slug>/runbook/playbooks/<slug:mode>/",
        rollback.playbook_edit,
        name="playbook_edit",
    ),
    path(
        "services/<slug:slug>/runbook/degradation/<slug:task_type>/",
        rollback.degradation_edit,
        name="degradation_edit",
    ),
    path("search/", incident.search, name="search"),
    path("services/<slug:slug>/releases/new/", release_form.release_new, name="release_new"),
    path(
        "services/<slug:slug>/releases/new/gateway-policy/",
        release_policy.release_new_policy,
        name="release_new_policy",
    ),
    path("releases/", release_list.release_list, name="release_list"),
    path("releases/new/", release_list.release_new_pick, name="release_new_pick"),
    path("releases/waiting/", release_list.waiting_for_me, name="waiting_for_me"),
    path("releases/<int:pk>/", release_detail.release_detail, name="release_detail"),
    path("releases/<int:pk>/edit/", release_form.release_edit, name="release_edit"),
    path("releases/<int:pk>/gateway-policy/", release_policy.release_policy, name="release_policy"),
    path("releases/<int:pk>/gates/", release_form.release_gates_panel, name="release_gates_panel"),
    path("releases/<int:pk>/signoffs/", release_detail.release_signoff, name="release_signoff"),
    path("releases/<int:pk>/waivers/", release_detail.release_waiver, name="release_waiver"),
    path("releases/<int:pk>/comments/", release_detail.release_comment, name="release_comment"),
    path("releases/<int:pk>/change-record/", audit.change_record, name="change_record"),
    path(
        "releases/<int:pk>/verify-target/",
        verification.release_verify_target,
        name="release_verify_target",
    ),
    path("reviews/", reviews.review_list, name="review_list"),
    path("reviews/mine/", reviews.my_reviews, name="my_reviews"),
    path("reviews/<int:pk>/", reviews.review_detail, name="review_detail"),
    path("reviews/<int:pk>/checklist/", reviews.review_checklist, name="review_checklist"),
    path("reviews/<int:pk>/start/", reviews.review_start, name="review_start"),
    path("reviews/<int:pk>/conclude/", reviews.review_conclude, name="review_conclude"),
    path("reviews/<int:pk>/assign/", reviews.review_reassign, name="review_reassign"),
    path(
        "reviews/actions/<int:pk>/done/",
        reviews.review_action_done,
        name="review_action_done",
    ),
    path("audit/", audit.audit, name="audit"),
    path("audit/exports/", audit.export_list, name="export_list"),
    path("audit/exports/new/", audit.export_request, name="export_request"),
    path("audit/exports/<int:pk>/", audit.export_detail, name="export_detail"),
    path("audit/exports/<int:pk>/download/", audit.export_download, name="export_download"),
    path("audit/exports/<int:pk>/file/<str:token>/", audit.export_file, name="export_file"),
    path("webhooks/", webhooks.webhook_list, name="webhook_list"),
    path("webhooks/new/", webhooks.webhook_new, name="webhook_new"),
    path("webhooks/<int:pk>/", webhooks.webhook_detail, name="webhook_detail"),
    path("webhooks/<int:pk>/pause/", webhooks.webhook_pause, name="webhook_pause"),
    path("webhooks/<int:pk>/resume/", webhooks.webhook_resume, name="webhook_resume"),
    path("webhooks/<int:pk>/delete/", webhooks.webhook_delete, name="webhook_delete"),
    path(
        "webhooks/<int:pk>/deliveries/<int:delivery_id>/resend/",
        webhooks.webhook_resend,
        name="webhook_resend",
    ),
    path(
        "releases/<int:pk>/observations/",
        rollout.release_observation,
        name="release_observation",
    ),
    path("releases/<int:pk>/close/", rollout.release_close, name="release_close"),
    path(
        "releases/<int:pk>/rollout/<slug:action>/",
        rollout.rollout_action,
        name="rollout_action",
    ),
    path("releases/<int:pk>/analysis/pause/", analysis.analysis_pause, name="analysis_pause"),
    path("releases/<int:pk>/analysis/resume/", analysis.analysis_resume, name="analysis_resume"),
    path(
        "releases/<int:pk>/<slug:action>/",
        release_detail.release_transition,
        name="release_transition",
    ),
]
