"""Settings for the Inference Release Ledger, read from the environment.

Unset variables fall back to the embedded defaults (one machine, no servers):
a SQLite file, Celery's filesystem broker and a local media folder, all under
DATA_DIR. Every variable is listed in .env.example.
"""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

import dj_database_url
from celery.schedules import crontab
from csp.constants import NONCE, NONE, SELF
from django.core.exceptions import ImproperlyConfigured

from lib.allowlist import parse_entries
from lib.env import (
    READ_NAMES,
    env_bool,
    env_int,
    env_list,
    env_list_or_none,
    env_rate,
    env_str,
    load_local_env,
)
from lib.group_map import parse_group_map, provider_origin

BASE_DIR = Path(__file__).resolve().parent.parent
# Development only: the file `make run` writes (empty LEDGER_LOCAL_ENV: read none).
LOCAL_ENV_FILE = env_str("LEDGER_LOCAL_ENV", str(BASE_DIR / "var" / "local.env"))
LOCAL_ENV_SET = load_local_env(Path(LOCAL_ENV_FILE)) if LOCAL_ENV_FILE else []
DATA_DIR = Path(env_str("DATA_DIR", str(BASE_DIR / "var"))).resolve()

DEBUG = env_bool("DEBUG", default=False)

DEV_SECRET_KEY = "django-insecure-development-only-key-do-not-use-in-production"  # noqa: S105
SECRET_KEY = env_str("SECRET_KEY", DEV_SECRET_KEY)
if not DEBUG and SECRET_KEY == DEV_SECRET_KEY:
    raise ImproperlyConfigured(
        "SECRET_KEY is the development key while DEBUG is off. Set SECRET_KEY (or "
        "SECRET_KEY_FILE) to a long random value, or DEBUG=true for local development."
    )

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    "rest_framework.authtoken",
    "axes",
    "csp",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_filters",
    "django_htmx",
    "template_partials",
    "django_celery_beat",
    "pgtrigger",
    # Stacked: a lower app never imports a higher one (docs/architecture.md).
    "ledger",
    "replay",
    "releases",
]

MIDDLEWARE = [
    # First: the request id for every later line, then the time of all that follows.
    "lib.logs.RequestContextMiddleware",
    "lib.metrics.RequestMetricsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    # Above WhiteNoise: compresses what it serves uncompressed (the finders of
    # `make run` and the tests; the manifest storage serves its own .gz, which
    # this leaves alone), and the pages; not the API (lib/compression.py).
    "lib.compression.PagesGZipMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "lib.i18n.UserPreferencesMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "lib.errors.UnstorableRequestMiddleware",
    "lib.errors.MethodNotAllowedPageMiddleware",
    "lib.errors.NotFoundPageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "lib.errors.ApiErrorsMiddleware",
    # Last: turns the lockout axes flags during authenticate() into the lockout page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "django.template.context_processors.i18n",
                "django.template.context_processors.tz",
            ],
        },
    },
]

# Database: DATABASE_URL (postgres://user:pass@host:5432/name) or a SQLite file.
DATABASES = {
    "default": dj_database_url.parse(
        env_str("DATABASE_URL", f"sqlite:///{DATA_DIR / 'db.sqlite3'}"),
        conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 60),
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The embedded worker and the web process share the file: WAL lets readers
    # proceed during a write, IMMEDIATE makes writers queue instead of failing
    # with "database is locked" halfway through a transaction.
    DATABASES["default"]["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    DATABASES["default"]["CONN_MAX_AGE"] = 0
elif DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    DATABASES["default"].setdefault("OPTIONS", {})
    DATABASES["default"]["OPTIONS"]["connect_timeout"] = env_int("DATABASE_CONNECT_TIMEOUT", 5)
    # Prepared statements: psycopg prepares a query the second time a connection runs
    # it, and PostgreSQL reuses its plan instead of planning it again (the incident
    # screen's two widest queries took 6 ms to plan and under 1 ms to run). They need
    # server-side binding. Turn them off behind a pooler in transaction mode, where a
    # statement prepared on one server connection is missing on the next.
    if env_bool("DATABASE_PREPARED_STATEMENTS", default=True):
        DATABASES["default"]["OPTIONS"].update(server_side_binding=True, prepare_threshold=1)
# Privilege separation: the app connects as a role that owns nothing (DATABASE_URL);
# migrations run as the owner of the tables, through the "owner" alias
# (`migrate --database owner`, then `grant_app_role --database owner ROLE`).
DATABASE_MIGRATE_URL = env_str("DATABASE_MIGRATE_URL")
if DATABASE_MIGRATE_URL:
    DATABASES["owner"] = {
        **DATABASES["default"],
        **dj_database_url.parse(DATABASE_MIGRATE_URL, conn_max_age=0),
        "TEST": {"MIRROR": "default"},
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# axes first: it refuses a locked-out username or address before a password is checked.
# Passwords (refused for all but BREAK_GLASS_USERNAME when LOCAL_LOGIN is off), then the
# identity provider's code flow (inert while OIDC_ISSUER is unset): ledger/oidc/.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "ledger.oidc.backends.LocalPasswordBackend",
    "ledger.oidc.backends.ProviderBackend",
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

# English and 简体中文: chosen by the user's preference, else the language switcher's
# cookie, else the browser's Accept-Language (lib/i18n.py). Times are stored in UTC
# and shown in the user's zone: their preference, else the browser's (a cookie set
# by static/js/timezone.js), else TIME_ZONE.
LANGUAGE_CODE = "en"
LANGUAGES = [("en", "English"), ("zh-hans", "简体中文")]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = env_str("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True
DATETIME_FORMAT = "Y-m-d H:i T"
DATE_FORMAT = "Y-m-d"

# Files: S3-compatible object storage when a bucket is named, a local folder otherwise.
STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]
MEDIA_URL = "media/"
MEDIA_ROOT = DATA_DIR / "media"
FILE_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024 * 1024
# Run evidence: the most breakdown rows (one per tenant, task type and backend) a day's push
# may carry; a push with more is refused with its count before any row is read.
RUN_BREAKDOWN_MAX_ROWS = env_int("RUN_BREAKDOWN_MAX_ROWS", 10_000)
if RUN_BREAKDOWN_MAX_ROWS < 1:
    raise ImproperlyConfigured(
        f"RUN_BREAKDOWN_MAX_ROWS={RUN_BREAKDOWN_MAX_ROWS} must be at least 1."
    )
# The largest request body (Django refuses more, unread). A breakdown row is about 550
# bytes of JSON, 1.6 kB with the longest names and numbers, pretty-printed: a push of
# RUN_BREAKDOWN_MAX_ROWS rows must fit (16 MB for 10,000).
DATA_UPLOAD_MAX_MEMORY_SIZE = max(5 * 1024 * 1024, RUN_BREAKDOWN_MAX_ROWS * 1600)

AWS_STORAGE_BUCKET_NAME = env_str("AWS_STORAGE_BUCKET_NAME")
AWS_S3_ENDPOINT_URL = env_str("AWS_S3_ENDPOINT_URL") or None
AWS_S3_REGION_NAME = env_str("AWS_S3_REGION_NAME", "us-east-1")
AWS_ACCESS_KEY_ID = env_str("AWS_ACCESS_KEY_ID") or None
AWS_SECRET_ACCESS_KEY = env_str("AWS_SECRET_ACCESS_KEY") or None
AWS_DEFAULT_ACL = None
AWS_QUERYSTRING_AUTH = True
AWS_S3_SIGNATURE_VERSION = "s3v4"
AWS_QUERYSTRING_EXPIRE = env_int("AWS_QUERYSTRING_EXPIRE", 600)

_default_storage: dict[str, object]
if AWS_STORAGE_BUCKET_NAME:
    _default_storage = {"BACKEND": "storages.backends.s3.S3Storage"}
else:
    _default_storage = {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": MEDIA_ROOT},
    }
# The manifest needs collectstatic; development and the test suite serve
# straight from the finders instead.
STATIC_MANIFEST = env_bool("STATIC_MANIFEST", default=not DEBUG)
STORAGES = {
    "default": _default_storage,
    "staticfiles": {
        "BACKEND": (
            "whitenoise.storage.CompressedManifestStaticFilesStorage"
            if STATIC_MANIFEST
            else "django.contrib.staticfiles.storage.StaticFilesStorage"
        ),
    },
}
WHITENOISE_USE_FINDERS = WHITENOISE_AUTOREFRESH = not STATIC_MANIFEST
# Served at the site's root: /favicon.ico, which browsers ask for on their own.
WHITENOISE_ROOT = BASE_DIR / "static" / "root"

# Celery: CELERY_BROKER_URL (redis://host:6379/0) or a broker that needs no server.
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "filesystem://")
CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {}
_celery_dir = DATA_DIR / "celery"
if CELERY_BROKER_URL.startswith("filesystem://"):
    _queue_dir = _celery_dir / "queue"
    # kombu's filesystem transport reads and writes one folder; the control
    # folder is what lets `celery inspect ping` work against it.
    for folder in (_queue_dir, _celery_dir / "control", _celery_dir / "results"):
        folder.mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_queue_dir),
        "data_folder_out": str(_queue_dir),
        "control_folder": str(_celery_dir / "control"),
        "polling_interval": 0.1,
    }
    _default_result_backend = f"file://{_celery_dir / 'results'}"
