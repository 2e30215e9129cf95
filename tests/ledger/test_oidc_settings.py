"""The identity provider's settings from the environment, and the refusals of bad ones."""

from __future__ import annotations

import pytest

from lib.group_map import grants_for, parse_group_map
from tests.support.processes import child_env, run_manage


def test_provider_settings_come_from_the_environment_with_the_secret_from_a_file(
    scratch_dir,
):
    secret = scratch_dir / "client-secret"
    secret.write_text("from-a-file\n")
    script = (
        "from django.conf import settings as s; "
        "print(s.OIDC_RP_CLIENT_ID, s.OIDC_RP_CLIENT_SECRET, s.OIDC_GROUPS_CLAIM, s.LOCAL_LOGIN, "
        "s.OIDC_GROUP_MAP['sre']['roles'][0], "
        "s.CONTENT_SECURITY_POLICY['DIRECTIVES']['form-action'][-1])"
    )
    env = child_env(
        DEBUG="true",
        DATA_DIR=str(scratch_dir),
        OIDC_ISSUER="https://kc.example.com/realms/acme",
        OIDC_CLIENT_ID="ledger",
        OIDC_CLIENT_SECRET_FILE=str(secret),
        OIDC_GROUPS_CLAIM="roles",
        OIDC_GROUP_MAP='{"sre": {"roles": ["platform_sre"]}}',
        LOCAL_LOGIN="false",
    )
    result = run_manage("shell", "--no-imports", "-c", script, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [
        "ledger",
        "from-a-file",
        "roles",
        "False",
        "platform_sre",
        "https://kc.example.com",
    ]


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"OIDC_ISSUER": "https://kc.example.com/realms/acme"}, "set OIDC_CLIENT_ID"),
        ({"LOCAL_LOGIN": "false"}, "LOCAL_LOGIN=false leaves only the identity provider"),
        ({"OIDC_GROUP_MAP": "[1]"}, "OIDC_GROUP_MAP: must be a JSON object"),
        ({"OIDC_GROUP_MAP": '{"g": {"roles": ["wizard"]}}'}, "ledger.E002"),
    ],
)
def test_bad_provider_settings_are_refused_with_their_names(scratch_dir, env, message):
    result = run_manage("check", env=child_env(DEBUG="true", DATA_DIR=str(scratch_dir), **env))
    assert result.returncode != 0
    assert message in result.stderr


def test_groups_add_up_and_unmapped_ones_give_nothing():
    group_map = parse_group_map(
        '{"a": {"roles": ["auditor"], "teams": ["x"]}, "b": {"roles": ["model_owner"]}}'
    )
    assert grants_for(["a", "b", "zzz"], group_map) == ({"auditor", "model_owner"}, {"x"})
    assert grants_for(["zzz"], group_map) == (set(), set())


def test_a_plain_http_issuer_is_refused_outside_loopback_and_development(scratch_dir):
    provider = {
        "OIDC_ISSUER": "http://idp.example.com/realms/acme",
        "OIDC_CLIENT_ID": "ledger",
        "OIDC_CLIENT_SECRET": "s3cret",
    }
    production = child_env(DEBUG="false", DATA_DIR=str(scratch_dir), **provider)
    result = run_manage("check", env=production)
    assert result.returncode != 0
    assert "is plain http://: use the provider's https:// issuer" in result.stderr
    loopback = {**provider, "OIDC_ISSUER": "http://127.0.0.1:9000/o"}
    result = run_manage(
        "check", env=child_env(DEBUG="false", DATA_DIR=str(scratch_dir), **loopback)
    )
    assert "is plain http://" not in result.stderr
