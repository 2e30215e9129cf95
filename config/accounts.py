"""Password reset by email: Django's own views, with templates in the site's layout
(templates/registration/password_reset_*.html).

The email carries a one-time link (Django's token: it stops working once the
password changes, and after PASSWORD_RESET_TIMEOUT). The confirmation page moves
the token from the URL into the session at once and redirects, so the token
does not stay in the address bar or in a Referer.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.urls import path


class PasswordResetView(auth_views.PasswordResetView):
    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context["timeout_minutes"] = settings.PASSWORD_RESET_TIMEOUT // 60
        return context


urlpatterns = [
    path("password-reset/", PasswordResetView.as_view(), name="password_reset"),
    path(
        "password-reset/sent/",
        auth_views.PasswordResetDoneView.as_view(),
        name="password_reset_done",
    ),
    path(
        "reset/<uidb64>/<token>/",
        auth_views.PasswordResetConfirmView.as_view(),
        name="password_reset_confirm",
    ),
    path(
        "reset/done/",
        auth_views.PasswordResetCompleteView.as_view(),
        name="password_reset_complete",
    ),
]
