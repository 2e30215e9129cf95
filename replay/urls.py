"""Replay pages under /replay/. URL names equal the view functions."""

from django.urls import path

from replay.views import backends, runs, samplesets, schedules

app_name = "replay"

urlpatterns = [
    path("", backends.backend_list, name="backend_list"),
    path("backends/new", backends.backend_create, name="backend_create"),
    path("backends/<slug:name>/", backends.backend_detail, name="backend_detail"),
    path("backends/<slug:name>/edit", backends.backend_edit, name="backend_edit"),
    path("backends/<slug:name>/run", backends.backend_run, name="backend_run"),
    path("backends/<slug:name>/probe", backends.backend_probe, name="backend_probe"),
    path("backends/<slug:name>/schedules/new", schedules.schedule_create, name="schedule_create"),
    path("schedules/<int:pk>/edit", schedules.schedule_edit, name="schedule_edit"),
    path("schedules/<int:pk>/toggle", schedules.schedule_toggle, name="schedule_toggle"),
    path("schedules/<int:pk>/delete", schedules.schedule_delete, name="schedule_delete"),
    path("sample-sets/", samplesets.sampleset_list, name="sampleset_list"),
    path("sample-sets/import", samplesets.sampleset_import, name="sampleset_import"),
    path("sample-sets/<slug:name>/", samplesets.sampleset_latest, name="sampleset_latest"),
    path(
        "sample-sets/<slug:name>/v<int:version>/",
        samplesets.sampleset_detail,
        name="sampleset_detail",
    ),
    path(
        "sample-sets/<slug:name>/v<int:version>/export",
        samplesets.sampleset_export,
        name="sampleset_export",
    ),
    path("runs/", runs.run_list, name="run_list"),
    path("runs/compare", runs.run_compare, name="run_compare"),
    path("runs/<int:pk>/", runs.run_detail, name="run_detail"),
    path("runs/<int:pk>/progress", runs.run_progress, name="run_progress"),
]
