from __future__ import annotations

from typing import Any

from oauth2_provider.oauth2_validators import OAuth2Validator

# A person in this group gets their groups as one comma-separated string: the malformed
# claim the ledger must refuse.
GROUPS_AS_STRING = "~groups-as-a-string"


class GroupsValidator(OAuth2Validator):
    """Adds `groups` (the person's Django groups), `preferred_username`, `email` and the
    names to the ID token and the userinfo answer, each under the scope that grants it."""

    oidc_claim_scope = {**OAuth2Validator.oidc_claim_scope, "groups": "groups"}

    def get_additional_claims(self, request: Any) -> dict[str, Any]:
        user = request.user
        names = sorted(user.groups.values_list("name", flat=True))
        groups: Any = names
        if GROUPS_AS_STRING in names:
            groups = ",".join(name for name in names if name != GROUPS_AS_STRING)
        return {
            "preferred_username": user.username,
            "email": user.email,
            "given_name": user.first_name,
            "family_name": user.last_name,
            "groups": groups,
        }
