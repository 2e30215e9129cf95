"""Settings of the test provider, from the environment the suite gives its process."""

from __future__ import annotations

import os
from pathlib import Path

DATA_DIR = Path(os.environ["PROVIDER_DATA_DIR"])
ISSUER = os.environ["PROVIDER_ISSUER"]

SECRET_KEY = "test-only-provider-secret-key"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "oauth2_provider",
    "tests.support.oidc_provider",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
ROOT_URLCONF = "tests.support.oidc_provider.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
            ]
        },
    }
]
DATABASES = {
    "default": {"ENGINE": "django.db.backends.sqlite3", "NAME": DATA_DIR / "provider.sqlite3"}
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
USE_TZ = True
LOGIN_URL = "/accounts/login/"
# The ledger and this provider both run on 127.0.0.1 (other ports): cookies do not
# tell ports apart, so each keeps its session under its own name.
SESSION_COOKIE_NAME = "provider_sessionid"
CSRF_COOKIE_NAME = "provider_csrftoken"

OAUTH2_PROVIDER = {
    "OIDC_ENABLED": True,
    "OIDC_RSA_PRIVATE_KEY": Path(os.environ["PROVIDER_RSA_KEY_FILE"]).read_text(),
    "OIDC_ISS_ENDPOINT": ISSUER,
    "PKCE_REQUIRED": True,
    "OIDC_RP_INITIATED_LOGOUT_ENABLED": True,
    "OIDC_RP_INITIATED_LOGOUT_ALWAYS_PROMPT": False,
    "OAUTH2_VALIDATOR_CLASS": "tests.support.oidc_provider.validators.GroupsValidator",
    "SCOPES": {
        "openid": "OpenID Connect",
        "profile": "Name and username",
        "email": "E-mail address",
        "groups": "Group memberships",
    },
}
