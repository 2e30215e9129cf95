from __future__ import annotations

import pytest

from tests.factories import UserFactory
from tests.releases.factories import build_world, file_release


@pytest.fixture
def world(team):
    return build_world(team)


@pytest.fixture
def model_team_signer(team):
    """A second model owner of the team: the filer cannot sign, a teammate can."""
    user = UserFactory(username="mona", roles=["model_owner"])
    team.members.add(user)
    return user


@pytest.fixture
def release(world, owner):
    return file_release(world, owner)


@pytest.fixture
def signers(model_team_signer, sre, security, business):
    return {
        "model_team": model_team_signer,
        "platform": sre,
        "security_compliance": security,
        "business_owner": business,
    }


@pytest.fixture
def other_sre():
    """A second platform SRE: who waives a platform gate does not sign platform."""
    return UserFactory(username="pat", roles=["platform_sre"])