elif CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
    _default_result_backend = CELERY_BROKER_URL
else:
    _default_result_backend = ""
CELERY_RESULT_BACKEND = env_str("CELERY_RESULT_BACKEND", _default_result_backend) or None
CELERY_RESULT_EXPIRES = 24 * 3600
CELERY_TASK_DEFAULT_QUEUE = env_str("CELERY_TASK_DEFAULT_QUEUE", "celery")
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 900)
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", 840)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TIMEZONE = TIME_ZONE
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"

# Cache: CACHE_URL (redis://host:6379/2) shares the API throttles' counts between
# processes and machines; without it each process counts on its own.
CACHE_URL = env_str("CACHE_URL")
if CACHE_URL.startswith(("redis://", "rediss://")):
    CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": CACHE_URL}
    }
elif CACHE_URL:
    raise ImproperlyConfigured(f"CACHE_URL={CACHE_URL!r} must be a redis:// or rediss:// URL.")
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

# Guessing limits (lib/throttling.py), per client address as NUM_PROXIES reads it:
# the number of proxies in front of the app that append to X-Forwarded-For (0: only
# the peer's address counts; behind a proxy that leaves every client sharing its one).
NUM_PROXIES = env_int("NUM_PROXIES", 0)
# Failed passwords lock sign-in until LOGIN_COOLOFF_MINUTES after the last attempt:
# LOGIN_FAILURE_LIMIT in a row lock one username from one address (not the others
# there), LOGIN_ADDRESS_FAILURE_LIMIT lock an address for every username. axes has
# one limit; lib.throttling.SignInHandler holds the second group to the second.
AXES_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 5)
LOGIN_ADDRESS_FAILURE_LIMIT = env_int("LOGIN_ADDRESS_FAILURE_LIMIT", 50)
_login_cooloff_minutes = env_int("LOGIN_COOLOFF_MINUTES", 15)
AXES_COOLOFF_TIME = timedelta(minutes=_login_cooloff_minutes)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"], "ip_address"]
AXES_HANDLER = "lib.throttling.SignInHandler"
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "lib.throttling.lockout_response"
AXES_CLIENT_IP_CALLABLE = "lib.throttling.client_ip"
if NUM_PROXIES < 0:
    raise ImproperlyConfigured(f"NUM_PROXIES={NUM_PROXIES} must be 0 or more.")
for _name, _value in (
    ("LOGIN_FAILURE_LIMIT", AXES_FAILURE_LIMIT),
    ("LOGIN_COOLOFF_MINUTES", _login_cooloff_minutes),
):
    if _value < 1:
        raise ImproperlyConfigured(f"{_name}={_value} must be at least 1.")
if LOGIN_ADDRESS_FAILURE_LIMIT < AXES_FAILURE_LIMIT:
    raise ImproperlyConfigured(
        f"LOGIN_ADDRESS_FAILURE_LIMIT={LOGIN_ADDRESS_FAILURE_LIMIT} must be at least "
        f"LOGIN_FAILURE_LIMIT={AXES_FAILURE_LIMIT}: the address's ceiling covers every "
        "username there, one username's limit only that one."
    )

