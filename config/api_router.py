"""One router for the whole REST API, mounted under /api/."""

from django.urls import path
from rest_framework.routers import DefaultRouter

from ledger import api as ledger_api
from ledger import api_evidence
from replay import api as replay_api

router = DefaultRouter()
router.register("teams", ledger_api.TeamViewSet, basename="team")
router.register("licenses", ledger_api.LicenseViewSet, basename="license")
router.register("services", ledger_api.ServiceViewSet, basename="service")
router.register("assets", ledger_api.ModelAssetViewSet, basename="asset")
router.register("runtimes", ledger_api.RuntimeViewSet, basename="runtime")
router.register("revisions", ledger_api.RevisionViewSet, basename="revision")
router.register("capabilities", ledger_api.CapabilityViewSet, basename="capability")
router.register("events", ledger_api.EventViewSet, basename="event")
router.register("loadtests", api_evidence.LoadTestReportViewSet, basename="loadtest")
router.register("replay/backends", replay_api.BackendViewSet, basename="replay-backend")
router.register("replay/sample-sets", replay_api.SampleSetViewSet, basename="replay-sampleset")
router.register("replay/runs", replay_api.RunViewSet, basename="replay-run")

app_name = "api"
urlpatterns = [
    path("me/", ledger_api.WhoAmIView.as_view(), name="me"),
    path(
        "revisions/<int:revision_id>/loadtests/",
        api_evidence.RevisionLoadTestUploadView.as_view(),
        name="revision_loadtests",
    ),
    *router.urls,
]
