"""One router for the whole REST API, mounted under /api/."""

from django.urls import path
from rest_framework.routers import DefaultRouter

from ledger import api as ledger_api

router = DefaultRouter()
router.register("teams", ledger_api.TeamViewSet, basename="team")
router.register("licenses", ledger_api.LicenseViewSet, basename="license")
router.register("services", ledger_api.ServiceViewSet, basename="service")
router.register("assets", ledger_api.ModelAssetViewSet, basename="asset")
router.register("runtimes", ledger_api.RuntimeViewSet, basename="runtime")
router.register("revisions", ledger_api.RevisionViewSet, basename="revision")
router.register("capabilities", ledger_api.CapabilityViewSet, basename="capability")
router.register("events", ledger_api.EventViewSet, basename="event")

app_name = "api"
urlpatterns = [
    path("me/", ledger_api.WhoAmIView.as_view(), name="me"),
    *router.urls,
]
