"""Fixtures of the tests that walk the whole API through its schema."""

from __future__ import annotations

import pytest
from django.core.signals import request_finished, request_started
from django.db import close_old_connections, transaction
from django.test import override_settings

from tests.foundation.api_data import seed_api_data


@pytest.fixture(scope="module")
def api_data(django_db_setup, django_db_blocker, tmp_path_factory):
    """The ledger of tests/foundation/api_data.py, made once per module and rolled back
    at its end: each test's own transaction (pytest-django's `db`) is a savepoint
    inside this one, so a test sees the rows and leaves them as it found them."""
    media = tmp_path_factory.mktemp("media")
    storages = {
        "default": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": media},
        },
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
    with (
        django_db_blocker.unblock(),
        override_settings(MEDIA_ROOT=media, STORAGES=storages),
        transaction.atomic(),
    ):
        yield seed_api_data()
        transaction.set_rollback(True)


@pytest.fixture
def wsgi_calls():
    """Schemathesis calls the WSGI app itself, whose request signals close old database
    connections — and the test's open transaction with them. Django's test client
    disconnects them the same way."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)
