from django.contrib.auth import authenticate, get_user_model
from django.core.management import call_command
from django.test import RequestFactory

from ledger.roles import Role, roles_of


def test_seed_demo_creates_one_login_per_role_and_is_idempotent(db, capsys):
    # axes counts sign-ins per address: authenticate() needs the request.
    request = RequestFactory().post("/accounts/login/")
    call_command("seed_demo")
    first_count = get_user_model().objects.count()
    call_command("seed_demo")

    assert get_user_model().objects.count() == first_count == 7
    for username, role in [
        ("owner", Role.MODEL_OWNER),
        ("owner2", Role.MODEL_OWNER),
        ("sre", Role.PLATFORM_SRE),
        ("security", Role.SECURITY_COMPLIANCE),
        ("business", Role.BUSINESS_OWNER),
        ("auditor", Role.AUDITOR),
    ]:
        user = authenticate(request, username=username, password="demo")
        assert user is not None, username
        assert roles_of(user) == [role]
    assert authenticate(request, username="admin", password="demo").is_superuser
    assert "password for each: demo" in capsys.readouterr().out
    # Who to call on the incident screen has a number to tap for the on-call SRE.
    assert get_user_model().objects.get(username="sre").contact.phone == "+1 202 555 0142"