# Sign-in with the company's identity provider (OpenID Connect, authorization code flow
# with PKCE, state and nonce; mozilla-django-oidc; ledger/oidc/, docs/operations.md).
# Unset OIDC_ISSUER: passwords only, as before. The provider's endpoints come from its
# discovery document (OIDC_ISSUER/.well-known/openid-configuration), read on first use.
OIDC_ISSUER = env_str("OIDC_ISSUER")
OIDC_CLIENT_ID = env_str("OIDC_CLIENT_ID")
OIDC_CLIENT_SECRET = env_str("OIDC_CLIENT_SECRET")
OIDC_SCOPES = env_str("OIDC_SCOPES", "openid email profile groups")
OIDC_GROUPS_CLAIM = env_str("OIDC_GROUPS_CLAIM", "groups")
OIDC_USERNAME_CLAIM = env_str("OIDC_USERNAME_CLAIM", "preferred_username")
OIDC_PROVIDER_NAME = env_str("OIDC_PROVIDER_NAME", "single sign-on")
OIDC_SIGN_ALGO = env_str("OIDC_SIGN_ALGO", "RS256")
OIDC_TIMEOUT_SECONDS = env_int("OIDC_TIMEOUT_SECONDS", 10)
# Provider group -> {"roles": [...], "teams": [team slugs]}, applied at every sign-in.
_oidc_group_map_raw = env_str("OIDC_GROUP_MAP", "{}")
LOCAL_LOGIN = env_bool("LOCAL_LOGIN", default=True)
BREAK_GLASS_USERNAME = env_str("BREAK_GLASS_USERNAME")
try:
    OIDC_GROUP_MAP = parse_group_map(_oidc_group_map_raw)
except ValueError as _error:
    raise ImproperlyConfigured(f"OIDC_GROUP_MAP: {_error}") from _error
if OIDC_ISSUER:
    if not OIDC_ISSUER.startswith(("https://", "http://")):
        raise ImproperlyConfigured(
            f"OIDC_ISSUER={OIDC_ISSUER!r} is not an https:// URL (the provider's issuer, e.g. "
            "https://keycloak.example.com/realms/acme)."
        )
    # Over plain HTTP anyone on the path could swap the discovery document and its keys,
    # and sign any groups: only a provider on this host, or a development setup, may.
    if OIDC_ISSUER.startswith("http://") and not (
        DEBUG or urlsplit(OIDC_ISSUER).hostname in ("localhost", "127.0.0.1", "::1")
    ):
        raise ImproperlyConfigured(
            f"OIDC_ISSUER={OIDC_ISSUER!r} is plain http://: use the provider's https:// "
            "issuer (http:// is accepted only on loopback or with DEBUG)."
        )
    if not OIDC_CLIENT_ID or not OIDC_CLIENT_SECRET:
        raise ImproperlyConfigured(
            "OIDC_ISSUER is set: set OIDC_CLIENT_ID and OIDC_CLIENT_SECRET (or "
            "OIDC_CLIENT_SECRET_FILE) to the client registered at the provider."
        )
elif not LOCAL_LOGIN:
    raise ImproperlyConfigured(
        "LOCAL_LOGIN=false leaves only the identity provider to sign in with: set OIDC_ISSUER."
    )
if OIDC_TIMEOUT_SECONDS < 1:
    raise ImproperlyConfigured(f"OIDC_TIMEOUT_SECONDS={OIDC_TIMEOUT_SECONDS} must be at least 1.")
# The same, under the names mozilla-django-oidc reads.
OIDC_RP_CLIENT_ID = OIDC_CLIENT_ID
OIDC_RP_CLIENT_SECRET = OIDC_CLIENT_SECRET
OIDC_RP_SCOPES = OIDC_SCOPES
OIDC_RP_SIGN_ALGO = OIDC_SIGN_ALGO
OIDC_TIMEOUT = OIDC_TIMEOUT_SECONDS
OIDC_USE_PKCE = True
OIDC_USE_NONCE = True
# Kept in the session for the provider's sign-out (id_token_hint), never rendered.
OIDC_STORE_ID_TOKEN = True
OIDC_AUTHENTICATION_CALLBACK_URL = "oidc:callback"

# API
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "lib.throttling.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # The API takes JSON (uploads take multipart: their views say so), parsed by
    # DRF's parser refusing what PostgreSQL cannot store (lib/api.py). Form
    # encodings cannot say null, a number or an object, so they are not offered.
    "DEFAULT_PARSER_CLASSES": ["lib.api.JSONParser"],
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    # drf-spectacular's, documenting the refusals (400, 401, 403, 404) too (lib/schema.py).
    "DEFAULT_SCHEMA_CLASS": "lib.schema.AutoSchema",
    # Every exception raised in a view answers JSON, a 500 included (lib/errors.py).
    "EXCEPTION_HANDLER": "lib.errors.api_exception_handler",
    # Per user for a token or a session; anonymous callers per address.
    "DEFAULT_THROTTLE_CLASSES": [
        "rest_framework.throttling.AnonRateThrottle",
        "rest_framework.throttling.UserRateThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": {
        "user": env_rate("API_THROTTLE_USER_RATE", "600/min"),
        "anon": env_rate("API_THROTTLE_ANON_RATE", "60/min"),
        "wrong_token": env_rate("API_WRONG_TOKEN_RATE", "10/min"),
    },
    "NUM_PROXIES": NUM_PROXIES,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Inference Release Ledger API",
    "DESCRIPTION": (
        "Registry and operations ledger of self-hosted LLM inference services. "
        "Authenticate with `Authorization: Token <key>`."
    ),
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    # Request bodies get their own components: read-only fields left out, and
    # minLength 1 where a text field may not be blank.
    "COMPONENT_SPLIT_REQUEST": True,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # The runtime's and the backend's "engine" are one enum: one name for it.
    "ENUM_NAME_OVERRIDES": {
        "RuntimeEngineEnum": "ledger.engines.Engine",
        "ReadinessVerdictEnum": "releases.governance.queries.readiness.VERDICTS",
        "RunVerdictEnum": "replay.models.Run.Verdict",
        "LoadTestSourceEnum": "ledger.models.evidence.LoadTestReport.Source",
        "RunSummarySourceEnum": "ledger.models.run_evidence.RunSummary.Source",
        # An asset's approval state, and the two of them a review may decide.
        "LicenseApprovalEnum": "ledger.models.ModelAsset.LicenseApproval",
        "LicenseReviewDecisionEnum": "ledger.services.licenses.REVIEW_DECISION_CHOICES",
        "ReleaseStateEnum": "releases.models.Release.State",
        # Both caches of a rollback (prefix, response) take the same answers.
        "RollbackCacheAnswerEnum": "releases.models.RollbackEvent.CacheAnswer",
        # The name replay's run state had before releases had a state of their own.
        "StateEnum": "replay.models.Run.State",
        "GateKeyEnum": "releases.policy.GATE_KEYS",
        # Exports and webhooks: a format and states of their own.
        "ExportFormatEnum": "releases.models.Export.Format",
        "ExportStateEnum": "releases.models.Export.State",
        "WebhookSubscriptionStateEnum": "releases.models.WebhookSubscription.State",
        "DeliveryStateEnum": "releases.models.Delivery.State",
        # Periodic reviews.
        "ReviewStateEnum": "releases.models.Review.State",
        "ReviewOutcomeEnum": "releases.models.Review.Outcome",
        "ReviewTriggerKindEnum": "releases.models.ReviewTrigger.Kind",
        "ChecklistKeyEnum": "releases.models.ReviewChecklistItem.Key",
        "ChecklistAnswerEnum": "releases.models.ReviewChecklistItem.Answer",
    },
}

