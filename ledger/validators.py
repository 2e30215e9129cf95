"""Field validators whose refusals teach: each names what would be accepted."""

from __future__ import annotations

import difflib
import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path

from django.core.exceptions import ValidationError
from django.utils.functional import Promise
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
EXAMPLE_DIGEST = "sha256:" + "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
LICENSE_REF_RE = re.compile(r"^LicenseRef-[A-Za-z0-9.\-]+$")
# registry/path/repo[:tag][@sha256:<64 hex>] — the OCI distribution reference grammar, simplified.
IMAGE_RE = re.compile(
    r"^(?P<name>[a-z0-9]+(?:[._\-/:][a-z0-9]+)*?(?:/[a-z0-9]+(?:[._\-][a-z0-9]+)*)*)"
    r"(?::(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}))?"
    r"(?:@(?P<digest>sha256:[0-9a-f]{64}))?$"
)


def validate_digest(value: str) -> None:
    if DIGEST_RE.match(value or ""):
        return
    hint = ""
    bare = (value or "").removeprefix("sha256:")
    if re.fullmatch(r"[0-9a-fA-F]{64}", bare):
        if bare != bare.lower():
            hint = " " + _("Use lowercase hexadecimal.")
        if not value.startswith("sha256:"):
            hint += " " + _("Add the 'sha256:' prefix.")
    elif re.fullmatch(r"[0-9a-fA-F]*", bare):
        hint = " " + _("It has %(count)d hexadecimal characters; a sha256 digest has 64.") % {
            "count": len(bare)
        }
    raise ValidationError(
        _(
            "Expected 'sha256:' followed by 64 lowercase hexadecimal characters, "
            "e.g. %(example)s; got %(value)r.%(hint)s"
        ),
        code="digest",
        params={"value": value, "example": EXAMPLE_DIGEST, "hint": hint},
    )


@functools.cache
def spdx_licenses() -> dict[str, dict]:
    """The shipped SPDX License List (id -> name, deprecated, osi_approved)."""
    path = Path(__file__).with_name("data") / "spdx_licenses.json"
    return json.loads(path.read_text())["licenses"]


def closest_spdx_id(value: str) -> str | None:
    ids = spdx_licenses()
    by_lower = {key.lower(): key for key in ids}
    if value.lower() in by_lower:
        return by_lower[value.lower()]
    matches = difflib.get_close_matches(value.lower(), list(by_lower), n=1, cutoff=0.6)
    return by_lower[matches[0]] if matches else None


def validate_spdx_id(value: str) -> None:
    if LICENSE_REF_RE.match(value or ""):
        return
    licenses = spdx_licenses()
    if value in licenses:
        if licenses[value]["deprecated"]:
            raise ValidationError(
                _(
                    "%(value)s is a deprecated SPDX identifier; use its current form "
                    "(e.g. GPL-3.0-only or GPL-3.0-or-later)."
                ),
                code="spdx_deprecated",
                params={"value": value},
            )
        return
    suggestion = closest_spdx_id(value or "")
    advice = (
        " " + _("Did you mean %(suggestion)r?") % {"suggestion": suggestion} if suggestion else ""
    )
    raise ValidationError(
        _(
            "%(value)r is not an SPDX license identifier.%(advice)s A license outside the SPDX "
            "list (e.g. a model's community license) is written LicenseRef-<name>, "
            "e.g. LicenseRef-Llama-3.1-Community."
        ),
        code="spdx",
        params={"value": value, "advice": advice},
    )


@dataclass(frozen=True)
class ImageReference:
    name: str
    tag: str | None
    digest: str | None

    @property
    def pinned(self) -> bool:
        return self.digest is not None


def parse_image(value: str) -> ImageReference:
    match = IMAGE_RE.match(value or "")
    if not match:
        raise ValidationError(
            _(
                "Expected a container image reference such as "
                "registry.example.com/inference/vllm-openai:v0.6.3@sha256:<64 hex>; got %(value)r."
            ),
            code="image",
            params={"value": value},
        )
    return ImageReference(match["name"], match["tag"], match["digest"])


def validate_image_reference(value: str) -> None:
    parse_image(value)


UNPINNED_IMAGE_WHY = (
    "A tag can be pushed again with different content, so rolling back to a revision "
    "that names only a tag may start a different image than the one that was tested."
)


