"""Argument helpers the replay commands share."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.management.base import CommandError

from replay.models import SampleSet
from replay.services import get_sample_set


def messages(error: ValidationError) -> list[str]:
    if hasattr(error, "error_dict"):
        return [
            f"{field}: {message}" if field != "__all__" else message
            for field, errors in error.message_dict.items()
            for message in errors
        ]
    return list(error.messages)


def sample_set_arg(value: str) -> SampleSet:
    """NAME or NAME@VERSION -> the sample set (the latest version without @)."""
    name, at, version_text = value.partition("@")
    version = None
    if at:
        if not version_text.isdigit():
            raise CommandError(f"--sample-set {value}: the version after @ must be a number")
        version = int(version_text)
    sample_set = get_sample_set(name, version)
    if sample_set is None:
        known = sorted(set(SampleSet.objects.values_list("name", flat=True)))
        hint = f" Known sets: {', '.join(known)}." if known else " Import one first."
        what = f"{name} version {version}" if version else name
        raise CommandError(f"no sample set {what}.{hint}")
    return sample_set
