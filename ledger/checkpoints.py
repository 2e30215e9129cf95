"""Checkpoints: the chain head recorded, signed, outside the database.

Recomputing the chain catches an edited, reordered or missing event in the
middle, but not a tail that was cut off: the chain left behind is still
consistent. A checkpoint records the head (sequence and hash) at a time,
signed with the ledger's key (a DSSE envelope, `ledger.signing`), in the
default file storage (S3 in production, the local media folder on the
embedded default), where the database's administrator cannot reach it.
`verify_ledger` then checks the chain against the newest checkpoint it can
read and names what is missing.

A checkpoint also says up to which event every signature was checked when it
was taken (`signed_through`, with that event's hash): the signatures after the
previous checkpoint's are checked then, so `verify_ledger` recomputes every hash
but checks only the signatures after it — a few minutes of work instead of the
whole chain's. An event whose signature fails stops that mark where it is.

A beat task takes one every LEDGER_CHECKPOINT_EVERY_MINUTES; exports take one
too; `manage.py checkpoint_ledger` takes one on demand.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass

from django.core.files.base import ContentFile
from django.core.files.storage import Storage, default_storage
from django.db.models import Max
from django.utils import timezone

from ledger import signing
from ledger.chain import GENESIS_HASH, ChainReport, canonical_json, first_unsigned, verify_chain
from ledger.models import Event
from lib import metrics

FOLDER = "checkpoints"
PAYLOAD_TYPE = "application/vnd.inference-release-ledger.checkpoint+json"
# At most this many signatures are checked per checkpoint (some seconds): a ledger that
# gained its signatures by migration gets its mark moved up over several checkpoints,
# never by one task that runs past its time limit and so moves nothing.
SIGNATURES_PER_CHECKPOINT = 200_000


@dataclass(frozen=True)
class Checkpoint:
    sequence: int
    hash: str
    taken_at: dt.datetime
    reason: str
    key_id: str
    name: str
    # Every event up to this one had a valid signature when the checkpoint was taken.
    signed_through: int = 0
    signed_through_hash: str = GENESIS_HASH


def _name(sequence: int, taken_at: dt.datetime) -> str:
    # Zero-padded, so the newest checkpoint is the greatest name.
    return f"{FOLDER}/{sequence:015d}-{taken_at:%Y%m%dT%H%M%S%fZ}.json"


def take_checkpoint(
    *,
    reason: str,
    storage: Storage | None = None,
    signatures_at_most: int = SIGNATURES_PER_CHECKPOINT,
) -> Checkpoint:
    """Record the chain head as it is now; an empty chain is recorded as sequence 0.
    At most `signatures_at_most` signatures past the previous mark are checked."""
    storage = storage or default_storage
    head = Event.objects.order_by("-sequence").values_list("sequence", "hash").first()
    sequence, head_hash = head or (0, GENESIS_HASH)
    signed = _signed_through(storage, sequence, head_hash, signatures_at_most)
    taken_at = timezone.now()
    statement = {
        "sequence": sequence,
        "hash": head_hash,
        "taken_at": taken_at,
        "reason": reason,
        "signed_through": {"sequence": signed[0], "hash": signed[1]},
    }
    envelope = signing.sign(canonical_json(statement).encode(), PAYLOAD_TYPE)
    name = storage.save(_name(sequence, taken_at), ContentFile(json.dumps(envelope).encode()))
    return Checkpoint(
        sequence, head_hash, taken_at, reason, signing.public_key().keyid, name, *signed
    )


def _signed_through(
    storage: Storage, sequence: int, head_hash: str, at_most: int
) -> tuple[int, str]:
    """How far every signature holds now: from the newest checkpoint's mark (if the
    event there is still the one it vouched for) to the head, or to where one fails,
    or as far as `at_most` signatures reach."""
    try:
        previous = newest_checkpoint(storage)
    except CheckpointUnreadable:
        previous = None
    start, start_hash = 0, GENESIS_HASH
    if previous is not None and _hash_at(previous.signed_through) == previous.signed_through_hash:
        start, start_hash = previous.signed_through, previous.signed_through_hash
    if start >= sequence:
        return start, start_hash
    through = min(sequence, start + at_most)
    failing = first_unsigned(start, through)
    if failing is None:
        return (sequence, head_hash) if through == sequence else (through, _hash_at(through))
    if failing - 1 == start:
        return start, start_hash
    return failing - 1, _hash_at(failing - 1)


def _hash_at(sequence: int) -> str:
    if sequence == 0:
        return GENESIS_HASH
    stored = Event.objects.filter(sequence=sequence).values_list("hash", flat=True).first()
    return stored or ""


class CheckpointUnreadable(Exception):
    """The newest checkpoint cannot be trusted: unreadable, or not signed by the ledger's key."""


