"""Sample sets: versioned, imported from and exported to JSON Lines.

A set is named; each import whose content differs from the latest version makes the
next version, and runs point at the version they used. Importing the same content
again changes nothing.
"""

from __future__ import annotations

import re

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils.translation import gettext as _

from ledger.chain import append_event
from lib.actors import Actor
from replay import jsonl as jsonl_format
from replay.models import Sample, SampleSet
from replay.permissions import ensure_can_manage_sample_sets

_NAME = re.compile(r"^[-a-zA-Z0-9_]{1,100}$")


def _specs_of(sample_set: SampleSet) -> list[dict]:
    return [
        {name: getattr(sample, name) for name in jsonl_format.FIELDS}
        for sample in sample_set.samples.order_by("key")
    ]


def get_sample_set(name: str, version: int | None = None) -> SampleSet | None:
    """A named set at a version, or its latest version."""
    sets = SampleSet.objects.filter(name=name)
    if version is not None:
        return sets.filter(version=version).first()
    return sets.order_by("-version").first()


@transaction.atomic
def import_sample_set(
    *, actor: Actor, name: str, jsonl: str, description: str = ""
) -> tuple[SampleSet, bool]:
    """Import a set from JSONL: (the new version, True), or (the latest, False) if unchanged.

    Every line is validated first; a problem raises ValidationError on ``jsonl``
    listing each one as ``line N: field: message`` and nothing is written.
    """
    ensure_can_manage_sample_sets(actor)
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValidationError(
            {"name": _("Give the set a name of 1-100 letters, digits, '-' and '_', e.g. kb-smoke.")}
        )
    try:
        specs = jsonl_format.parse_samples(jsonl_text_of(jsonl))
    except jsonl_format.JsonlError as error:
        raise ValidationError({"jsonl": error.errors}) from None
    latest = SampleSet.objects.select_for_update().filter(name=name).order_by("-version").first()
    digest = jsonl_format.content_digest(specs)
    if latest is not None and jsonl_format.content_digest(_specs_of(latest)) == digest:
        return latest, False
    version = latest.version + 1 if latest else 1
    try:
        with transaction.atomic():
            sample_set = SampleSet.objects.create(
                name=name,
                version=version,
                description=description,
                created_by=actor,
            )
    except IntegrityError:
        raise ValidationError(
            {
                "name": _(
                    "Another import of %(name)s made version %(version)s at the same time; retry."
                )
                % {"name": name, "version": version}
            }
        ) from None
    Sample.objects.bulk_create(Sample(sample_set=sample_set, **spec) for spec in specs)
    append_event(
        actor=actor,
        action="replay.sample_set_imported",
        subject=sample_set,
        payload={
            "name": name,
            "version": version,
            "previous_version": latest.version if latest else None,
            "content_digest": digest,
            "samples": len(specs),
            "keys": sorted(spec["key"] for spec in specs),
        },
    )
    return sample_set, True


def jsonl_text_of(value: str | bytes) -> str:
    """Uploaded files arrive as bytes: JSONL is UTF-8 (a BOM is tolerated)."""
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8-sig")
        except UnicodeDecodeError as error:
            raise ValidationError(
                {"jsonl": [_("the file is not UTF-8 text: %(error)s") % {"error": error}]}
            ) from None
    return value.removeprefix("\ufeff")


def export_sample_set(sample_set: SampleSet) -> str:
    """The set as JSONL, one sample per line in key order, defaults left out."""
    return jsonl_format.dump_samples(_specs_of(sample_set))
