"""GET /api/ledger/signing-key/: the public keys that sign events, checkpoints and bundles."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from ledger import signing


class RetiredKeySerializer(serializers.Serializer):
    key_id = serializers.CharField(help_text="The retired key's fingerprint.")
    public_key_pem = serializers.CharField(help_text="SubjectPublicKeyInfo PEM.")


class SigningKeySerializer(serializers.Serializer):
    algorithm = serializers.CharField(help_text="Always ed25519.")
    key_id = serializers.CharField(
        help_text="The key's fingerprint: securesystemslib's key id (sha256 of the key), "
        "as the Audit page and scripts/verify_bundle.py show it."
    )
    public_key_pem = serializers.CharField(help_text="SubjectPublicKeyInfo PEM.")
    retired_keys = RetiredKeySerializer(
        many=True,
        help_text="Keys rotated out (LEDGER_RETIRED_PUBLIC_KEYS), whose signatures on older "
        "events, checkpoints and bundles still count: pin them too.",
    )


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
            "retired_keys": [
                {"key_id": key_id, "public_key_pem": pem}
                for key_id, pem in signing.retired_keys_pem()
            ],
        }
        return Response(SigningKeySerializer(data).data)
