"""Pages of the releases app and those composing all three apps (home is mounted at
the root as `home` in config/urls.py). URL names equal the view functions."""

from django.urls import path

from releases.views import incident, release_detail, release_form, release_list, service

app_name = "releases"

urlpatterns = [
    path("services/<slug:slug>/", service.service_detail, name="service_detail"),
    path("services/<slug:slug>/incident/", incident.incident_screen, name="incident"),
    path("search/", incident.search, name="search"),
    path("services/<slug:slug>/releases/new/", release_form.release_new, name="release_new"),
    path("releases/", release_list.release_list, name="release_list"),
    path("releases/new/", release_list.release_new_pick, name="release_new_pick"),
    path("releases/waiting/", release_list.waiting_for_me, name="waiting_for_me"),
    path("releases/<int:pk>/", release_detail.release_detail, name="release_detail"),
    path("releases/<int:pk>/edit/", release_form.release_edit, name="release_edit"),
    path("releases/<int:pk>/gates/", release_form.release_gates_panel, name="release_gates_panel"),
    path("releases/<int:pk>/signoffs/", release_detail.release_signoff, name="release_signoff"),
    path("releases/<int:pk>/waivers/", release_detail.release_waiver, name="release_waiver"),
    path("releases/<int:pk>/comments/", release_detail.release_comment, name="release_comment"),
    path(
        "releases/<int:pk>/<slug:action>/",
        release_detail.release_transition,
        name="release_transition",
    ),
]
