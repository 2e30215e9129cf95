from django.contrib import admin
from django.urls import include, path
from django.utils.translation import gettext_lazy
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from config import health, metrics
from ledger.oidc import views as oidc_views
from releases.overview.views import home

urlpatterns = [
    path("", home.home, name="home"),
    path("", include("releases.urls")),
    path("", include("ledger.urls")),
    path("replay/", include("replay.urls")),
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", metrics.metrics_view, name="metrics"),
    path("accounts/login/", oidc_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", oidc_views.LogoutView.as_view(), name="logout"),
    # Sign-in with the identity provider (404 while OIDC_ISSUER is unset).
    path("oidc/", include("ledger.oidc.urls")),
    path("accounts/", include("config.accounts")),
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="api_schema"),
    # The split view serves its start-up script from a URL: the CSP refuses inline ones.
    path(
        "api/docs/",
        SpectacularSwaggerSplitView.as_view(
            url_name="api_schema", template_name="api/swagger_ui.html"
        ),
        name="api_docs",
    ),
    path("api/", include("config.api_router")),
]

# Under /api/ these answer JSON; elsewhere Django's HTML pages (lib/errors.py).
handler400 = "lib.errors.bad_request"
handler403 = "lib.errors.permission_denied"
handler404 = "lib.errors.page_not_found"
handler500 = "lib.errors.server_error"

admin.site.site_header = gettext_lazy("Inference Release Ledger administration")
admin.site.site_title = gettext_lazy("Ledger admin")
