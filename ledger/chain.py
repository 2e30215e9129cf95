"""The event chain: canonical JSON, hashing, serialized appends, verification."""

from __future__ import annotations

import datetime as dt
import decimal
import functools
import hashlib
import json
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection, models, transaction
from django.dispatch import Signal
from django.utils import timezone

from ledger import signing
from ledger.models import Event
from lib import metrics
from lib.actors import Actor

GENESIS_HASH = "0" * 64
# Sent with `events=[Event, …]` once they are inserted, inside the appending transaction:
# an app above the ledger that must act on some actions (the gateway records its config
# after a routing change) listens here, as the ledger knows no action of an app above it.
# A receiver either queues work on commit, or writes what must exist exactly when the
# recorded fact does (the releases app stores a service-day's cost with its run summary):
# its writes are part of the append, and an error in it rolls the append back.
events_appended = Signal()
# Any constant works; it only has to be the same for every writer of the chain.
_CHAIN_LOCK_KEY = 7_031_460_221


def _json_default(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC).isoformat(timespec="microseconds")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal | uuid.UUID):
        return str(value)
    if isinstance(value, models.Model):
        return value.pk
    if isinstance(value, set | frozenset | tuple):
        return sorted(value) if isinstance(value, set | frozenset) else list(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def canonical_json(data: Any) -> str:
    """Sorted keys, no insignificant spaces, UTF-8 text: one text for one value."""
    return json.dumps(
        data,
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        default=_json_default,
        allow_nan=False,
    )


def compute_hash(
    *,
    sequence: int,
    created_at: dt.datetime,
    actor_label: str,
    action: str,
    subject_type: str,
    subject_id: str,
    payload: str,
    prev_hash: str,
    service_id: int | None = None,
) -> str:
    body = canonical_json(
        {
            "sequence": sequence,
            "service": service_id,
            "created_at": created_at,
            "actor": actor_label,
            "action": action,
            "subject_type": subject_type,
            "subject_id": subject_id,
            "payload": payload,
            "prev_hash": prev_hash,
        }
    )
    return hashlib.sha256(body.encode()).hexdigest()


def subject_of(obj: models.Model) -> tuple[str, str]:
    return obj._meta.label_lower, str(obj.pk)


def _lock_chain() -> None:
    """Serialize appenders until commit.

    PostgreSQL: a transaction-scoped advisory lock. The head must then be read
    by a later statement: under READ COMMITTED a statement sees what was
    committed when it began, so a head read in the locking statement itself
    would be stale and fork the chain. SQLite's IMMEDIATE transactions (see
    settings) already admit one writer at a time.
    """
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_CHAIN_LOCK_KEY])


def _insert(events: list[Event]) -> None:
    """INSERT the events with plain SQL, many rows a statement: the ORM's per-save work
    would be spent while every other writer waits for the chain lock."""
    fields = [f for f in Event._meta.concrete_fields if not f.primary_key]
    columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    row = "(" + ", ".join(["%s"] * len(fields)) + ")"
    # PostgreSQL takes at most 65,535 parameters a statement; SQLite says its own limit.
    size = max(1, min(1000, connection.ops.bulk_batch_size(fields, events)))
    with connection.cursor() as cursor:
        for start in range(0, len(events), size):
            batch = events[start : start + size]
            params = [
                f.get_db_prep_save(getattr(event, f.attname), connection)
                for event in batch
                for f in fields
            ]
            cursor.execute(
                f"INSERT INTO {Event._meta.db_table} ({columns}) VALUES "  # noqa: S608 - names from the model
                f"{', '.join([row] * len(batch))} "
                f"RETURNING {connection.ops.quote_name(Event._meta.pk.column)}",
                params,
            )
            # Both databases return the rows of a multi-row VALUES in its order (as
            # Django's bulk_create relies on).
            for event, (pk,) in zip(batch, cursor.fetchall(), strict=True):
                event.pk = pk
                event._state.adding = False
                event._state.db = connection.alias


def service_id_of(subject: models.Model | None) -> int | None:
    """The service a subject belongs to: itself, or through its revision."""
    from ledger.models import Service

    if subject is None:
        return None
    if isinstance(subject, Service):
        return subject.pk
    service_id = getattr(subject, "service_id", None)
    if service_id:
        return service_id
    if getattr(subject, "revision_id", None):
        # Duck-typed: any model with a revision (a capability, a report, a replay backend).
        return subject.revision.service_id  # type: ignore[attr-defined]
    return None


@dataclass(frozen=True)
class NewEvent:
    """One event for `append_events`: what `append_event` takes, but the actor."""

    action: str
    subject: models.Model | tuple[str, str]
    payload: dict[str, Any]
    subject_label: str | None = None
    # Defaults to the service the subject belongs to.
    service_id: int | None = None


def append_event(
    *,
    actor: Actor,
    action: str,
    subject: models.Model | tuple[str, str],
    payload: dict[str, Any],
    subject_label: str | None = None,
    service_id: int | None = None,
) -> Event:
    """Append one event to the chain; must run inside the caller's transaction.

    `service_id` defaults to the service the subject belongs to.
    """
    entry = NewEvent(action, subject, payload, subject_label, service_id)
    return append_events([entry], actor=actor)[0]


