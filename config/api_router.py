"""One router for the whole REST API, mounted under /api/."""

from django.urls import path
from rest_framework.routers import DefaultRouter

from ledger.api import events as ledger_events
from ledger.api import evidence as ledger_evidence
from ledger.api import registry as ledger_registry
from releases.api import releases as releases_api
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
router.register("replay/backends", replay_backends.BackendViewSet, basename="replay-backend")
router.register(
    "replay/sample-sets", replay_sample_sets.SampleSetViewSet, basename="replay-sampleset"
)
router.register("replay/runs", replay_runs.RunViewSet, basename="replay-run")
router.register("releases", releases_api.ReleaseViewSet, basename="release")

app_name = "api"
urlpatterns = [
    path("me/", ledger_registry.WhoAmIView.as_view(), name="me"),
    path(
        "revisions/<int:revision_id>/loadtests/",
        ledger_evidence.RevisionLoadTestUploadView.as_view(),
        name="revision_loadtests",
    ),
    *router.urls,
]
