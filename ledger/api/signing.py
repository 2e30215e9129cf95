"""GET /api/ledger/signing-key/: the public key that signs checkpoints and export bundles."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from ledger import signing


class SigningKeySerializer(serializers.Serializer):
    algorithm = serializers.CharField(help_text="Always ed25519.")
    key_id = serializers.CharField(help_text="securesystemslib's key id: sha256 of the key.")
    public_key_pem = serializers.CharField(help_text="SubjectPublicKeyInfo PEM.")


class SigningKeyView(APIView):
    @extend_schema(
        summary="The ledger's public signing key, to pin before verifying a bundle",
        responses={200: SigningKeySerializer},
    )
    def get(self, request: Request) -> Response:
        data = {
            "algorithm": "ed25519",
            "key_id": signing.public_key().keyid,
            "public_key_pem": signing.public_key_pem(),
        }
        return Response(SigningKeySerializer(data).data)
