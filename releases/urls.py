"""Pages of the releases app and those composing all three apps (home is mounted at
the root as `home` in config/urls.py). URL names equal the view functions."""

from django.urls import path

from releases.views import incident, service

app_name = "releases"

urlpatterns = [
    path("services/<slug:slug>/", service.service_detail, name="service_detail"),
    path("services/<slug:slug>/incident/", incident.incident_screen, name="incident"),
    path("search/", incident.search, name="search"),
]
