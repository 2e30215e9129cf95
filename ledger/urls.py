"""Registry pages. URL names equal the view functions."""

from django.urls import path

from ledger.views import (
    assets,
    catalog,
    diff,
    events,
    licenses,
    loadtests,
    preferences,
    price_sheets,
    revisions,
    runtimes,
    serving,
)

app_name = "ledger"

urlpatterns = [
    path("preferences/", preferences.preferences, name="preferences"),
    path("preferences/language", preferences.set_language, name="set_language"),
    path("services/new", catalog.service_create, name="service_create"),
    path("services/new/validate", catalog.service_create_validate, name="service_create_validate"),
    path("services/<slug:slug>/edit", catalog.service_edit, name="service_edit"),
    path(
        "services/<slug:slug>/edit/validate",
        catalog.service_edit_validate,
        name="service_edit_validate",
    ),
    path("services/<slug:slug>/revisions/new", revisions.revision_create, name="revision_create"),
    path(
        "services/<slug:slug>/revisions/new/validate",
        revisions.revision_create_validate,
        name="revision_create_validate",
    ),
    path(
        "services/<slug:slug>/r<int:number>/",
        revisions.revision_detail,
        name="revision_detail",
    ),
    path(
        "services/<slug:slug>/r<int:number>/cyclonedx.json",
        revisions.revision_cyclonedx,
        name="revision_cyclonedx",
    ),
    path("services/<slug:slug>/diff/", diff.revision_diff_pick, name="revision_diff_pick"),
    path("services/<slug:slug>/serving/", serving.serving_history, name="serving_history"),
    path(
        "services/<slug:slug>/diff/<int:a>/<int:b>/",
        diff.revision_diff,
        name="revision_diff",
    ),
    path(
        "services/<slug:slug>/r<int:number>/new-revision",
        revisions.revision_new_from,
        name="revision_new_from",
    ),
    path(
        "services/<slug:slug>/r<int:number>/capabilities/new",
        revisions.capability_declare,
        name="capability_declare",
    ),
    path(
        "services/<slug:slug>/r<int:number>/capabilities/new/validate",
        revisions.capability_declare_validate,
        name="capability_declare_validate",
    ),
    path(
        "services/<slug:slug>/r<int:number>/loadtests/new",
        loadtests.loadtest_upload,
        name="loadtest_upload",
    ),
    path(
        "services/<slug:slug>/r<int:number>/loadtests/preview",
        loadtests.loadtest_preview,
        name="loadtest_preview",
    ),
    path(
        "services/<slug:slug>/r<int:number>/loadtests/<int:pk>/",
        loadtests.loadtest_detail,
        name="loadtest_detail",
    ),
    path(
        "services/<slug:slug>/r<int:number>/loadtests/<int:pk>/raw",
        loadtests.loadtest_raw,
        name="loadtest_raw",
    ),
    path("assets/", assets.asset_list, name="asset_list"),
    path("assets/new", assets.asset_create, name="asset_create"),
    path("assets/new/validate", assets.asset_create_validate, name="asset_create_validate"),
    path("assets/<int:pk>/", assets.asset_detail, name="asset_detail"),
    path("assets/<int:pk>/edit", assets.asset_edit, name="asset_edit"),
    path("assets/<int:pk>/edit/validate", assets.asset_edit_validate, name="asset_edit_validate"),
    path("assets/<int:pk>/deprecate", assets.asset_deprecate, name="asset_deprecate"),
    path("assets/<int:pk>/retire", assets.asset_retire, name="asset_retire"),
    path(
        "assets/<int:pk>/license-review",
        licenses.asset_license_review,
        name="asset_license_review",
    ),
    path(
        "assets/<int:pk>/license-acceptance",
        licenses.asset_license_accept,
        name="asset_license_accept",
    ),
    path("runtimes/", runtimes.runtime_list, name="runtime_list"),
    path("runtimes/new", runtimes.runtime_create, name="runtime_create"),
    path("runtimes/new/validate", runtimes.runtime_create_validate, name="runtime_create_validate"),
    path("runtimes/<slug:name>/", runtimes.runtime_detail, name="runtime_detail"),
    path("runtimes/<slug:name>/edit", runtimes.runtime_edit, name="runtime_edit"),
    path(
        "runtimes/<slug:name>/edit/validate",
        runtimes.runtime_edit_validate,
        name="runtime_edit_validate",
    ),
    path("price-sheets/", price_sheets.price_sheet_list, name="price_sheet_list"),
    path("events/", events.event_list, name="event_list"),
    path("events/verify", events.event_verify, name="event_verify"),
    path("events/signing-keys.pem", events.signing_keys_pem, name="signing_keys_pem"),
]
