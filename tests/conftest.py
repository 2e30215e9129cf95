"""The shared cast and the real parts the suite talks to."""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings

from tests.factories import UserFactory

FAST_PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

ROOT = Path(__file__).resolve().parent.parent
_ARTIFACTS = ROOT / ".pytest-artifacts"
_ARTIFACTS.mkdir(exist_ok=True)
# Chromium writes its profile and caches under these; keep them in the run's folder.
os.environ.setdefault("XDG_CONFIG_HOME", str(_ARTIFACTS / "xdg-config"))
os.environ.setdefault("XDG_CACHE_HOME", str(_ARTIFACTS / "xdg-cache"))
# Hypothesis (under schemathesis) caches what it learns of the code there, not in ./.hypothesis.
os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", str(_ARTIFACTS / "hypothesis"))

# The suite runs beside other work on a shared machine: no test of ours is about how fast
# hypothesis generates or runs an example, so its timing checks would only be flaky.
hypothesis_settings.register_profile(
    "shared-machine", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
hypothesis_settings.load_profile("shared-machine")


def pytest_collection_modifyitems(config, items):
    """Browser tests run last.

    Playwright's sync API leaves an event loop running in the test thread, after
    which asyncio.run() (the replay client's tests) refuses to start. Sorting
    them last also holds under xdist, which hands tests out in this order.
    """
    items.sort(key=lambda item: item.get_closest_marker("browser") is not None)


def _migrations_digest() -> str:
    digest = hashlib.sha256()
    for path in sorted(ROOT.glob("*/migrations/*.py")):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:10]


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix):
    """Name the reused test database after the migrations it was built from.

    --reuse-db keeps the database between runs; a migration edited in place
    would otherwise leave a stale schema behind. A new digest means a new
    database, migrated from scratch.
    """
    from django.conf import settings

    db = settings.DATABASES["default"]
    if db["ENGINE"].endswith("postgresql"):
        test = db.setdefault("TEST", {})
        base = test.get("NAME") or f"test_{db['NAME']}"
        # TEST_DB_SUFFIX names a run's databases by hand; without it, two suites running
        # at once (two clones, or CI beside a developer's run) still get one each.
        suffix = os.environ.get("TEST_DB_SUFFIX", "")
        name = f"{base}_{_migrations_digest()}{'_' + suffix if suffix else ''}"
        test["NAME"] = _claim_database(db, name)


# The connection holding this process's claim on its test database, open until it exits.
_claim: object = None


def _claim_database(db: dict, name: str) -> str:
    """The first of name, name_2, name_3 … that no other running suite is using.

    A session-level advisory lock marks a name as taken; PostgreSQL releases it when this
    process's connection closes, however the process ends. Advisory locks belong to one
    database, so every suite asks in `postgres`.
    """
    global _claim
    import psycopg

    connection = psycopg.connect(
        host=db.get("HOST") or "127.0.0.1",
        port=db.get("PORT") or 5432,
        user=db.get("USER") or None,
        password=db.get("PASSWORD") or None,
        dbname="postgres",
        autocommit=True,
    )
    for slot in range(1, 64):
        candidate = name if slot == 1 else f"{name}_{slot}"
        row = connection.execute(
            "SELECT pg_try_advisory_lock(hashtext(%s))", [candidate]
        ).fetchone()
        if row and row[0]:
            _claim = connection
            return candidate
    connection.close()
    raise RuntimeError(f"63 suites hold a test database named like {name}: none is free")


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """Start from an empty reused database.

    A run cut short in a transactional test (killed at a session's end, say) leaves that
    test's committed rows behind, and --reuse-db would hand them to the next run, where
    every factory's unique name would then collide. Such a database is flushed first.
    """
    with django_db_blocker.unblock():
        _flush_if_left_dirty()


def _flush_if_left_dirty() -> None:
    from django.core.management import call_command
    from django.db import connection

    # What migrate itself writes is not a left-over.
    written_by_migrate = {"django_content_type", "auth_permission"}
    tables = sorted(
        set(connection.introspection.django_table_names(only_existing=True)) - written_by_migrate
    )
    if not tables:
        return
    quote = connection.ops.quote_name
    # Table names from Django's own models, quoted by its backend.
    probe = " OR ".join(f"EXISTS (SELECT 1 FROM {quote(table)})" for table in tables)  # noqa: S608
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {probe}")
        (dirty,) = cursor.fetchone()
    if dirty:
        call_command("flush", interactive=False, verbosity=0)