# Security. HTTPS=true behind a TLS-terminating proxy (which sets X-Forwarded-Proto)
# turns on secure cookies, HSTS and the redirect of plain HTTP to HTTPS; the health
# probes stay answerable over plain HTTP inside the network.
HTTPS = env_bool("HTTPS", default=False)
SESSION_COOKIE_SECURE = HTTPS
CSRF_COOKIE_SECURE = HTTPS
if HTTPS:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", default=True)
    SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]
    SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 3600)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=True)
    # "preload" consents to the browsers' preload list; the domain goes on it only
    # when someone submits it (hstspreload.org, which also wants a max-age of a year).
    SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", default=True)
SESSION_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"
# Scripts and styles from this site only, or carrying the response's nonce
# (request.csp_nonce: the API docs' <style>, the periodic-task admin form's script);
# never inline code nor eval. Charts are JSON drawn by static/js/charts.js, htmx runs with
# allowEval off (templates/base.html), plotly's CSS is shipped as files.
# blob: images are plotly's "Download plot as a PNG".
_FORM_ACTION: list[str] = [SELF]
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF, NONCE],
        "style-src": [SELF, NONCE],
        "img-src": [SELF, "data:", "blob:"],
        "object-src": [NONE],
        "base-uri": [NONE],
        "frame-ancestors": [NONE],
        "form-action": _FORM_ACTION,
    },
}
if OIDC_ISSUER:
    # Signing out posts to /accounts/logout/, which redirects to the provider's
    # end_session_endpoint: browsers hold a form's redirects to form-action too.
    _FORM_ACTION.append(provider_origin(OIDC_ISSUER))
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"

LOG_LEVEL = env_str("LOG_LEVEL", "INFO")
# Logs: JSON lines on stdout (python-json-logger), each with the request id and user
# id (lib/logs.py); LOG_FORMAT=console for plain lines (the default with DEBUG).
# manage.py commands log to stderr instead: their stdout is their output (a JSON
# report, an export), which a log line must not break.
LOG_FORMAT = env_str("LOG_FORMAT", "console" if DEBUG else "json")
_LOG_STREAM = "ext://sys.stderr" if Path(sys.argv[0]).name == "manage.py" else "ext://sys.stdout"
if LOG_FORMAT not in ("json", "console"):
    raise ImproperlyConfigured(f"LOG_FORMAT={LOG_FORMAT!r} must be json or console.")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        "context": {"()": "lib.logs.ContextFilter"},
        "one_line_refusals": {"()": "lib.log_filters.OneLineRefusals"},
    },
    "formatters": {
        "console": {"format": "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"},
        "json": {
            "()": "lib.logs.JsonFormatter",
            "fmt": "%(levelname)s %(name)s %(message)s %(request_id)s %(user_id)s",
        },
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "stream": _LOG_STREAM,
            "formatter": LOG_FORMAT,
            "filters": ["context"],
        }
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        # Django's own default gives "django" a console handler of its own under
        # DEBUG, which printed each of its lines twice with the root's.
        "django": {"handlers": ["console"], "level": LOG_LEVEL, "propagate": False},
        # A refusal is one line with its reason, not a traceback (lib/log_filters.py).
        "django.request": {"filters": ["one_line_refusals"]},
        # DEBUG here would log SQL with its parameters: token keys and password hashes.
        "django.db.backends": {"level": "INFO"},
        # httpx logs every request at INFO, synchronously, on the event loop that times
        # replay streams: a line per request in a worker's log, and time in each TTFT.
        "httpx": {"level": "WARNING"},
    },
}

# Metrics (lib/metrics.py): GET /metrics answers loopback clients, and others that
# send `Authorization: Bearer <METRICS_TOKEN>` (empty: loopback only). A loopback
# request carrying a proxy's header needs the token; METRICS_LOOPBACK_WITHOUT_TOKEN
# false asks it of every loopback client (a same-host proxy that adds no header). A
# Celery worker serves its own on WORKER_METRICS_HOST:WORKER_METRICS_PORT (0: not at all).
METRICS_TOKEN = env_str("METRICS_TOKEN")
METRICS_LOOPBACK_WITHOUT_TOKEN = env_bool("METRICS_LOOPBACK_WITHOUT_TOKEN", True)
WORKER_METRICS_HOST = env_str("WORKER_METRICS_HOST", "127.0.0.1")
WORKER_METRICS_PORT = env_int("WORKER_METRICS_PORT", 0)

# Mail (password reset): SMTP when EMAIL_HOST is set; otherwise the console backend
# prints messages on stdout, for one machine in development.
EMAIL_HOST = env_str("EMAIL_HOST")
EMAIL_BACKEND = (
    "django.core.mail.backends.smtp.EmailBackend"
    if EMAIL_HOST
    else "django.core.mail.backends.console.EmailBackend"
)
EMAIL_PORT = env_int("EMAIL_PORT", 587)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", default=True)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "ledger@localhost")
PASSWORD_RESET_TIMEOUT = env_int("PASSWORD_RESET_TIMEOUT_MINUTES", 60) * 60

# Load-test evidence. An upload over the limit is refused before it is stored.
LOADTEST_MAX_UPLOAD_BYTES = env_int("LOADTEST_MAX_UPLOAD_BYTES", 200 * 1024 * 1024)
# A report older than its service tier's limit is stale: release gates do not accept it.
EVIDENCE_MAX_AGE_DAYS = {
    "production": env_int("EVIDENCE_MAX_AGE_DAYS_PRODUCTION", 90),
    "internal": env_int("EVIDENCE_MAX_AGE_DAYS_INTERNAL", 180),
    "experimental": env_int("EVIDENCE_MAX_AGE_DAYS_EXPERIMENTAL", 365),
}
if LOADTEST_MAX_UPLOAD_BYTES < 1:
    raise ImproperlyConfigured(
        f"LOADTEST_MAX_UPLOAD_BYTES={LOADTEST_MAX_UPLOAD_BYTES} must be at least 1 byte."
    )
