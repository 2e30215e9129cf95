"""The configuration `make run` uses: no servers, everything under DATA_DIR."""

import json

from tests.support.processes import celery_worker, child_env, http_get, run_manage, web_server

_SERVER_VARIABLES = dict.fromkeys(
    [
        "DATABASE_URL",
        "CELERY_BROKER_URL",
        "CELERY_RESULT_BACKEND",
        "SECRET_KEY",
        "AWS_STORAGE_BUCKET_NAME",
        "STATIC_MANIFEST",
    ]
)


def _embedded_env(data_dir):
    return child_env(**_SERVER_VARIABLES, DEBUG="true", DATA_DIR=str(data_dir))


def test_embedded_defaults_migrate_and_serve_on_sqlite(scratch_dir):
    env = _embedded_env(scratch_dir)

    migrate = run_manage("migrate", "--noinput", env=env)
    assert migrate.returncode == 0, migrate.stderr
    assert (scratch_dir / "db.sqlite3").is_file()

    with web_server(env) as base:
        ready_status, ready_text = http_get(f"{base}/readyz")
        login_status, login_page = http_get(f"{base}/accounts/login/")

    ready = json.loads(ready_text)
    assert ready_status == 200, ready
    assert ready["checks"]["database"]["vendor"] == "sqlite"
    assert ready["checks"]["broker"]["transport"] == "filesystem"
    assert login_status == 200
    assert "<h1>Log in</h1>" in login_page


def test_embedded_worker_runs_tasks_over_the_filesystem_broker(scratch_dir):
    env = _embedded_env(scratch_dir)
    assert run_manage("migrate", "--noinput", env=env).returncode == 0

    with celery_worker(env, queue="celery"):
        sent = run_manage(
            "shell",
            "-c",
            "import json; from ledger.tasks import probe_worker; "
            "print(json.dumps(probe_worker.delay().get(timeout=60)))",
            env=env,
        )

    assert sent.returncode == 0, sent.stderr
    report = json.loads(sent.stdout.strip().splitlines()[-1])
    assert report["database_vendor"] == "sqlite"
    assert report["database_name"] == str(scratch_dir / "db.sqlite3")
    assert list((scratch_dir / "celery" / "results").iterdir()), "the result went through files"