def append_events(entries: Sequence[NewEvent], *, actor: Actor) -> list[Event]:
    """Append events in their order, by one actor, inside the caller's transaction.

    The chain lock is taken and the head read once for all of them, and they are
    inserted many rows a statement: what seeding thousands of records at once
    (`seed_demo --scale`) needs. Each event is hashed as `append_event` hashes it.
    """
    if not connection.in_atomic_block:
        raise RuntimeError(
            "append_event must run inside transaction.atomic() with the change it records"
        )
    events = [_prepare(actor, entry) for entry in entries]
    if not events:
        return []
    # Everything above is prepared before the lock; what follows holds it.
    _lock_chain()
    with connection.cursor() as cursor:
        cursor.execute("SELECT sequence, hash FROM ledger_event ORDER BY sequence DESC LIMIT 1")
        head = cursor.fetchone()
    sequence, prev_hash = head if head else (0, GENESIS_HASH)
    for event in events:
        sequence += 1
        event.sequence, event.prev_hash = sequence, prev_hash
        event.created_at = timezone.now()
        event.hash = prev_hash = compute_hash(
            sequence=event.sequence,
            created_at=event.created_at,
            actor_label=event.actor_label,
            action=event.action,
            subject_type=event.subject_type,
            subject_id=event.subject_id,
            payload=event.payload,
            prev_hash=event.prev_hash,
            service_id=event.service_id,
        )
        event.key_id, event.signature = signing.sign_event_hash(event.hash)
    _insert(events)
    # Counted once the events are there for good: a rolled-back append was never in the chain.
    for action, count in Counter(event.action for event in events).items():
        transaction.on_commit(
            functools.partial(metrics.CHAIN_APPENDS.labels(action=action).inc, count)
        )
    events_appended.send(sender=Event, events=events)
    return events


def _prepare(actor: Actor, entry: NewEvent) -> Event:
    subject, service_id = entry.subject, entry.service_id
    if isinstance(subject, models.Model):
        subject_type, subject_id = subject_of(subject)
        label = entry.subject_label if entry.subject_label is not None else str(subject)
        if service_id is None:
            service_id = service_id_of(subject)
    else:
        subject_type, subject_id = subject
        label = entry.subject_label or ""
    return Event(
        actor=actor,
        actor_label=actor.get_username() if actor is not None else "system",
        action=entry.action,
        subject_type=subject_type,
        subject_id=str(subject_id),
        subject_label=label[:200],
        service_id=service_id,
        payload=canonical_json(entry.payload),
    )


@dataclass(frozen=True)
class ChainReport:
    ok: bool
    count: int
    head_hash: str
    first_bad_sequence: int | None = None
    problem: str = ""
    # Signatures were checked from this event on; those before, when a checkpoint was taken.
    signatures_from: int = 1


def _rows(batch: int) -> Iterator[dict]:
    return (
        Event.objects.order_by("sequence")
        .values(
            "sequence",
            "created_at",
            "actor_label",
            "action",
            "subject_type",
            "subject_id",
            "payload",
            "prev_hash",
            "hash",
            "service_id",
            "key_id",
            "signature",
        )
        .iterator(chunk_size=batch)
    )


def verify_chain(batch: int = 5000, *, signatures_from: int = 1) -> ChainReport:
    """Recompute every hash from the stored fields and check the signature of each event
    from `signatures_from` on; report the first event that does not match.

    Checking a signature costs some ten times a hash: `checkpoints.verify_ledger` starts
    the signatures after the events a signed checkpoint vouches were checked, whose
    hashes the recomputed chain must still reach."""
    keys = signing.trusted_keys()
    expected_prev = GENESIS_HASH
    count = 0
    for row in _rows(batch):
        count += 1
        sequence = row["sequence"]
        if sequence != count:
            return ChainReport(
                False,
                count - 1,
                expected_prev,
                sequence,
                f"sequence jumps from {count - 1} to {sequence}",
            )
        if row["prev_hash"] != expected_prev:
            return ChainReport(
                False,
                count - 1,
                expected_prev,
                sequence,
                "prev_hash does not match the hash of the event before it",
            )
        recomputed = compute_hash(
            sequence=sequence,
            created_at=row["created_at"],
            actor_label=row["actor_label"],
            action=row["action"],
            subject_type=row["subject_type"],
            subject_id=row["subject_id"],
            payload=row["payload"],
            prev_hash=row["prev_hash"],
            service_id=row["service_id"],
        )
        if recomputed != row["hash"]:
            return ChainReport(
                False,
                count - 1,
                expected_prev,
                sequence,
                "its content does not match its hash (the row was changed after it was written)",
            )
        if sequence >= signatures_from and (
            problem := signing.event_signature_problem(
                row["hash"], row["key_id"], row["signature"], keys
            )
        ):
            return ChainReport(False, count - 1, expected_prev, sequence, problem, signatures_from)
        expected_prev = row["hash"]
    return ChainReport(True, count, expected_prev, signatures_from=signatures_from)


def first_unsigned(after: int, through: int, batch: int = 5000) -> int | None:
    """The first event in (after, through] whose signature does not vouch for its hash."""
    keys = signing.trusted_keys()
    rows = (
        Event.objects.filter(sequence__gt=after, sequence__lte=through)
        .order_by("sequence")
        .values_list("sequence", "hash", "key_id", "signature")
        .iterator(chunk_size=batch)
    )
    for sequence, own, key_id, signature in rows:
        if signing.event_signature_problem(own, key_id, signature, keys):
            return sequence
    return None


def head_hash() -> str:
    return (
        Event.objects.order_by("-sequence").values_list("hash", flat=True).first() or GENESIS_HASH
    )