for _tier, _days in EVIDENCE_MAX_AGE_DAYS.items():
    if _days < 1:
        raise ImproperlyConfigured(
            f"EVIDENCE_MAX_AGE_DAYS_{_tier.upper()}={_days} must be at least 1 day."
        )

# Releases. Emergency releases may start rolling out before their sign-offs, which
# are then due within RELEASES_EMERGENCY_SIGNOFF_HOURS. Signers are told by email
# when a release waits for them; with no EMAIL_HOST, mail goes to the console.
RELEASES_EMERGENCY_SIGNOFF_HOURS = env_int("RELEASES_EMERGENCY_SIGNOFF_HOURS", 24)
if RELEASES_EMERGENCY_SIGNOFF_HOURS < 1:
    raise ImproperlyConfigured(
        f"RELEASES_EMERGENCY_SIGNOFF_HOURS={RELEASES_EMERGENCY_SIGNOFF_HOURS} must be at least 1."
    )
# A waiver sets a gate aside for at most WAIVER_MAX_DAYS_<TIER> days from when it is
# granted (releases.policy.waiver_bound); a longer one is refused, naming the bound.
WAIVER_MAX_DAYS = {
    "production": env_int("WAIVER_MAX_DAYS_PRODUCTION", 14),
    "internal": env_int("WAIVER_MAX_DAYS_INTERNAL", 30),
    "experimental": env_int("WAIVER_MAX_DAYS_EXPERIMENTAL", 90),
}
for _tier, _days in WAIVER_MAX_DAYS.items():
    # A gate set aside for more than a year is a change of policy, not a waiver.
    if not 1 <= _days <= 365:
        raise ImproperlyConfigured(
            f"WAIVER_MAX_DAYS_{_tier.upper()}={_days} must be 1 to 365 days."
        )
EMAIL_HOST = env_str("EMAIL_HOST", "")
EMAIL_PORT = env_int("EMAIL_PORT", 587)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", default=True)
EMAIL_BACKEND = (
    "django.core.mail.backends.smtp.EmailBackend"
    if EMAIL_HOST
    else "django.core.mail.backends.console.EmailBackend"
)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "ledger@localhost")
# Links in emails: the address people reach the ledger at.
LEDGER_BASE_URL = env_str("LEDGER_BASE_URL", "http://localhost:8000").rstrip("/")

# Replay. Workers beat every REPLAY_HEARTBEAT_SECONDS while they run a replay; the
# reaper interrupts and resumes a run silent for REPLAY_STALE_AFTER_SECONDS, and
# fails it after REPLAY_MAX_ATTEMPTS claims. A run regressed against its baseline
# when its pass rate fell by more than the tolerance (percentage points), or its p95
# TTFT/TPOT rose by more than the tolerance (percent) and by at least the floor (ms).
REPLAY_HEARTBEAT_SECONDS = env_int("REPLAY_HEARTBEAT_SECONDS", 10)
REPLAY_STALE_AFTER_SECONDS = env_int("REPLAY_STALE_AFTER_SECONDS", 120)
REPLAY_MAX_ATTEMPTS = env_int("REPLAY_MAX_ATTEMPTS", 5)
REPLAY_RUN_TIME_LIMIT = env_int("REPLAY_RUN_TIME_LIMIT", 6 * 3600)
REPLAY_PASS_RATE_TOLERANCE_PCT = env_int("REPLAY_PASS_RATE_TOLERANCE_PCT", 5)
REPLAY_LATENCY_TOLERANCE_PCT = env_int("REPLAY_LATENCY_TOLERANCE_PCT", 20)
REPLAY_LATENCY_FLOOR_MS = env_int("REPLAY_LATENCY_FLOOR_MS", 10)
REPLAY_REAP_EVERY_SECONDS = env_int("REPLAY_REAP_EVERY_SECONDS", 60)
REPLAY_PROBE_EVERY_MINUTES = env_int("REPLAY_PROBE_EVERY_MINUTES", 30)
# Where replay may connect (replay/outbound.py): host names, `.domain` suffixes and
# networks, each with an optional :port (lib/allowlist.py; the well-known ports of
# databases, brokers and caches only when named). Development reaches this machine
# only; production lists its backends.
REPLAY_ALLOWED_HOSTS = env_list(
    "REPLAY_ALLOWED_HOSTS", ["127.0.0.1", "::1", "localhost"] if DEBUG else []
)
# Where webhooks may be posted, read the same way. Unset (a deployment from before
# it): REPLAY_ALLOWED_HOSTS, and `check --deploy` warns; set and empty: nowhere.
WEBHOOK_ALLOWED_HOSTS = env_list_or_none("WEBHOOK_ALLOWED_HOSTS")
for _name, _entries in (
    ("REPLAY_ALLOWED_HOSTS", REPLAY_ALLOWED_HOSTS),
    ("WEBHOOK_ALLOWED_HOSTS", WEBHOOK_ALLOWED_HOSTS or []),
):
    try:
        parse_entries(_entries, setting=_name)
    except ValueError as _error:
        raise ImproperlyConfigured(str(_error)) from _error
# Credential variables a backend may name besides LEDGER_BACKEND_KEY_*.
REPLAY_CREDENTIAL_NAMES = env_list("REPLAY_CREDENTIAL_NAMES", [])
if REPLAY_HEARTBEAT_SECONDS < 1 or REPLAY_STALE_AFTER_SECONDS < 2 * REPLAY_HEARTBEAT_SECONDS:
    raise ImproperlyConfigured(
        f"REPLAY_STALE_AFTER_SECONDS={REPLAY_STALE_AFTER_SECONDS} must be at least twice "
        f"REPLAY_HEARTBEAT_SECONDS={REPLAY_HEARTBEAT_SECONDS} (which must be at least 1), "
        "or live runs would be reaped between two heartbeats."
    )
for _name, _value in (
    ("REPLAY_MAX_ATTEMPTS", REPLAY_MAX_ATTEMPTS),
    ("REPLAY_RUN_TIME_LIMIT", REPLAY_RUN_TIME_LIMIT),
    ("REPLAY_REAP_EVERY_SECONDS", REPLAY_REAP_EVERY_SECONDS),
    ("REPLAY_PROBE_EVERY_MINUTES", REPLAY_PROBE_EVERY_MINUTES),
):
    if _value < 1:
        raise ImproperlyConfigured(f"{_name}={_value} must be at least 1.")
