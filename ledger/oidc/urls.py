from django.urls import path

from ledger.oidc import views

app_name = "oidc"

# /oidc/callback/ is the redirect URI registered at the provider (docs/operations.md).
urlpatterns = [
    path("authenticate/", views.AuthenticateView.as_view(), name="authenticate"),
    path("callback/", views.CallbackView.as_view(), name="callback"),
    path("no-role/", views.no_role, name="no_role"),
]
