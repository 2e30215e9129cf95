"""Sign-off duties on roles and teams the identity provider gave: a model owner who signed
in through the provider files a release and cannot sign it; a teammate mapped the same way
signs for the model team."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied

from ledger.models import Team
from releases.governance import services
from tests.ledger.test_oidc_sign_in import sign_in
from tests.releases.factories import build_world, file_release


@pytest.mark.django_db
def test_a_filer_mapped_by_the_provider_cannot_sign_and_a_mapped_teammate_can(client, oidc):
    team = Team.objects.create(slug="kb-team", name="Knowledge base")
    oidc.user("kim", "provider-pass-k", ["kb-owners"])
    oidc.user("lee", "provider-pass-l", ["kb-owners"])
    sign_in(client, oidc, "kim", "provider-pass-k")
    client.post("/accounts/logout/")
    sign_in(client, oidc, "lee", "provider-pass-l")
    kim, lee = User.objects.get(username="kim"), User.objects.get(username="lee")
    assert set(team.members.all()) == {kim, lee}

    release = file_release(build_world(team), kim)
    services.submit_release(release, actor=kim)

    with pytest.raises(PermissionDenied, match="the filer cannot sign it off"):
        services.sign_off(release, actor=kim, role="model_team", decision="approve")
    services.sign_off(release, actor=lee, role="model_team", decision="approve")