# A replay outlives the default task limits; a run cut short resumes where it stopped.
# The rollback verifications replay in their task too.
_REPLAY_LIMITS = {
    "time_limit": REPLAY_RUN_TIME_LIMIT,
    "soft_time_limit": max(REPLAY_RUN_TIME_LIMIT - 60, 1),
}
CELERY_TASK_ANNOTATIONS = {
    "run_replay": _REPLAY_LIMITS,
    "verify_rollback": _REPLAY_LIMITS,
    "verify_rollback_target": _REPLAY_LIMITS,
}
CELERY_BEAT_SCHEDULE = {
    "reap-stale-replay-runs": {
        "task": "reap_stale_runs",
        "schedule": float(REPLAY_REAP_EVERY_SECONDS),
    },
    "probe-replay-backends": {
        "task": "probe_backends",
        "schedule": float(REPLAY_PROBE_EVERY_MINUTES * 60),
    },
    # Daily run evidence from each backend's /metrics (docs/run-evidence.md): the first
    # scrape after midnight closes yesterday's window. In CELERY_TIMEZONE; days are UTC.
    "scrape-backend-metrics": {
        "task": "scrape_metrics",
        "schedule": crontab(minute=5, hour=0),
    },
    # The same from the gateway's /metrics, by tenant, task type and backend, when
    # GATEWAY_URL is set and GATEWAY_PROMETHEUS_METRICS is on (a no-op otherwise).
    "scrape-gateway-metrics": {
        "task": "scrape_gateway_metrics",
        "schedule": crontab(minute=5, hour=0),
    },
}

# The ledger's Ed25519 signing key (PKCS#8 PEM) for events, checkpoints and exports;
# without one, a key is generated into DATA_DIR/keys on first use (one machine only).
LEDGER_SIGNING_KEY = env_str("LEDGER_SIGNING_KEY")
LEDGER_SIGNING_KEY_PATH = DATA_DIR / "keys" / "ledger-signing-key.pem"
# The public keys (PEM blocks) of signing keys rotated out, whose signatures still count.
LEDGER_RETIRED_PUBLIC_KEYS = env_str("LEDGER_RETIRED_PUBLIC_KEYS")
LEDGER_CHECKPOINT_EVERY_MINUTES = env_int("LEDGER_CHECKPOINT_EVERY_MINUTES", 60)
if LEDGER_CHECKPOINT_EVERY_MINUTES < 1:
    raise ImproperlyConfigured(
        f"LEDGER_CHECKPOINT_EVERY_MINUTES={LEDGER_CHECKPOINT_EVERY_MINUTES} must be at least 1."
    )
CELERY_BEAT_SCHEDULE["checkpoint-ledger"] = {
    "task": "checkpoint_ledger",
    "schedule": float(LEDGER_CHECKPOINT_EVERY_MINUTES * 60),
}

# Retention. Records (releases, sign-offs, reviews, events) are kept at least 3 years
# (10 for high-risk systems); nothing here deletes them, and the event chain is never
# purged. Raw replay outputs and request-level load-test data are kept at least 6
# months, then a daily sweep redacts or drops them (each sweep is itself an Event).
RETENTION_RECORDS_YEARS = env_int("RETENTION_RECORDS_YEARS", 3)
RETENTION_RAW_DAYS = env_int("RETENTION_RAW_DAYS", 183)
if RETENTION_RECORDS_YEARS < 3:
    raise ImproperlyConfigured(
        f"RETENTION_RECORDS_YEARS={RETENTION_RECORDS_YEARS}: records are kept at least 3 years "
        "(10 for high-risk systems)."
    )
if RETENTION_RAW_DAYS < 183:
    raise ImproperlyConfigured(
        f"RETENTION_RAW_DAYS={RETENTION_RAW_DAYS}: raw outputs and request-level data are kept "
        "at least 183 days (6 months)."
    )
# Model-call spans from OpenTelemetry traces: structured facts only (content is never
# kept), dropped by day once older than this.
RETENTION_TRACES_DAYS = env_int("RETENTION_TRACES_DAYS", 400)
if RETENTION_TRACES_DAYS < 1:
    raise ImproperlyConfigured(f"RETENTION_TRACES_DAYS={RETENTION_TRACES_DAYS} must be at least 1.")
# The largest OTLP export accepted, before and after inflating it (the spec's 64 MiB is
# for collectors; an SDK's batch of 512 spans is well under 1 MiB).
OTLP_MAX_BODY_BYTES = env_int("OTLP_MAX_BODY_BYTES", 16 * 1024 * 1024)
CELERY_BEAT_SCHEDULE["sweep-traces"] = {"task": "sweep_traces", "schedule": 24 * 3600.0}
# Yesterday's run evidence from its traces, once the day is over (UTC).
CELERY_BEAT_SCHEDULE["summarize-traces"] = {
    "task": "summarize_traces",
    "schedule": crontab(minute=15, hour=0),
}
CELERY_BEAT_SCHEDULE["purge-expired-replay-outputs"] = {
    "task": "purge_expired_outputs",
    "schedule": 24 * 3600.0,
}
CELERY_BEAT_SCHEDULE["purge-expired-request-data"] = {
    "task": "purge_expired_request_data",
    "schedule": 24 * 3600.0,
}

# Rollouts and rollbacks: how often the catalog's readiness verdicts are refreshed (and
# due rollback targets re-verified), and how often probes' drift becomes unauthorized-
# change records.
RELEASES_READINESS_EVERY_MINUTES = env_int("RELEASES_READINESS_EVERY_MINUTES", 15)
RELEASES_DRIFT_EVERY_MINUTES = env_int("RELEASES_DRIFT_EVERY_MINUTES", 5)
for _name, _value in (
    ("RELEASES_READINESS_EVERY_MINUTES", RELEASES_READINESS_EVERY_MINUTES),
    ("RELEASES_DRIFT_EVERY_MINUTES", RELEASES_DRIFT_EVERY_MINUTES),
):
    if _value < 1:
        raise ImproperlyConfigured(f"{_name}={_value} must be at least 1.")
CELERY_BEAT_SCHEDULE["sweep-rollback-readiness"] = {
    "task": "sweep_rollback_readiness",
    "schedule": float(RELEASES_READINESS_EVERY_MINUTES * 60),
}
CELERY_BEAT_SCHEDULE["record-unauthorized-changes"] = {
    "task": "record_unauthorized_changes",
    "schedule": float(RELEASES_DRIFT_EVERY_MINUTES * 60),
}