def unpinned_image_message(value: str) -> str:
    return (
        f"The image {value!r} is not pinned by digest. {UNPINNED_IMAGE_WHY} "
        "Pin it as <repository>:<tag>@sha256:<64 hex>."
    )


def validate_json_object(value: object) -> None:
    if not isinstance(value, dict):
        raise ValidationError(
            _('Expected a JSON object such as {"max_model_len": 32768}; got %(kind)s.'),
            code="json_object",
            params={"kind": type(value).__name__},
        )


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def validate_override_reason(value: str, *, max_length: int = 500) -> None:
    """A reason recorded for setting a rule aside: words a person wrote, one paragraph."""
    text = (value or "").strip()
    if not text:
        raise ValidationError(_("Give the reason in words."), code="required")
    if len(text) > max_length:
        raise ValidationError(
            _("The reason has %(length)d characters; keep it to %(max)d."),
            code="max_length",
            params={"length": len(text), "max": max_length},
        )
    if _CONTROL.search(text):
        raise ValidationError(
            _("The reason contains control characters; write it as plain text."), code="control"
        )


# ---------------------------------------------------------------- identifiers

# What an identifier field holds: no spaces, no markup, starting with a letter or digit.
_MARKUP = re.compile(r"[<>\"'`{}\\|^]")


@dataclass(frozen=True)
class IdentifierShape:
    """One kind of identifier: the characters it may hold, and an example to show."""

    what: str | Promise  # "a hub repository id or URL"
    allowed: str  # a regex character class body, e.g. "A-Za-z0-9._-"
    allowed_words: str | Promise  # the same in words, for the message
    example: str

    def check(self, value: str) -> None:
        if value == "":
            return  # a blank optional field; required ones say so themselves
        problem = None
        markup = _MARKUP.search(value)
        if re.search(r"\s", value):
            problem = _("it contains a space") if " " in value else _("it contains whitespace")
        elif markup:
            problem = _("it contains %(text)r") % {"text": markup.group()}
        elif not re.fullmatch(rf"[A-Za-z0-9][{self.allowed}]*", value):
            bad = next((c for c in value if not re.fullmatch(rf"[{self.allowed}]", c)), None)
            problem = (
                _("it contains %(text)r") % {"text": bad}
                if bad
                else _("it does not start with a letter or digit")
            )
        if problem:
            raise ValidationError(
                _(
                    "Expected %(what)s such as %(example)s: %(words)s, no spaces or markup; "
                    "%(problem)s."
                ),
                code="identifier",
                params={
                    "what": self.what,
                    "example": self.example,
                    "words": self.allowed_words,
                    "problem": problem,
                },
            )


REPOSITORY = IdentifierShape(
    what=gettext_lazy("a hub repository id or URL"),
    allowed=r"A-Za-z0-9._\-/:@+~%=?&#",
    allowed_words=gettext_lazy("letters, digits and . _ - / : @ + ~ % = ? & #"),
    example="Qwen/Qwen2.5-7B-Instruct or https://huggingface.co/Qwen/Qwen2.5-7B-Instruct",
)
VERSION = IdentifierShape(
    what=gettext_lazy("a version"),
    allowed=r"A-Za-z0-9._\-+",
    allowed_words=gettext_lazy("letters, digits and . _ - +"),
    example="0.6.3, v0.6.3.post1 or b4567",
)
NAME_TOKEN = IdentifierShape(
    what=gettext_lazy("a name"),
    allowed=r"A-Za-z0-9._\-+:/",
    allowed_words=gettext_lazy("letters, digits and . _ - + : /"),
    example="Qwen2.5-7B-Instruct-AWQ, qwen2.5 or gw-12",
)


# Plain functions, so that migrations refer to them by name.
def validate_repository(value: str) -> None:
    REPOSITORY.check(value)


def validate_version(value: str) -> None:
    VERSION.check(value)


def validate_name_token(value: str) -> None:
    NAME_TOKEN.check(value)


def validate_gpu_count(value: int) -> None:
    if value is not None and value < 1:
        raise ValidationError(
            _("A runtime runs on at least 1 GPU per replica; got %(value)s."),
            code="gpu_count",
            params={"value": value},
        )


def validate_gpu_memory(value: int | None) -> None:
    if value is not None and value < 1:
        raise ValidationError(
            _("GPU memory is at least 1 GB, or left empty when unknown; got %(value)s."),
            code="gpu_memory",
            params={"value": value},
        )
