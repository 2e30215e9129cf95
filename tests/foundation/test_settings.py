import re
import subprocess

import pytest
from django.core.exceptions import ImproperlyConfigured

from lib.env import env_bool, env_int, env_list, env_rate, env_str
from tests.support.processes import ROOT, child_env, run_manage


def test_production_refuses_the_development_secret_key(scratch_dir):
    env = child_env(DEBUG="false", SECRET_KEY=None, DATA_DIR=str(scratch_dir))

    result = run_manage("check", env=env)

    assert result.returncode != 0
    assert "SECRET_KEY is the development key while DEBUG is off" in result.stderr


def test_production_starts_with_its_own_secret_key(scratch_dir):
    env = child_env(
        DEBUG="false", SECRET_KEY="a-real-secret-" + "x" * 40, DATA_DIR=str(scratch_dir)
    )

    result = run_manage("check", env=env)

    assert result.returncode == 0, result.stderr


def test_a_malformed_boolean_is_refused_with_its_name(monkeypatch):
    monkeypatch.setenv("LEDGER_FLAG", "maybe")

    with pytest.raises(ImproperlyConfigured, match="LEDGER_FLAG='maybe' is not a boolean"):
        env_bool("LEDGER_FLAG")


def test_a_malformed_number_is_refused_with_its_name(monkeypatch):
    monkeypatch.setenv("LEDGER_WORKERS", "four")

    with pytest.raises(ImproperlyConfigured, match="LEDGER_WORKERS='four' is not a whole number"):
        env_int("LEDGER_WORKERS", 1)


