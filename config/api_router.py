"""One router for the whole REST API, mounted under /api/."""

from django.urls import path
from rest_framework.routers import DefaultRouter

from ledger import api as ledger_api

router = DefaultRouter()

app_name = "api"
urlpatterns = [
    path("me/", ledger_api.WhoAmIView.as_view(), name="me"),
    *router.urls,
]
