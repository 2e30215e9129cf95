"""Liveness and readiness endpoints for load balancers and orchestrators.

/healthz says the process answers; /readyz says it can do its work, checking
each dependency and naming the one that fails. Neither needs a login: the
checks reveal no data.
"""

from __future__ import annotations

import os

from django.conf import settings
from django.db import connections
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET


def _describe(exc: BaseException) -> str:
    first_line = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {first_line}" if first_line else type(exc).__name__


def check_database() -> dict[str, object]:
    results: dict[str, object] = {"ok": True}
    for alias in connections:
        connection = connections[alias]
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1")
                cursor.fetchone()
        except Exception as exc:  # any driver error means "not ready"
            return {"ok": False, "alias": alias, "error": _describe(exc)}
        results["vendor"] = connection.vendor
    return results


def check_broker() -> dict[str, object]:
    from config.celery import app

    url = settings.CELERY_BROKER_URL
    if url.startswith("filesystem://"):
        folder = str(settings.CELERY_BROKER_TRANSPORT_OPTIONS["data_folder_in"])
        if os.path.isdir(folder) and os.access(folder, os.W_OK):
            return {"ok": True, "transport": "filesystem"}
        return {"ok": False, "transport": "filesystem", "error": f"{folder} is not writable"}
    try:
        with app.connection_for_write(connect_timeout=settings.READYZ_TIMEOUT_SECONDS) as conn:
            conn.ensure_connection(
                max_retries=1,
                interval_start=0,
                interval_step=0,
                timeout=settings.READYZ_TIMEOUT_SECONDS,
            )
            transport = conn.transport_cls
    except Exception as exc:  # kombu raises the transport's own errors
        return {"ok": False, "error": _describe(exc)}
    return {"ok": True, "transport": str(transport)}


@require_GET
@never_cache
def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


@require_GET
@never_cache
def readyz(request: HttpRequest) -> JsonResponse:
    checks = {"database": check_database(), "broker": check_broker()}
    failing = [name for name, result in checks.items() if not result["ok"]]
    body = {"status": "unavailable" if failing else "ok", "failing": failing, "checks": checks}
    return JsonResponse(body, status=503 if failing else 200)
