"""The ledger's signing key: Ed25519, for every event, chain checkpoints and exports.

Signed documents are DSSE envelopes (securesystemslib), so anyone holding the
public key can check them without this server; the key id is
securesystemslib's (sha256 of the canonical public key), stable for a key, and
is the fingerprint auditors pin. Each event's hash is signed too
(`sign_event_hash`): the database's password alone cannot add an event that
verifies.

Rotation: a new key in LEDGER_SIGNING_KEY signs from then on; the public keys
of retired ones stay in LEDGER_RETIRED_PUBLIC_KEYS (PEM blocks, one after the
other), so what they signed still verifies.

The private key is a PKCS#8 PEM in LEDGER_SIGNING_KEY (or LEDGER_SIGNING_KEY_FILE).
Without one, a key is generated once into DATA_DIR/keys/ (the embedded
default); `check --deploy` warns, because replicas on several machines would
each make their own.
"""

from __future__ import annotations

import base64
import functools
import json
import os
import re
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from securesystemslib.dsse import Envelope
from securesystemslib.exceptions import VerificationError
from securesystemslib.signer import CryptoSigner, Key, SSlibKey

# What an event's signature covers: its hash, under a context no other signed
# document of the ledger starts with (DSSE's begin with "DSSEv1").
EVENT_SIGNATURE_CONTEXT = b"inference-release-ledger/event/v1 "
_PEM_BLOCK = re.compile(r"-----BEGIN PUBLIC KEY-----.+?-----END PUBLIC KEY-----", re.DOTALL)


class SignatureInvalid(Exception):
    """A signed document does not verify against the ledger's public key."""


@functools.cache
def _generated_key_pem(path: Path) -> bytes:
    """The key file under DATA_DIR, created by whichever process gets there first (read
    once: every append signs)."""
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
def _private_key_for(pem: bytes) -> Ed25519PrivateKey:
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
    return key


@functools.cache
def _signer_for(pem: bytes) -> CryptoSigner:
    return CryptoSigner(_private_key_for(pem))


def signer() -> CryptoSigner:
    return _signer_for(_private_key_pem())


def public_key() -> SSlibKey:
    return signer().public_key


def key_id_of(key: Ed25519PublicKey) -> str:
    """securesystemslib's key id of a public key: the fingerprint auditors compare."""
    return SSlibKey.from_crypto(key).keyid


def public_key_pem() -> str:
    return _pem_of(_private_key_for(_private_key_pem()).public_key())


def _pem_of(key: Ed25519PublicKey) -> str:
    return key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    ).decode()


@functools.cache
def _retired_keys_for(text: str) -> tuple[Ed25519PublicKey, ...]:
    blocks = _PEM_BLOCK.findall(text)
    if text.strip() and not blocks:
        raise ImproperlyConfigured(
            "LEDGER_RETIRED_PUBLIC_KEYS holds no PEM public key (-----BEGIN PUBLIC KEY-----)."
        )
    keys = []
    for number, block in enumerate(blocks, start=1):
        try:
            key = serialization.load_pem_public_key(block.encode())
        except ValueError as error:
            raise ImproperlyConfigured(
                f"LEDGER_RETIRED_PUBLIC_KEYS: key {number} is not a PEM public key: {error}"
            ) from None
        if not isinstance(key, Ed25519PublicKey):
            raise ImproperlyConfigured(
                f"LEDGER_RETIRED_PUBLIC_KEYS: key {number} is {type(key).__name__}, not Ed25519."
            )
        keys.append(key)
    return tuple(keys)


def retired_public_keys() -> tuple[Ed25519PublicKey, ...]:
    return _retired_keys_for(settings.LEDGER_RETIRED_PUBLIC_KEYS)


@functools.cache
def _keyring_for(pem: bytes, retired: str) -> dict[str, Ed25519PublicKey]:
    current = _private_key_for(pem).public_key()
    ring = {key_id_of(key): key for key in _retired_keys_for(retired)}
    ring[key_id_of(current)] = current
    return ring


def trusted_keys() -> dict[str, Ed25519PublicKey]:
    """Every key whose signature the ledger accepts, by key id: the signing key and
    the retired ones."""
    return _keyring_for(_private_key_pem(), settings.LEDGER_RETIRED_PUBLIC_KEYS)


def fingerprints() -> list[tuple[str, bool]]:
    """The trusted keys' fingerprints (key ids), the signing key first, flagged True."""
    current = public_key().keyid
    return [(current, True)] + [(k, False) for k in trusted_keys() if k != current]


def retired_keys_pem() -> list[tuple[str, str]]:
    """(fingerprint, PEM) of each retired key."""
    return [(key_id_of(key), _pem_of(key)) for key in retired_public_keys()]


def trusted_keys_pem() -> str:
    """The trusted public keys as PEM blocks, the signing key first."""
    current = key_id_of(_private_key_for(_private_key_pem()).public_key())
    ring = trusted_keys()
    return "".join(_pem_of(ring[k]) for k in sorted(ring, key=lambda k: k != current))


def sign(payload: bytes, payload_type: str) -> dict[str, Any]:
    """A DSSE envelope of `payload`, signed with the ledger's key."""
    envelope = Envelope(payload=payload, payload_type=payload_type, signatures={})
    envelope.sign(signer())
    return envelope.to_dict()


def verify(envelope: dict[str, Any], *, payload_type: str) -> tuple[bytes, str]:
    """The payload of an envelope signed by a trusted key and that key's id, or
    SignatureInvalid."""
    try:
        parsed = Envelope.from_dict(json.loads(json.dumps(envelope)))
    except (KeyError, TypeError, ValueError) as error:
        raise SignatureInvalid(f"not a DSSE envelope: {error}") from None
    if parsed.payload_type != payload_type:
        raise SignatureInvalid(f"payload type is {parsed.payload_type!r}, not {payload_type!r}")
    keys: list[Key] = [
        SSlibKey.from_crypto(key, keyid=key_id) for key_id, key in trusted_keys().items()
    ]
    try:
        accepted = parsed.verify(keys, threshold=1)
    except VerificationError as error:
        raise SignatureInvalid(
            f"no valid signature by key {public_key().keyid[:16]}… or a retired one: {error}"
        ) from None
    return parsed.payload, next(iter(accepted))


# ---------------------------------------------------------------- events


def sign_event_hash(event_hash: str) -> tuple[str, str]:
    """(key id, base64 Ed25519 signature) of an event's hash, by the signing key."""
    pem = _private_key_pem()
    signature = _private_key_for(pem).sign(EVENT_SIGNATURE_CONTEXT + event_hash.encode())
    return _current_key_id(pem), base64.b64encode(signature).decode()


@functools.cache
def _current_key_id(pem: bytes) -> str:
    return key_id_of(_private_key_for(pem).public_key())


def event_signature_problem(
    event_hash: str, key_id: str, signature: str, keys: dict[str, Ed25519PublicKey]
) -> str | None:
    """Why an event's signature does not vouch for its hash, or None when it does."""
    if not signature:
        return (
            "it carries no signature, so the application did not write it "
            "(a row inserted with the database's password?)"
        )
    key = keys.get(key_id)
    if key is None:
        return (
            f"it is signed by key {key_id[:16]}…, which is neither the ledger's signing key "
            "nor one of LEDGER_RETIRED_PUBLIC_KEYS"
        )
    try:
        key.verify(
            base64.b64decode(signature, validate=True),
            EVENT_SIGNATURE_CONTEXT + event_hash.encode(),
        )
    except (InvalidSignature, ValueError):
        return f"its signature does not verify with key {key_id[:16]}… (forged, or copied from another event)"
    return None
