from __future__ import annotations

from django.contrib.auth import get_user_model
from rest_framework import serializers

from ledger.roles import roles_of


class WhoAmISerializer(serializers.ModelSerializer):
    roles = serializers.SerializerMethodField()

    class Meta:
        model = get_user_model()
        fields = ["id", "username", "first_name", "last_name", "email", "roles"]

    def get_roles(self, user) -> list[str]:
        return [role.value for role in roles_of(user)]
