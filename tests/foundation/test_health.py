import json

from django.db import connection

from tests.support.processes import child_env, database_url, free_port, http_get, web_server


def test_healthz_answers_without_login(client):
    response = client.get("/healthz")

    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_readyz_reports_database_and_broker_ready(client, db):
    response = client.get("/readyz")

    body = response.json()
    assert response.status_code == 200, body
    assert body["status"] == "ok"
    assert body["checks"]["database"]["vendor"] == "postgresql"
    assert "redis" in body["checks"]["broker"]["transport"].lower()


def test_readyz_rejects_post(client):
    assert client.post("/readyz").status_code == 405


def test_readyz_names_the_database_when_it_is_down():
    closed = free_port()
    env = child_env(DATABASE_URL=f"postgres://root@127.0.0.1:{closed}/ledger")

    with web_server(env) as base:
        status, text = http_get(f"{base}/readyz")

    body = json.loads(text)
    assert status == 503
    assert body["status"] == "unavailable"
    assert body["failing"] == ["database"]
    assert str(closed) in body["checks"]["database"]["error"]
    assert body["checks"]["broker"]["ok"] is True


def test_readyz_names_the_broker_when_it_is_down(db):
    closed = free_port()
    env = child_env(
        DATABASE_URL=database_url(connection.settings_dict),
        CELERY_BROKER_URL=f"redis://127.0.0.1:{closed}/0",
        READYZ_TIMEOUT_SECONDS="1",
    )

    with web_server(env) as base:
        status, text = http_get(f"{base}/readyz")

    body = json.loads(text)
    assert status == 503
    assert body["failing"] == ["broker"]
    assert body["checks"]["database"]["ok"] is True
    assert body["checks"]["broker"]["error"]