def _storages_in(media: Path) -> dict:
    from django.conf import settings

    storages = settings.STORAGES
    if not storages["default"]["BACKEND"].endswith("FileSystemStorage"):
        return storages
    return {**storages, "default": {**storages["default"], "OPTIONS": {"location": media}}}


@pytest.fixture(autouse=True)
def _media_in_tmp(settings, tmp_path):
    """Uploaded files of one test never land in the project folder or another test's."""
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.STORAGES = _storages_in(tmp_path / "media")


@pytest.fixture(scope="module")
def demo_world(django_db_setup, django_db_blocker, tmp_path_factory):
    """seed_demo's world, built once for a module's tests and rolled back after them.

    Seeding takes seconds, and a dozen modules read the demo. Each test still runs in a
    savepoint of its own inside this transaction (pytest-django's db fixture nests), so
    what one test writes is gone before the next reads. Not for transactional tests.
    """
    from django.core.management import call_command
    from django.db import transaction
    from django.test import override_settings

    media = tmp_path_factory.mktemp("demo-media")
    with (
        override_settings(
            PASSWORD_HASHERS=FAST_PASSWORD_HASHERS,
            MEDIA_ROOT=media,
            STORAGES=_storages_in(media),
        ),
        django_db_blocker.unblock(),
        transaction.atomic(),
    ):
        call_command("seed_demo", "--quiet-logins", stdout=io.StringIO())
        yield
        transaction.set_rollback(True)


@pytest.fixture(autouse=True)
def _fresh_cache():
    """The API throttles count in the default cache (per process here): one test's
    requests must not use up the next one's rate. Sign-in failures (django-axes)
    live in the database and go with each test's rollback."""
    from django.core.cache import cache

    cache.clear()
    yield
    cache.clear()


@pytest.fixture(autouse=True)
def _default_language():
    """Django leaves a request's language active in its thread after the request (the
    next request sets its own); code a test calls directly then speaks it. Each test
    starts, and ends, in the default language."""
    from django.utils import translation

    translation.deactivate()
    yield
    translation.deactivate()


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    # Hashing the cast's passwords with PBKDF2 would be most of each test's time.
    settings.PASSWORD_HASHERS = FAST_PASSWORD_HASHERS


# The cast (healthchecks' alice/bob/charlie): one person per role and an outsider.
# Log them in with client.force_login(user): client.login() calls authenticate()
# without a request, which django-axes refuses (AxesBackendRequestParameterRequired);
# code that checks a password passes the request, as the login pages do.
@pytest.fixture
def owner(db):
    return UserFactory(username="olivia", roles=["model_owner"])


@pytest.fixture
def sre(db):
    return UserFactory(username="sam", roles=["platform_sre"])


@pytest.fixture
def security(db):
    return UserFactory(username="sofia", roles=["security_compliance"])


@pytest.fixture
def business(db):
    return UserFactory(username="ben", roles=["business_owner"])


@pytest.fixture
def auditor(db):
    return UserFactory(username="ada", roles=["auditor"])


@pytest.fixture
def outsider(db):
    return UserFactory(username="otto", roles=[])


@pytest.fixture(scope="session", autouse=True)
def _patient_browser_expectations():
    """Playwright's `expect` gives up after 5 s; a save that parses a file on a machine
    busy with another suite can take longer. The deadline only bounds a hang: each
    expectation still returns as soon as the page shows what it waits for."""
    from playwright.sync_api import expect

    expect.set_options(timeout=60_000)


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    # Playwright cannot download its own browser here: drive Debian's chromium.
    return {
        **browser_type_launch_args,
        "executable_path": "/usr/bin/chromium",
        "args": [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ],
    }


@pytest.fixture(scope="session")
def _session_browsers(launch_browser):
    """The session's chromium, launched again should it have gone (a browser that crashed
    on a busy machine would otherwise fail every browser test after it in this worker)."""
    launched = []

    def current():
        if not launched or not launched[-1].is_connected():
            launched.append(launch_browser())
        return launched[-1]

    yield current
    for browser in launched:
        if browser.is_connected():
            browser.close()