def test_a_secret_can_come_from_a_file(monkeypatch, tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("from-the-file\n")
    monkeypatch.setenv("LEDGER_SECRET", "from-the-variable")
    monkeypatch.setenv("LEDGER_SECRET_FILE", str(secret))

    assert env_str("LEDGER_SECRET") == "from-the-file"


def test_an_unreadable_secret_file_is_named(monkeypatch, tmp_path):
    monkeypatch.setenv("LEDGER_SECRET_FILE", str(tmp_path / "missing"))

    with pytest.raises(ImproperlyConfigured, match="LEDGER_SECRET_FILE="):
        env_str("LEDGER_SECRET")


def test_lists_drop_blank_items(monkeypatch):
    monkeypatch.setenv("LEDGER_HOSTS", "a.example, ,b.example,")

    assert env_list("LEDGER_HOSTS", []) == ["a.example", "b.example"]
    assert env_list("LEDGER_UNSET_LIST", ["localhost"]) == ["localhost"]


def test_migrations_reach_the_owner_through_its_own_alias(scratch_dir):
    script = (
        "from django.conf import settings as s; d = s.DATABASES; "
        "print(d['owner']['USER'], d['default']['USER'], d['owner']['NAME'], d['owner']['TEST']['MIRROR'])"
    )
    env = child_env(
        DEBUG="true",
        DATA_DIR=str(scratch_dir),
        DATABASE_URL="postgres://ledger_app:app@db.example:5432/ledger",
        DATABASE_MIGRATE_URL="postgres://ledger:owner@db.example:5432/ledger",
    )

    result = run_manage("shell", "--no-imports", "-c", script, env=env)

    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["ledger", "ledger_app", "ledger", "default"]


@pytest.mark.django_db
def test_a_statement_run_twice_on_a_connection_is_prepared():
    from django.db import connection

    from ledger.models import Service

    def prepared() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_prepared_statements")
            return cursor.fetchone()[0]

    before = prepared()
    for _ in range(2):
        list(Service.objects.filter(slug="no-such-service"))
    assert prepared() > before


@pytest.mark.parametrize(("setting", "binding"), [("", "True 1"), ("false", "None None")])
def test_prepared_statements_can_be_turned_off_for_a_pooler(scratch_dir, setting, binding):
    script = (
        "from django.conf import settings as s; o = s.DATABASES['default']['OPTIONS']; "
        "print(o.get('server_side_binding'), o.get('prepare_threshold'))"
    )
    env = child_env(
        DEBUG="true",
        DATA_DIR=str(scratch_dir),
        DATABASE_URL="postgres://ledger:ledger@db.example:5432/ledger",
        **({"DATABASE_PREPARED_STATEMENTS": setting} if setting else {}),
    )

    result = run_manage("shell", "--no-imports", "-c", script, env=env)

    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == binding.split()


def test_sign_in_and_api_limits_come_from_the_environment(scratch_dir):
    script = (
        "from django.conf import settings as s; r = s.REST_FRAMEWORK; "
        "print(s.AXES_FAILURE_LIMIT, s.LOGIN_ADDRESS_FAILURE_LIMIT, "
        "int(s.AXES_COOLOFF_TIME.total_seconds()), r['NUM_PROXIES'], "
        "*(r['DEFAULT_THROTTLE_RATES'][k] for k in ('user', 'anon', 'wrong_token')))"
    )
    env = child_env(
        DEBUG="true",
        DATA_DIR=str(scratch_dir),
        LOGIN_FAILURE_LIMIT="8",
        LOGIN_ADDRESS_FAILURE_LIMIT="80",
        LOGIN_COOLOFF_MINUTES="30",
        NUM_PROXIES="1",
        API_THROTTLE_USER_RATE="100/min",
        API_THROTTLE_ANON_RATE="5/minute",
        API_WRONG_TOKEN_RATE="2/h",
    )

    result = run_manage("shell", "--no-imports", "-c", script, env=env)

    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["8", "80", "1800", "1", "100/min", "5/minute", "2/h"]


def test_an_address_ceiling_below_the_username_limit_is_refused(scratch_dir):
    env = child_env(
        DEBUG="true",
        DATA_DIR=str(scratch_dir),
        LOGIN_FAILURE_LIMIT="8",
        LOGIN_ADDRESS_FAILURE_LIMIT="3",
    )

    result = run_manage("check", env=env)

    assert result.returncode != 0
    assert "LOGIN_ADDRESS_FAILURE_LIMIT=3 must be at least LOGIN_FAILURE_LIMIT=8" in result.stderr


def test_waiver_bounds_come_from_the_environment_and_bad_ones_are_refused(scratch_dir):
    script = "from django.conf import settings as s; print(*sorted(s.WAIVER_MAX_DAYS.items()))"
    env = child_env(DEBUG="true", DATA_DIR=str(scratch_dir), WAIVER_MAX_DAYS_PRODUCTION="7")

    result = run_manage("shell", "--no-imports", "-c", script, env=env)

    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [
        "('experimental',",
        "90)",
        "('internal',",
        "30)",
        "('production',",
        "7)",
    ]
    for value, refusal in (
        ("0", "WAIVER_MAX_DAYS_INTERNAL=0 must be 1 to 365 days"),
        ("9999", "WAIVER_MAX_DAYS_INTERNAL=9999 must be 1 to 365 days"),
        ("a month", "WAIVER_MAX_DAYS_INTERNAL='a month' is not a whole number"),
    ):
        env = child_env(DEBUG="true", DATA_DIR=str(scratch_dir), WAIVER_MAX_DAYS_INTERNAL=value)
        refused = run_manage("check", env=env)
        assert refused.returncode != 0
        assert refusal in refused.stderr


def test_a_malformed_rate_is_refused_with_its_name(monkeypatch):
    monkeypatch.setenv("LEDGER_RATE", "ten a minute")

    with pytest.raises(ImproperlyConfigured, match="LEDGER_RATE='ten a minute' is not a rate"):
        env_rate("LEDGER_RATE", "10/min")
    monkeypatch.delenv("LEDGER_RATE")
    assert env_rate("LEDGER_RATE", "10/min") == "10/min"


def _ed25519_pem() -> str:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    return (
        Ed25519PrivateKey.generate()
        .private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        .decode()
    )


def _production_env(scratch_dir, **overrides) -> dict[str, str]:
    import secrets

    return child_env(
        DEBUG="false",
        SECRET_KEY=secrets.token_urlsafe(50),
        HTTPS="true",
        LEDGER_SIGNING_KEY=_ed25519_pem(),
        LEDGER_SIGNING_KEY_FILE=None,  # the suite's, which would win over the value
        ALLOWED_HOSTS="ledger.example.com,testserver",
        DATA_DIR=str(scratch_dir),
        DJANGO_ALLOW_ASYNC_UNSAFE=None,  # the suite's own, which check --deploy refuses
        **overrides,
    )


def test_production_settings_pass_the_deployment_checklist(scratch_dir):
    result = run_manage(
        "check", "--deploy", "--fail-level", "WARNING", env=_production_env(scratch_dir)
    )

    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def test_the_deployment_checklist_warns_while_webhooks_borrow_replays_allow_list(scratch_dir):
    env = _production_env(
        scratch_dir, REPLAY_ALLOWED_HOSTS="10.20.0.0/16", WEBHOOK_ALLOWED_HOSTS=None
    )

    unset = run_manage("check", "--deploy", "--fail-level", "WARNING", env=env)
    env["WEBHOOK_ALLOWED_HOSTS"] = ""  # set, and empty: no webhook may go anywhere
    empty = run_manage("check", "--deploy", "--fail-level", "WARNING", env=env)

    assert unset.returncode != 0
    output = unset.stdout + unset.stderr
    assert "releases.W001" in output
    assert "WEBHOOK_ALLOWED_HOSTS is unset" in output
    assert "REPLAY_ALLOWED_HOSTS" in output
    assert empty.returncode == 0, empty.stdout + empty.stderr


def test_https_redirects_plain_requests_but_not_the_health_probes(scratch_dir):
    script = """
from django.test import Client
c = Client()
plain = c.get("/services/")
proxied = c.get("/services/", headers={"X-Forwarded-Proto": "https"})
print(plain.status_code, plain["Location"])
print(proxied.status_code, proxied["Strict-Transport-Security"])
print(c.get("/healthz").status_code, c.get("/readyz").status_code != 301)
"""
    result = run_manage("shell", "--no-imports", "-c", script, env=_production_env(scratch_dir))

    assert result.returncode == 0, result.stderr
    plain, proxied, health = result.stdout.strip().splitlines()
    assert plain == "301 https://testserver/services/"
    assert proxied == "302 max-age=3600; includeSubDomains; preload"
    assert health == "200 True"


def test_hsts_and_the_redirect_can_be_tuned(scratch_dir):
    script = (
        "from django.conf import settings as s; "
        "print(s.SECURE_HSTS_SECONDS, s.SECURE_HSTS_INCLUDE_SUBDOMAINS, s.SECURE_HSTS_PRELOAD, "
        "s.SECURE_SSL_REDIRECT)"
    )
    env = _production_env(
        scratch_dir,
        SECURE_HSTS_SECONDS="31536000",
        SECURE_HSTS_INCLUDE_SUBDOMAINS="false",
        SECURE_HSTS_PRELOAD="false",
        SECURE_SSL_REDIRECT="false",
    )

    result = run_manage("shell", "--no-imports", "-c", script, env=env)

    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["31536000", "False", "False", "False"]


def test_a_redis_cache_url_shares_the_cache_and_anything_else_is_refused(scratch_dir):
    script = "from django.conf import settings as s; print(s.CACHES['default']['BACKEND'])"
    env = child_env(DEBUG="true", DATA_DIR=str(scratch_dir), CACHE_URL="redis://127.0.0.1:6379/14")

    shared = run_manage("shell", "--no-imports", "-c", script, env=env)
    refused = run_manage("check", env={**env, "CACHE_URL": "memcached://127.0.0.1:11211"})

    assert shared.stdout.split() == ["django.core.cache.backends.redis.RedisCache"], shared.stderr
    assert refused.returncode != 0
    assert "CACHE_URL='memcached://127.0.0.1:11211' must be a redis:// or rediss:// URL" in (
        refused.stderr
    )


def test_after_make_run_the_readmes_commands_work_without_setting_anything(embedded_data_dir):
    scratch_dir = embedded_data_dir  # migrated as make run leaves it
    # make run writes var/local.env (scripts/write-local-env.sh); the commands the
    # README shows then run in that checkout with nothing else set.
    local_env = scratch_dir / "local.env"
    subprocess.run(["scripts/write-local-env.sh", str(local_env)], cwd=ROOT, check=True)
    assert oct(local_env.stat().st_mode & 0o777) == "0o600"
    text = local_env.read_text()
    assert "DEBUG=true" in text and re.search(r"^SECRET_KEY=\S{40,}$", text, re.M)
    env = child_env(
        DEBUG=None,
        SECRET_KEY=None,
        DATABASE_URL=None,  # the embedded defaults, as after make run
        CELERY_BROKER_URL=None,
        CELERY_RESULT_BACKEND=None,
        LEDGER_LOCAL_ENV=str(local_env),
        DATA_DIR=str(scratch_dir),
    )

    for command in (["--help"], ["migrate", "--noinput"], ["verify_ledger"]):
        result = run_manage(*command, env=env)
        assert result.returncode == 0, (command, result.stderr)
    # Written once: a second run keeps the key (sessions and signatures stay valid).
    subprocess.run(["scripts/write-local-env.sh", str(local_env)], cwd=ROOT, check=True)
    assert local_env.read_text() == text


def test_a_deployment_without_a_local_file_still_refuses_the_development_key(scratch_dir):
    env = child_env(DEBUG=None, SECRET_KEY=None, LEDGER_LOCAL_ENV=str(scratch_dir / "absent.env"))

    result = run_manage("check", env=env)

    assert result.returncode != 0
    assert "SECRET_KEY is the development key while DEBUG is off" in result.stderr