# Is the gateway doing it? (releases/gateway/services/checks.py, docs/gateway.md): every
# GATEWAY_CHECK_EVERY_MINUTES the running LiteLLM proxy's GET /model/info at GATEWAY_URL
# (unset: no check) is compared with the config the ledger renders, sending
# GATEWAY_API_KEY (or GATEWAY_API_KEY_FILE; the proxy's master key or a key allowed
# /model/info) only to a host REPLAY_ALLOWED_HOSTS admits. A difference that outlasts
# GATEWAY_DRIFT_GRACE_SECONDS (the deployer's time to apply a new config and restart the
# proxy) is an unauthorized change of kind gateway.
GATEWAY_URL = env_str("GATEWAY_URL").rstrip("/")
GATEWAY_API_KEY = env_str("GATEWAY_API_KEY")
GATEWAY_CHECK_EVERY_MINUTES = env_int("GATEWAY_CHECK_EVERY_MINUTES", 5)
GATEWAY_TIMEOUT_SECONDS = env_int("GATEWAY_TIMEOUT_SECONDS", 10)
GATEWAY_DRIFT_GRACE_SECONDS = env_int("GATEWAY_DRIFT_GRACE_SECONDS", 300)
# The most of /model/info read before the check gives up (unknown): 2,000 services'
# deployments answer about 9.5 MB.
GATEWAY_MAX_RESPONSE_MB = env_int("GATEWAY_MAX_RESPONSE_MB", 64)
if GATEWAY_URL and not GATEWAY_URL.startswith(("http://", "https://")):
    raise ImproperlyConfigured(
        f"GATEWAY_URL={GATEWAY_URL!r} is not an http:// or https:// URL (the LiteLLM proxy's "
        "base, e.g. http://gateway:4000)."
    )
for _name, _value in (
    ("GATEWAY_CHECK_EVERY_MINUTES", GATEWAY_CHECK_EVERY_MINUTES),
    ("GATEWAY_TIMEOUT_SECONDS", GATEWAY_TIMEOUT_SECONDS),
    ("GATEWAY_MAX_RESPONSE_MB", GATEWAY_MAX_RESPONSE_MB),
):
    if _value < 1:
        raise ImproperlyConfigured(f"{_name}={_value} must be at least 1.")
if GATEWAY_DRIFT_GRACE_SECONDS < 0:
    raise ImproperlyConfigured(
        f"GATEWAY_DRIFT_GRACE_SECONDS={GATEWAY_DRIFT_GRACE_SECONDS} must be 0 or more."
    )
# The gateway's own /metrics (docs/gateway.md, "The gateway's metrics"): with
# GATEWAY_PROMETHEUS_METRICS the whole config the ledger renders (render_gateway, GET
# /api/gateway/litellm/) lists LiteLLM's prometheus callback; the proxy then answers
# /metrics only with one of its keys unless GATEWAY_METRICS_REQUIRE_AUTH is false.
GATEWAY_PROMETHEUS_METRICS = env_bool("GATEWAY_PROMETHEUS_METRICS", default=False)
GATEWAY_METRICS_REQUIRE_AUTH = env_bool("GATEWAY_METRICS_REQUIRE_AUTH", default=True)
CELERY_BEAT_SCHEDULE["check-gateway"] = {
    "task": "check_gateway",
    "schedule": float(GATEWAY_CHECK_EVERY_MINUTES * 60),
}

# Cost attribution (releases/cost/, docs/cost.md): a service-day's used GPU-hours are
# split over its tenants and task types by COST_ALLOCATION_KEY, output_tokens (the
# default) or request_seconds (requests * p50 TTFT + output tokens * p50 TPOT).
COST_ALLOCATION_KEY = env_str("COST_ALLOCATION_KEY", "output_tokens")
# The FOCUS export's Provider, Publisher and InvoiceIssuer, and its billing account.
COST_PROVIDER_NAME = env_str("COST_PROVIDER_NAME", "Internal inference platform")
COST_BILLING_ACCOUNT_ID = env_str("COST_BILLING_ACCOUNT_ID", "inference-platform")
if COST_ALLOCATION_KEY not in ("output_tokens", "request_seconds"):
    raise ImproperlyConfigured(
        f"COST_ALLOCATION_KEY={COST_ALLOCATION_KEY!r} must be output_tokens or request_seconds."
    )

# Closed-loop rollouts (releases/analysis/, docs/rollouts.md): every
# ANALYSIS_TICK_SECONDS the beat measures each gray stage whose plan has an `analysis`
# (at its own interval) through Prometheus' HTTP API at PROMETHEUS_URL (unset: every
# tick is an error observation, never a pass), sending PROMETHEUS_BEARER_TOKEN (or
# PROMETHEUS_BEARER_TOKEN_FILE) only to a host REPLAY_ALLOWED_HOSTS admits.
PROMETHEUS_URL = env_str("PROMETHEUS_URL").rstrip("/")
PROMETHEUS_BEARER_TOKEN = env_str("PROMETHEUS_BEARER_TOKEN")
PROMETHEUS_TIMEOUT_SECONDS = env_int("PROMETHEUS_TIMEOUT_SECONDS", 10)
ANALYSIS_TICK_SECONDS = env_int("ANALYSIS_TICK_SECONDS", 10)
if PROMETHEUS_URL and not PROMETHEUS_URL.startswith(("http://", "https://")):
    raise ImproperlyConfigured(
        f"PROMETHEUS_URL={PROMETHEUS_URL!r} is not an http:// or https:// URL (the "
        "Prometheus server's base, e.g. http://prometheus:9090)."
    )
for _name, _value in (
    ("PROMETHEUS_TIMEOUT_SECONDS", PROMETHEUS_TIMEOUT_SECONDS),
    ("ANALYSIS_TICK_SECONDS", ANALYSIS_TICK_SECONDS),
):
    if _value < 1:
        raise ImproperlyConfigured(f"{_name}={_value} must be at least 1.")
CELERY_BEAT_SCHEDULE["run-analysis"] = {
    "task": "run_analysis",
    "schedule": float(ANALYSIS_TICK_SECONDS),
}

