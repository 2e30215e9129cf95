"""One router for the whole REST API, mounted under /api/."""

from django.urls import path
from rest_framework.routers import DefaultRouter

from ledger.api import events as ledger_events
from ledger.api import evidence as ledger_evidence
from ledger.api import gateway as ledger_gateway
from ledger.api import otlp as ledger_otlp
from ledger.api import price_sheets as ledger_price_sheets
from ledger.api import registry as ledger_registry
from ledger.api import run_evidence as ledger_run_evidence
from ledger.api import signing as ledger_signing
from releases.audit.api import exports as releases_exports
from releases.drills import api as releases_drills
from releases.explain import api as releases_explain
from releases.gateway import api as releases_gateway
from releases.governance.api import releases as releases_api
from releases.governance.api import rollbacks as releases_rollbacks
from releases.overview.api import incident as releases_incident
from releases.reviews.api import reviews as releases_reviews
from replay.api import backends as replay_backends
from replay.api import runs as replay_runs
from replay.api import sample_sets as replay_sample_sets

router = DefaultRouter()
router.register("teams", ledger_registry.TeamViewSet, basename="team")
router.register("licenses", ledger_registry.LicenseViewSet, basename="license")
router.register("services", ledger_registry.ServiceViewSet, basename="service")
router.register("assets", ledger_registry.ModelAssetViewSet, basename="asset")
router.register("runtimes", ledger_registry.RuntimeViewSet, basename="runtime")
router.register("revisions", ledger_registry.RevisionViewSet, basename="revision")
router.register("capabilities", ledger_registry.CapabilityViewSet, basename="capability")
router.register("events", ledger_events.EventViewSet, basename="event")
router.register("loadtests", ledger_evidence.LoadTestReportViewSet, basename="loadtest")
router.register("price-sheets", ledger_price_sheets.PriceSheetViewSet, basename="price-sheet")
router.register("run-summaries", ledger_run_evidence.RunSummaryViewSet, basename="run-summary")
router.register("replay/backends", replay_backends.BackendViewSet, basename="replay-backend")
router.register(
    "replay/sample-sets", replay_sample_sets.SampleSetViewSet, basename="replay-sampleset"
)
router.register("replay/runs", replay_runs.RunViewSet, basename="replay-run")
router.register("releases", releases_api.ReleaseViewSet, basename="release")
router.register("exports", releases_exports.ExportViewSet, basename="export")
router.register("webhooks", releases_exports.WebhookSubscriptionViewSet, basename="webhook")
router.register("reviews", releases_reviews.ReviewViewSet, basename="review")
router.register("drills", releases_drills.DrillViewSet, basename="drill")

app_name = "api"
urlpatterns = [
    path("me/", ledger_registry.WhoAmIView.as_view(), name="me"),
    path("otlp/v1/traces", ledger_otlp.traces, name="otlp_traces"),
    path("explain/<str:trace_id>/", releases_explain.ExplainView.as_view(), name="explain"),
    path("ledger/signing-key/", ledger_signing.SigningKeyView.as_view(), name="signing_key"),
    path(
        "services/<slug:slug>/incident/",
        releases_incident.IncidentView.as_view(),
        name="service_incident",
    ),
    path(
        "services/<slug:slug>/rollbacks/",
        releases_rollbacks.ServiceRollbacksView.as_view(),
        name="service_rollbacks",
    ),
    path(
        "rollbacks/<int:pk>/confirm/",
        releases_rollbacks.RollbackConfirmView.as_view(),
        name="rollback_confirm",
    ),
    path(
        "rollbacks/<int:pk>/caches/",
        releases_rollbacks.RollbackCachesView.as_view(),
        name="rollback_caches",
    ),
    path(
        "rollbacks/<int:pk>/reverify/",
        releases_rollbacks.RollbackReverifyView.as_view(),
        name="rollback_reverify",
    ),
    path(
        "services/<slug:slug>/verify-target/",
        releases_rollbacks.ServiceVerifyTargetView.as_view(),
        name="service_verify_target",
    ),
    path(
        "releases/<int:pk>/verify-target/",
        releases_rollbacks.ReleaseVerifyTargetView.as_view(),
        name="release_verify_target",
    ),
    path(
        "revisions/<int:revision_id>/loadtests/",
        ledger_evidence.RevisionLoadTestUploadView.as_view(),
        name="revision_loadtests",
    ),
    path(
        "services/<slug:slug>/gateway-policies/",
        ledger_gateway.GatewayPoliciesView.as_view(),
        name="service_gateway_policies",
    ),
    path(
        "services/<slug:slug>/gateway-policies/<int:version>/",
        ledger_gateway.GatewayPolicyView.as_view(),
        name="service_gateway_policy_version",
    ),
    path(
        "services/<slug:slug>/gateway-policy/",
        ledger_gateway.GatewayPolicyInForceView.as_view(),
        name="service_gateway_policy",
    ),
    path("gateway/litellm/", releases_gateway.GatewayConfigView.as_view(), name="gateway_litellm"),
    path(
        "services/<slug:slug>/gateway/litellm/",
        releases_gateway.ServiceGatewayConfigView.as_view(),
        name="service_gateway_litellm",
    ),
    path(
        "services/<slug:slug>/run-summaries/",
        ledger_run_evidence.ServiceRunSummariesView.as_view(),
        name="service_run_summaries",
    ),
    path(
        "services/<slug:slug>/run-summaries/<str:date>/breakdown/",
        ledger_run_evidence.ServiceRunBreakdownView.as_view(),
        name="service_run_breakdown",
    ),
    *router.urls,
]