@pytest.fixture
def browser(_session_browsers):
    return _session_browsers()


@pytest.fixture
def scratch_dir():
    with tempfile.TemporaryDirectory(prefix="ledger-test-") as folder:
        yield Path(folder)


@pytest.fixture(scope="session")
def migrated_sqlite(tmp_path_factory) -> Path:
    """A SQLite database `manage.py migrate` made on the embedded defaults, once per
    worker: a full migrate there costs ten seconds, and the tests that start from a
    migrated database copy it (`embedded_data_dir`) instead of each paying for it."""
    from tests.support.processes import embedded_env, run_manage

    data_dir = tmp_path_factory.mktemp("migrated-sqlite")
    migrate = run_manage("migrate", "--noinput", env=embedded_env(data_dir))
    assert migrate.returncode == 0, migrate.stderr[-3000:]
    return data_dir / "db.sqlite3"


@pytest.fixture
def embedded_data_dir(scratch_dir, migrated_sqlite) -> Path:
    """A DATA_DIR of the embedded defaults whose database is already migrated."""
    shutil.copyfile(migrated_sqlite, scratch_dir / "db.sqlite3")
    return scratch_dir


@pytest.fixture
def team(owner):
    """The owner's team: the owner may edit what belongs to it."""
    from tests.ledger.factories import TeamFactory

    return TeamFactory(slug="kb-team", name="Knowledge base team", members=[owner])


@pytest.fixture(scope="session")
def s3_endpoint():
    from tests.support.s3 import moto_s3_server

    with moto_s3_server() as endpoint:
        yield endpoint


@pytest.fixture
def s3_storage(settings, s3_endpoint):
    """Point the default storage at a fresh bucket on the loopback S3 server."""
    import uuid

    from lib import s3

    settings.AWS_STORAGE_BUCKET_NAME = f"ledger-test-{uuid.uuid4().hex[:12]}"
    settings.AWS_S3_ENDPOINT_URL = s3_endpoint
    settings.AWS_ACCESS_KEY_ID = "testing"
    settings.AWS_SECRET_ACCESS_KEY = "testing"
    settings.AWS_S3_REGION_NAME = "us-east-1"
    settings.STORAGES = {
        **settings.STORAGES,
        "default": {"BACKEND": "storages.backends.s3.S3Storage"},
    }
    s3.ensure_bucket()
    return settings.AWS_STORAGE_BUCKET_NAME


@pytest.fixture(autouse=True, scope="session")
def _flush_may_truncate_events():
    """Between transactional tests Django's flush TRUNCATEs every table, which the
    event table's trigger refuses; the test harness alone is let through, with
    pgtrigger's own escape hatch (tests/ledger/test_chain.py proves the refusal)."""
    from django.core.management.commands import flush

    from tests.support.triggers import ignoring

    original = flush.Command.handle

    def handle(self, *args, **options):
        with ignoring(
            "ledger.Event:ledger_event_no_truncate", using=options.get("database") or "default"
        ):
            return original(self, *args, **options)

    flush.Command.handle = handle
    yield
    flush.Command.handle = original


@pytest.fixture(scope="session")
def oidc_provider(tmp_path_factory):
    """A real OpenID Connect provider (django-oauth-toolkit) on loopback, once per session."""
    from tests.support.oidc import provider_process

    with provider_process(tmp_path_factory.mktemp("oidc-provider")) as provider:
        yield provider


@pytest.fixture(scope="session")
def ledger_client(oidc_provider):
    """The ledger registered at the provider for the Django test client's host."""
    from tests.support.oidc import CLIENT_ID, CLIENT_SECRET

    oidc_provider.client(CLIENT_ID, CLIENT_SECRET, "http://testserver")
    return oidc_provider


@pytest.fixture
def oidc(settings, ledger_client):
    """The ledger signing in through the test provider (the test client's host)."""
    from ledger.oidc import discovery
    from tests.support.oidc import configure_ledger

    configure_ledger(settings, ledger_client)
    yield ledger_client
    discovery.forget()
