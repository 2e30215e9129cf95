"""The ledger's signing key: Ed25519, for chain checkpoints and export attestations.

Signed documents are DSSE envelopes (securesystemslib), so anyone holding the
public key can check them without this server; the key id is
securesystemslib's (sha256 of the canonical public key), stable for a key.

The private key is a PKCS#8 PEM in LEDGER_SIGNING_KEY (or LEDGER_SIGNING_KEY_FILE).
Without one, a key is generated once into DATA_DIR/keys/ (the embedded
default); `check --deploy` warns, because replicas on several machines would
each make their own.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from securesystemslib.dsse import Envelope
from securesystemslib.exceptions import VerificationError
from securesystemslib.signer import CryptoSigner, SSlibKey


class SignatureInvalid(Exception):
    """A signed document does not verify against the ledger's public key."""


def _generated_key_pem(path: Path) -> bytes:
    """The key file under DATA_DIR, created by whichever process gets there first."""
    if path.exists():
        return path.read_bytes()
    path.parent.mkdir(parents=True, exist_ok=True)
    pem = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_bytes()
    with os.fdopen(fd, "wb") as out:
        out.write(pem)
    return pem


def _private_key_pem() -> bytes:
    configured = settings.LEDGER_SIGNING_KEY
    if configured:
        return configured.encode()
    return _generated_key_pem(Path(settings.LEDGER_SIGNING_KEY_PATH))


@functools.cache
def _signer_for(pem: bytes) -> CryptoSigner:
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except ValueError as error:
        raise ImproperlyConfigured(
            f"LEDGER_SIGNING_KEY is not a PEM private key: {error}"
        ) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise ImproperlyConfigured(
            f"LEDGER_SIGNING_KEY must be an Ed25519 key, not {type(key).__name__}."
        )
    return CryptoSigner(key)


def signer() -> CryptoSigner:
    return _signer_for(_private_key_pem())


def public_key() -> SSlibKey:
    return signer().public_key


def public_key_pem() -> str:
    raw = bytes.fromhex(public_key().keyval["public"])
    return (
        Ed25519PublicKey.from_public_bytes(raw)
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )


def sign(payload: bytes, payload_type: str) -> dict[str, Any]:
    """A DSSE envelope of `payload`, signed with the ledger's key."""
    envelope = Envelope(payload=payload, payload_type=payload_type, signatures={})
    envelope.sign(signer())
    return envelope.to_dict()


def verify(envelope: dict[str, Any], *, payload_type: str) -> bytes:
    """The payload of an envelope signed by the ledger's key, or SignatureInvalid."""
    try:
        parsed = Envelope.from_dict(json.loads(json.dumps(envelope)))
    except (KeyError, TypeError, ValueError) as error:
        raise SignatureInvalid(f"not a DSSE envelope: {error}") from None
    if parsed.payload_type != payload_type:
        raise SignatureInvalid(f"payload type is {parsed.payload_type!r}, not {payload_type!r}")
    key = public_key()
    try:
        parsed.verify([key], threshold=1)
    except VerificationError as error:
        raise SignatureInvalid(f"no valid signature by key {key.keyid[:16]}…: {error}") from None
    return parsed.payload
