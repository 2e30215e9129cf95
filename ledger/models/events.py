from __future__ import annotations

import json

import pgtrigger
from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _


class EventQuerySet(models.QuerySet):
    def for_subject(self, subject_type: str, subject_id: object) -> EventQuerySet:
        return self.filter(subject_type=subject_type, subject_id=str(subject_id))


class Event(models.Model):
    """One change anywhere in the ledger: an append-only, hash-chained, signed record.

    `payload` holds the canonical JSON text exactly as hashed, so verification
    never depends on how a database re-serializes JSON.
    """

    sequence = models.PositiveBigIntegerField(unique=True)
    created_at = models.DateTimeField()
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor_label = models.CharField(
        max_length=150, help_text=_("Username at the time, or 'system'.")
    )
    action = models.CharField(max_length=80)
    subject_type = models.CharField(max_length=80)
    subject_id = models.CharField(max_length=64)
    subject_label = models.CharField(max_length=200, blank=True)
    # The service a change belongs to, so a service page and an auditor's
    # per-service filter read one index instead of chasing subjects. No database
    # constraint: an append-only table never cascades.
    service = models.ForeignKey(
        "ledger.Service",
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="events",
    )
    payload = models.TextField(help_text=_("Canonical JSON: sorted keys, no spaces."))
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64)
    # Outside what the hash covers: the application's Ed25519 signature of the hash
    # (ledger.signing.sign_event_hash), which a database password alone cannot make.
    key_id = models.CharField(
        max_length=64, blank=True, help_text=_("Fingerprint of the key that signed the hash.")
    )
    signature = models.CharField(
        max_length=88, blank=True, help_text=_("Ed25519 signature of the hash, base64.")
    )

    objects = EventQuerySet.as_manager()

    class Meta:
        ordering = ["-sequence"]
        indexes = [
            # Service and object pages: "recent events of this subject".
            models.Index(
                fields=["subject_type", "subject_id", "-sequence"], name="ledger_event_subject_idx"
            ),
            # Service page timeline and the auditor's per-service filter.
            models.Index(fields=["service", "-sequence"], name="ledger_event_service_idx"),
            # Auditor filters by period.
            models.Index(fields=["created_at"], name="ledger_event_created_idx"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(sequence__gte=1), name="ledger_event_sequence_positive"
            ),
        ]
        triggers = [
            pgtrigger.Protect(
                name="ledger_event_append_only", operation=pgtrigger.Update | pgtrigger.Delete
            ),
            # TRUNCATE fires no row trigger; a statement-level one refuses it.
            pgtrigger.Trigger(
                name="ledger_event_no_truncate",
                operation=pgtrigger.Truncate,
                level=pgtrigger.Statement,
                when=pgtrigger.Before,
                func="RAISE EXCEPTION 'pgtrigger: Cannot truncate % table', TG_TABLE_NAME;",
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.sequence} {self.action} {self.subject_type}:{self.subject_id}"

    @property
    def payload_data(self) -> dict:
        return json.loads(self.payload)