# Periodic reviews (releases/reviews/services/periodic_reviews.py, docs/reviews.md): the daily
# sweep at REVIEWS_SWEEP_HOUR:30 (CELERY_TIMEZONE; after the metrics scrape at 00:05)
# raises a review of each service whose cadence is due or whose behaviour drifted. A
# review is due REVIEW_DUE_DAYS_<TIER> days after it is raised. Latency drifts when the
# 7-day p95 TTFT is above the SLO or more than REVIEW_LATENCY_DRIFT_PCT % above the load
# test measured at release; the error rate when it is above the SLO or more than
# REVIEW_ERROR_RATE_DRIFT_PCT % above the live revision's first week; the engine when
# more than REVIEW_ENGINE_RELEASES_BEHIND newer versions of it are in the registry.
REVIEW_DUE_DAYS = {
    "production": env_int("REVIEW_DUE_DAYS_PRODUCTION", 14),
    "internal": env_int("REVIEW_DUE_DAYS_INTERNAL", 30),
    "experimental": env_int("REVIEW_DUE_DAYS_EXPERIMENTAL", 60),
}
REVIEW_LATENCY_DRIFT_PCT = env_int("REVIEW_LATENCY_DRIFT_PCT", 20)
REVIEW_ERROR_RATE_DRIFT_PCT = env_int("REVIEW_ERROR_RATE_DRIFT_PCT", 50)
REVIEW_ENGINE_RELEASES_BEHIND = env_int("REVIEW_ENGINE_RELEASES_BEHIND", 2)
REVIEWS_SWEEP_HOUR = env_int("REVIEWS_SWEEP_HOUR", 1)
for _tier, _days in REVIEW_DUE_DAYS.items():
    if _days < 1:
        raise ImproperlyConfigured(
            f"REVIEW_DUE_DAYS_{_tier.upper()}={_days} must be at least 1 day."
        )
for _name, _value in (
    ("REVIEW_LATENCY_DRIFT_PCT", REVIEW_LATENCY_DRIFT_PCT),
    ("REVIEW_ERROR_RATE_DRIFT_PCT", REVIEW_ERROR_RATE_DRIFT_PCT),
):
    if _value < 1:
        raise ImproperlyConfigured(f"{_name}={_value} must be at least 1 (percent).")
if REVIEW_ENGINE_RELEASES_BEHIND < 0:
    raise ImproperlyConfigured(
        f"REVIEW_ENGINE_RELEASES_BEHIND={REVIEW_ENGINE_RELEASES_BEHIND} must be 0 or more."
    )
if not 0 <= REVIEWS_SWEEP_HOUR <= 23:
    raise ImproperlyConfigured(f"REVIEWS_SWEEP_HOUR={REVIEWS_SWEEP_HOUR} must be an hour, 0 to 23.")
CELERY_BEAT_SCHEDULE["raise-reviews"] = {
    "task": "raise_reviews",
    "schedule": crontab(minute=30, hour=REVIEWS_SWEEP_HOUR),
}

# Auditor exports (releases/audit/services/exports.py): a download link, presigned on S3 or
# signed by this site on the local folder, expires after EXPORT_LINK_EXPIRY_SECONDS.
EXPORT_LINK_EXPIRY_SECONDS = env_int("EXPORT_LINK_EXPIRY_SECONDS", 300)
# Outbound webhooks (releases/audit/services/webhooks.py), posted only to hosts in
# WEBHOOK_ALLOWED_HOSTS (above, beside replay's; replay/outbound.py). The dispatcher
# reads new events every WEBHOOK_DISPATCH_EVERY_SECONDS; a failed delivery is retried
# after WEBHOOK_RETRY_BASE_SECONDS, doubling up to WEBHOOK_RETRY_MAX_SECONDS, at most
# WEBHOOK_MAX_ATTEMPTS times; a subscription failing for WEBHOOK_PAUSE_AFTER_HOURS is paused.
WEBHOOK_DISPATCH_EVERY_SECONDS = env_int("WEBHOOK_DISPATCH_EVERY_SECONDS", 30)
WEBHOOK_TIMEOUT_SECONDS = env_int("WEBHOOK_TIMEOUT_SECONDS", 10)
WEBHOOK_RETRY_BASE_SECONDS = env_int("WEBHOOK_RETRY_BASE_SECONDS", 30)
WEBHOOK_RETRY_MAX_SECONDS = env_int("WEBHOOK_RETRY_MAX_SECONDS", 3600)
WEBHOOK_MAX_ATTEMPTS = env_int("WEBHOOK_MAX_ATTEMPTS", 10)
WEBHOOK_PAUSE_AFTER_HOURS = env_int("WEBHOOK_PAUSE_AFTER_HOURS", 24)
for _name, _value in (
    ("EXPORT_LINK_EXPIRY_SECONDS", EXPORT_LINK_EXPIRY_SECONDS),
    ("WEBHOOK_DISPATCH_EVERY_SECONDS", WEBHOOK_DISPATCH_EVERY_SECONDS),
    ("WEBHOOK_TIMEOUT_SECONDS", WEBHOOK_TIMEOUT_SECONDS),
    ("WEBHOOK_RETRY_BASE_SECONDS", WEBHOOK_RETRY_BASE_SECONDS),
    ("WEBHOOK_RETRY_MAX_SECONDS", WEBHOOK_RETRY_MAX_SECONDS),
    ("WEBHOOK_MAX_ATTEMPTS", WEBHOOK_MAX_ATTEMPTS),
    ("WEBHOOK_PAUSE_AFTER_HOURS", WEBHOOK_PAUSE_AFTER_HOURS),
):
    if _value < 1:
        raise ImproperlyConfigured(f"{_name}={_value} must be at least 1.")
CELERY_BEAT_SCHEDULE["dispatch-webhooks"] = {
    "task": "dispatch_webhooks",
    "schedule": float(WEBHOOK_DISPATCH_EVERY_SECONDS),
}

# Health: how long /readyz waits for each dependency before calling it down.
READYZ_TIMEOUT_SECONDS = env_int("READYZ_TIMEOUT_SECONDS", 3)

# Last, once every variable has been read: no backend credential may be one of them.
_reserved = sorted(
    name
    for name in REPLAY_CREDENTIAL_NAMES
    if name in READ_NAMES
    or name.removesuffix("_FILE") in READ_NAMES
    or name.startswith(("AWS_", "DJANGO_", "CELERY_", "DATABASE_", "PG"))
)
if _reserved:
    raise ImproperlyConfigured(
        f"REPLAY_CREDENTIAL_NAMES lists {', '.join(_reserved)}, which hold the ledger's own "
        "configuration: a backend must never be able to send them. Use LEDGER_BACKEND_KEY_* names."
    )