def _read(storage: Storage, name: str) -> Checkpoint:
    try:
        with storage.open(name) as stored:
            envelope = json.loads(stored.read())
        signed, key_id = signing.verify(envelope, payload_type=PAYLOAD_TYPE)
        payload = json.loads(signed)
        # Checkpoints taken before events were signed vouch for no signature.
        mark = payload.get("signed_through") or {"sequence": 0, "hash": GENESIS_HASH}
        return Checkpoint(
            sequence=int(payload["sequence"]),
            hash=str(payload["hash"]),
            taken_at=dt.datetime.fromisoformat(payload["taken_at"]),
            reason=str(payload.get("reason", "")),
            key_id=key_id,
            name=name,
            signed_through=int(mark["sequence"]),
            signed_through_hash=str(mark["hash"]),
        )
    except signing.SignatureInvalid as error:
        raise CheckpointUnreadable(f"{name}: {error}") from None
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise CheckpointUnreadable(f"{name} cannot be read: {error}") from None


def newest_checkpoint(storage: Storage | None = None) -> Checkpoint | None:
    """The checkpoint with the highest sequence (then the latest time); None if there is none.

    Raises CheckpointUnreadable when that newest one does not verify: an older
    one would let a cut tail through.
    """
    storage = storage or default_storage
    try:
        _, files = storage.listdir(FOLDER)
    except FileNotFoundError:
        return None
    names = sorted(f for f in files if f.endswith(".json"))
    if not names:
        return None
    return _read(storage, f"{FOLDER}/{names[-1]}")


@dataclass(frozen=True)
class CheckpointCheck:
    ok: bool
    checkpoint: Checkpoint | None
    problem: str = ""


def _newest_or_problem(storage: Storage | None) -> tuple[Checkpoint | None, str]:
    try:
        return newest_checkpoint(storage), ""
    except CheckpointUnreadable as error:
        return None, f"the newest checkpoint cannot be trusted: {error}"


def check_against_checkpoint(storage: Storage | None = None) -> CheckpointCheck:
    """Does the chain still reach the newest checkpoint, with the event it signed there?

    Run after `verify_chain`: that the events up to the end link and match their
    hashes is its part; that the end is not earlier than it was is this one's.
    """
    return _check(*_newest_or_problem(storage))


def _check(checkpoint: Checkpoint | None, unreadable: str) -> CheckpointCheck:
    if unreadable:
        return CheckpointCheck(False, None, unreadable)
    if checkpoint is None:
        return CheckpointCheck(True, None, "")
    seen = f"#{checkpoint.sequence} ({checkpoint.hash[:12]}…) of {checkpoint.taken_at:%Y-%m-%d %H:%M:%S %Z}"
    last = Event.objects.aggregate(last=Max("sequence"))["last"] or 0
    if last < checkpoint.sequence:
        missing = (
            f"event #{checkpoint.sequence} is"
            if last + 1 == checkpoint.sequence
            else f"events #{last + 1} to #{checkpoint.sequence} are"
        )
        return CheckpointCheck(
            False,
            checkpoint,
            f"{missing} missing: the checkpoint {seen} saw the chain that far, "
            f"and it now ends at #{last}",
        )
    if checkpoint.sequence == 0:
        return CheckpointCheck(True, checkpoint)
    stored = (
        Event.objects.filter(sequence=checkpoint.sequence).values_list("hash", flat=True).first()
    )
    if stored != checkpoint.hash:
        return CheckpointCheck(
            False,
            checkpoint,
            f"event #{checkpoint.sequence} is not the one the checkpoint {seen} signed",
        )
    return CheckpointCheck(True, checkpoint)


@dataclass(frozen=True)
class LedgerReport:
    """The chain recomputed, and checked against the newest checkpoint."""

    chain: ChainReport
    checkpoint: CheckpointCheck

    @property
    def ok(self) -> bool:
        return self.chain.ok and self.checkpoint.ok


def verify_ledger(storage: Storage | None = None) -> LedgerReport:
    checkpoint, unreadable = _newest_or_problem(storage)
    signatures_from = 1
    # The events up to the mark are those the checkpoint saw signed, as long as the
    # recomputed chain still reaches the hash it recorded there.
    if (
        checkpoint is not None
        and checkpoint.signed_through
        and _hash_at(checkpoint.signed_through) == checkpoint.signed_through_hash
    ):
        signatures_from = checkpoint.signed_through + 1
    report = LedgerReport(
        verify_chain(signatures_from=signatures_from), _check(checkpoint, unreadable)
    )
    if not report.chain.ok:
        result = "chain_broken"
    elif not report.checkpoint.ok:
        result = "checkpoint_mismatch"
    else:
        result = "ok"
    metrics.VERIFICATIONS.labels(result=result).inc()
    metrics.LAST_VERIFICATION.labels(result=result).set_to_current_time()
    return report
