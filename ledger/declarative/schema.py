"""The registry format's keys and types, and the structural check of a document.

`validate()` checks shape only: known keys (with a suggestion for a typo),
types, choices, references written the right way, entries declared once. It
does not read the database; `apply` resolves references and the domain layer
judges the values (digests, licenses, images, launch parameters…).
"""

from __future__ import annotations

import datetime as dt
import difflib
import math
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from ledger.declarative import extensions as extension_registry
from ledger.declarative.document import Document, DocumentError, Path, Problem, format_path
from ledger.engines import Engine
from ledger.models import Capability, License, ModelAsset, Service

FORMAT_VERSION = 1


@dataclass(frozen=True)
class Key:
    """One key of an entry: its type, and whether it must be given / may be null."""

    type: str
    required: bool = False
    nullable: bool = False
    choices: tuple[str, ...] = ()
    section: Section | None = None  # for "entries" (a list of mappings) and "mapping"


@dataclass(frozen=True)
class Section:
    noun: str
    keys: dict[str, Key]
    identity: tuple[str, ...] = ()

    @property
    def required(self) -> list[str]:
        return [name for name, key in self.keys.items() if key.required]


def _choices(enum) -> tuple[str, ...]:
    return tuple(value for value, _ in enum.choices)


TEAM = Section(
    "team",
    {
        "slug": Key("text", required=True),
        "name": Key("text", required=True),
        "members": Key("names"),
    },
    identity=("slug",),
)

LICENSE = Section(
    "license",
    {
        "spdx_id": Key("text", required=True),
        "name": Key("text", required=True),
        "kind": Key("choice", choices=_choices(License.Kind)),
        "gated": Key("bool"),
        "terms_url": Key("text"),
    },
    identity=("spdx_id",),
)

ACCEPTANCE = Section(
    "license acceptance",
    {
        "terms_version": Key("text", required=True),
        "accepted_by": Key("text", required=True),
        "accepted_at": Key("datetime", required=True),
        "note": Key("text"),
    },
    identity=("terms_version", "accepted_by"),
)

MODEL_ASSET = Section(
    "model asset",
    {
        "name": Key("text", required=True),
        "revision": Key("text", required=True),
        "team": Key("text", required=True),
        "family": Key("text", required=True),
        "source_repository": Key("text", required=True),
        "license": Key("text", required=True),
        "license_approval": Key("choice", choices=_choices(ModelAsset.LicenseApproval)),
        "quantization": Key("choice", choices=_choices(ModelAsset.Quantization)),
        "derived_from": Key("asset_ref", nullable=True),
        "derivation": Key("choice", choices=_choices(ModelAsset.Derivation)),
        "weights_digest": Key("text", required=True),
        "tokenizer_id": Key("text"),
        "tokenizer_digest": Key("text", required=True),
        "chat_template_digest": Key("text", required=True),
        "generation_config_digest": Key("text", required=True),
        "config_digest": Key("text", required=True),
        "model_card_url": Key("text"),
        "lifecycle": Key("choice", choices=_choices(ModelAsset.Lifecycle)),
        "deprecated_on": Key("date", nullable=True),
        "retired_on": Key("date", nullable=True),
        "license_acceptances": Key("entries", section=ACCEPTANCE),
    },
    identity=("name", "revision"),
)

RUNTIME = Section(
    "runtime",
    {
        "name": Key("text", required=True),
        "team": Key("text", required=True),
        "engine": Key("choice", required=True, choices=_choices(Engine)),
        "engine_version": Key("text", required=True),
        "image": Key("text", required=True),
        "launch_parameters": Key("object"),
        "gpu_model": Key("text"),
        "gpu_count": Key("int"),
        "gpu_memory_gb": Key("int", nullable=True),
        "cuda_version": Key("text"),
        "driver_version": Key("text"),
    },
    identity=("name",),
)

REVISION = Section(
    "revision",
    {
        "number": Key("int", required=True),
        "model_asset": Key("asset_ref", required=True),
        "runtime": Key("text", required=True),
        "context_limit": Key("int", required=True),
        "gateway_policy_version": Key("text", required=True),
        "based_on": Key("int", nullable=True),
        "notes": Key("text"),
        "capabilities": Key("capabilities"),
    },
    identity=("number",),
)

GATEWAY_POLICY = Section(
    "gateway policy version",
    {
        "version": Key("int", required=True),
        # Only a version known by name only (document: null) has a label other than v<n>.
        "label": Key("text"),
        "note": Key("text"),
        "document": Key("policy", required=True, nullable=True),
    },
    identity=("version",),
)

SLOS = Section(
    "SLO set",
    {
        "ttft_p95_ms": Key("int", nullable=True),
        "ttft_p99_ms": Key("int", nullable=True),
        "tpot_ms": Key("int", nullable=True),
        "error_rate_pct": Key("decimal", nullable=True),
        "min_output_tokens_per_s": Key("int", nullable=True),
        "min_concurrency": Key("int", nullable=True),
        "timeout_rate_pct": Key("decimal", nullable=True),
    },
)

SERVICE = Section(
    "service",
    {
        "slug": Key("text", required=True),
        "name": Key("text", required=True),
        "description": Key("text"),
        "team": Key("text", required=True),
        "tier": Key("choice", choices=_choices(Service.Tier)),
        "exposure": Key("choice", choices=_choices(Service.Exposure)),
        "task_types": Key("names"),
        "tenants": Key("texts"),
        "slos": Key("mapping", section=SLOS),
        "review_cadence_days": Key("int"),
        "live_revision": Key("int"),
        "gateway_policies": Key("entries", section=GATEWAY_POLICY),
        "revisions": Key("entries", section=REVISION),
    },
    identity=("slug",),
)

TOP = Section(
    "registry document",
    {
        "version": Key("int"),
        "teams": Key("entries", section=TEAM),
        "licenses": Key("entries", section=LICENSE),
        "model_assets": Key("entries", section=MODEL_ASSET),
        "runtimes": Key("entries", section=RUNTIME),
        "services": Key("entries", section=SERVICE),
    },
)

# Service SLO keys in the document -> model fields.
SLO_FIELDS = {name.removeprefix("slo_"): name for name in Service.SLO_FIELDS}
CAPABILITY_KINDS = _choices(Capability.Kind)


@dataclass
class Entry:
    """One validated entry: the keys the document gave, normalized, and where it is."""

    path: Path
    values: dict[str, Any]
    children: dict[str, list[Entry]] = field(default_factory=dict)
    identity: Any = None

    def has(self, key: str) -> bool:
        return key in self.values

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)


@dataclass
class ValidDocument:
    teams: list[Entry]
    licenses: list[Entry]
    model_assets: list[Entry]
    runtimes: list[Entry]
    services: list[Entry]
    # Sections other apps add (see `extensions`): key -> the extension's normalized value.
    extensions: dict[str, Any] = field(default_factory=dict)


class _Bad(Exception):
    pass


def suggest(word: str, candidates) -> str | None:
    """The closest known spelling(s), quoted, e.g. "'production'" or "'int4-awq' or 'int4-gptq'"."""
    known = list(dict.fromkeys(str(candidate) for candidate in candidates))
    text = str(word)
    by_lower = {candidate.lower(): candidate for candidate in known}
    if text.lower() in by_lower:
        return repr(by_lower[text.lower()])
    if len(text) >= 3:
        prefixed = [candidate for candidate in known if candidate.lower().startswith(text.lower())]
        if 0 < len(prefixed) <= 3:
            return " or ".join(repr(candidate) for candidate in prefixed)
    matches = difflib.get_close_matches(text, known, n=1, cutoff=0.6)
    return repr(matches[0]) if matches else None


def declared_label(policy: Entry) -> str:
    """How revisions name a gateway policy version the document declares."""
    label: str = policy.get("label") or f"v{policy['version']}"
    return label


def parse_asset_ref(value: str) -> tuple[str, str]:
    name, at, revision = value.rpartition("@")
    if not at or not name or not revision:
        raise _Bad(
            f"expected <name>@<revision> of a model asset, e.g. Qwen2.5-7B-Instruct@main; got {value!r}"
        )
    return name, revision


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dt.datetime | dt.date):
        return "a date"
    return type(value).__name__


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    hint = ""
    if isinstance(value, bool | int | float | dt.date):
        hint = f"; quote it if it is meant as text: '{_yaml_scalar(value)}'"
    raise _Bad(f"expected text, got {_type_name(value)}{hint}")


def _yaml_scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dt.date):
        return value.isoformat()
    return str(value)


def json_value(value: Any, where: str = "") -> Any:
    """A YAML value as JSON: mapping keys become text; dates and NaN are refused."""
    if isinstance(value, dict):
        return {str(key): json_value(item, where) for key, item in value.items()}
    if isinstance(value, list):
        return [json_value(item, where) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        raise _Bad(f"{where}{value} is not a JSON number")
    if isinstance(value, dt.date | dt.datetime):
        raise _Bad(f"{where}a date is not a JSON value; quote it: '{_yaml_scalar(value)}'")
    if value is None or isinstance(value, str | int | float | bool):
        return value
    raise _Bad(f"{where}{_type_name(value)} is not a JSON value")


def _convert(key: Key, value: Any) -> Any:
    kind = key.type
    if kind in ("text", "asset_ref", "choice"):
        text = _text(value)
        if kind == "asset_ref":
            parse_asset_ref(text)
        if kind == "choice" and text not in key.choices:
            close = suggest(text, key.choices)
            advice = f"; did you mean {close}?" if close else ""
            raise _Bad(f"{text!r} is not one of {', '.join(key.choices)}{advice}")
        return text
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise _Bad(f"expected a whole number, got {_type_name(value)} {value!r}")
        return value
    if kind == "bool":
        if not isinstance(value, bool):
            raise _Bad(f"expected true or false, got {_type_name(value)} {value!r}")
        return value
    if kind == "decimal":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _Bad(f"expected a number, got {_type_name(value)} {value!r}")
        if isinstance(value, float) and not math.isfinite(value):
            raise _Bad(f"expected a finite number, got {value}")
        return Decimal(str(value))
    if kind == "date":
        if isinstance(value, dt.datetime):
            raise _Bad("expected a date such as 2026-03-31, without a time")
        if isinstance(value, dt.date):
            return value
        try:
            return dt.date.fromisoformat(_text(value))
        except ValueError as exc:
            raise _Bad(f"expected a date such as 2026-03-31, got {value!r}") from exc
    if kind == "datetime":
        if isinstance(value, str):
            try:
                value = dt.datetime.fromisoformat(value)
            except ValueError as exc:
                raise _Bad(
                    f"expected a date and time such as 2026-01-10T09:30:00Z, got {value!r}"
                ) from exc
        if not isinstance(value, dt.datetime):
            raise _Bad(
                f"expected a date and time such as 2026-01-10T09:30:00Z, got {_type_name(value)}"
            )
        if value.tzinfo is None:
            raise _Bad("give the time zone, e.g. 2026-01-10T09:30:00Z (Z is UTC)")
        return value.astimezone(dt.UTC)
    if kind in ("names", "texts"):
        if not isinstance(value, list):
            raise _Bad(f"expected a list of text, e.g. [chat, rag]; got {_type_name(value)}")
        items = []
        for index, item in enumerate(value):
            try:
                items.append(_text(item))
            except _Bad as exc:
                raise _Bad(f"item {index}: {exc}") from exc
        if kind == "names":
            return sorted(set(items))
        return items
    if kind == "object":
        if not isinstance(value, dict):
            raise _Bad(
                f"expected a mapping of name: value, e.g. {{max_model_len: 32768}}; got {_type_name(value)}"
            )
        return json_value(value)
    raise AssertionError(f"unhandled key type {kind}")


def _check_entry(data: Any, section: Section, path: Path, problems: list[Problem]) -> Entry | None:
    if not isinstance(data, dict):
        problems.append(
            Problem(path, f"expected a mapping describing a {section.noun}, got {_type_name(data)}")
        )
        return None
    entry = Entry(path, {})
    ok = True
    for name, value in data.items():
        key = section.keys.get(name) if isinstance(name, str) else None
        if key is None:
            close = suggest(str(name), list(section.keys))
            advice = f"did you mean {close}? " if close else ""
            problems.append(
                Problem(
                    (*path, str(name)),
                    f"unknown key for a {section.noun}; {advice}"
                    f"Known keys: {', '.join(section.keys)}.",
                )
            )
            ok = False
            continue
        key_path = (*path, name)
        if key.type == "extension":
            continue  # validated by its extension (see `validate`)
        if value is None:
            if key.nullable:
                entry.values[name] = None
                continue
            problems.append(Problem(key_path, "a value is required here (got null)"))
            ok = False
            continue
        if key.type == "entries":
            assert key.section is not None  # every "entries" and "mapping" key has its section
            children = _check_list(value, key.section, key_path, problems)
            if children is None:
                ok = False
            else:
                entry.children[name] = children
            continue
        if key.type == "mapping":
            assert key.section is not None
            child = _check_entry(value, key.section, key_path, problems)
            if child is None:
                ok = False
            else:
                entry.values[name] = child.values
            continue
        if key.type == "policy":
            policy = _check_policy(value, key_path, problems)
            if policy is None:
                ok = False
            else:
                entry.values[name] = policy
            continue
        if key.type == "capabilities":
            capabilities = _check_capabilities(value, key_path, problems)
            if capabilities is None:
                ok = False
            else:
                entry.values[name] = capabilities
            continue
        try:
            entry.values[name] = _convert(key, value)
        except _Bad as exc:
            problems.append(Problem(key_path, str(exc)))
            ok = False
    missing = [name for name in section.required if name not in data]
    for name in missing:
        problems.append(
            Problem(
                (*path, name),
                f"missing: a {section.noun} needs {', '.join(section.required)}",
            )
        )
    if missing or not ok:
        return None
    if section.identity:
        identity = tuple(entry.values[name] for name in section.identity)
        entry.identity = identity[0] if len(identity) == 1 else identity
    return entry


def _check_list(
    value: Any, section: Section, path: Path, problems: list[Problem]
) -> list[Entry] | None:
    if not isinstance(value, list):
        problems.append(
            Problem(path, f"expected a list of {section.noun} entries, got {_type_name(value)}")
        )
        return None
    entries = []
    first_seen: dict[Any, Path] = {}
    ok = True
    for index, item in enumerate(value):
        entry = _check_entry(item, section, (*path, index), problems)
        if entry is None:
            ok = False
            continue
        if section.identity:
            if entry.identity in first_seen:
                problems.append(
                    Problem(
                        (*path, index, section.identity[-1]),
                        f"{_show_identity(entry.identity)} is already declared at "
                        f"{format_path(first_seen[entry.identity])}",
                    )
                )
                ok = False
                continue
            first_seen[entry.identity] = (*path, index)
        entries.append(entry)
    return entries if ok else None


def _show_identity(identity: Any) -> str:
    if isinstance(identity, tuple):
        return "@".join(str(part) for part in identity)
    return repr(identity) if isinstance(identity, str) else str(identity)


def _check_capabilities(value: Any, path: Path, problems: list[Problem]) -> dict | None:
    if not isinstance(value, dict):
        problems.append(
            Problem(
                path,
                f"expected a mapping of kind: value, e.g. {{streaming: sse, tool_calling: true}}; "
                f"got {_type_name(value)}",
            )
        )
        return None
    result = {}
    ok = True
    for kind, item in value.items():
        kind_path = (*path, str(kind))
        if kind not in CAPABILITY_KINDS:
            close = suggest(str(kind), CAPABILITY_KINDS)
            advice = f"did you mean {close}? " if close else ""
            problems.append(
                Problem(
                    kind_path,
                    f"unknown capability; {advice}Known kinds: {', '.join(CAPABILITY_KINDS)}.",
                )
            )
            ok = False
            continue
        try:
            result[kind] = json_value(item)
        except _Bad as exc:
            problems.append(Problem(kind_path, str(exc)))
            ok = False
    return result if ok else None


def _check_policy(value: Any, path: Path, problems: list[Problem]) -> dict | None:
    """A gateway policy document as JSON; its rules are the verb's (a JSON Schema)."""
    if not isinstance(value, dict):
        problems.append(
            Problem(
                path,
                "expected the policy as a mapping of its sections (limits, tenants, fallbacks, "
                "degradation, retries, egress), or null for a version known by name only; "
                f"got {_type_name(value)}",
            )
        )
        return None
    keys = _boolean_keys(value, path)
    # YAML 1.1 reads an unquoted `on` (a fallback's key), `off`, `yes` or `no` as a
    # boolean; as JSON it would become the key "True", refused for a reason nobody wrote.
    for where, key in keys:
        problems.append(
            Problem(
                where,
                f"a key YAML reads as {str(key).lower()}: unquoted on, off, yes and no are "
                "true or false in YAML; quote the key, e.g. 'on': error",
            )
        )
    if keys:
        return None
    try:
        return json_value(value)
    except _Bad as exc:
        problems.append(Problem(path, str(exc)))
        return None


def _boolean_keys(value: Any, path: Path) -> list[tuple[Path, bool]]:
    found: list[tuple[Path, bool]] = []
    if isinstance(value, list):
        for index, item in enumerate(value):
            found += _boolean_keys(item, (*path, index))
    elif isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, bool):
                found.append((path, key))
            else:
                found += _boolean_keys(item, (*path, str(key)))
    return found


def validate(document: Document) -> ValidDocument:
    """Check the document's shape; raise DocumentError listing every problem."""
    problems: list[Problem] = []
    data = document.data
    if not isinstance(data, dict):
        problems.append(
            Problem(
                (),
                "expected a mapping at the top of the document with any of: "
                f"{', '.join(TOP.keys)} (got {_type_name(data)})",
                1 if data is None else None,
            )
        )
        raise DocumentError(problems, document.source)
    added = {extension.key: extension for extension in extension_registry.extensions()}
    top_section = Section(TOP.noun, {**TOP.keys, **{key: Key("extension") for key in added}})
    top = _check_entry(data, top_section, (), problems)
    extra = {}
    for key, extension in added.items():
        if data.get(key) is not None:
            extra[key] = extension.validate(data[key], (key,), document, problems)
    if top is not None and top.get("version", FORMAT_VERSION) != FORMAT_VERSION:
        problems.append(
            Problem(
                ("version",),
                f"this ledger reads version {FORMAT_VERSION} of the format; got {top['version']}",
            )
        )
    if problems:
        raise DocumentError([document.locate(p) for p in problems], document.source)
    assert top is not None  # _check_entry answers None only with a problem recorded
    return ValidDocument(
        teams=top.children.get("teams", []),
        licenses=top.children.get("licenses", []),
        model_assets=top.children.get("model_assets", []),
        runtimes=top.children.get("runtimes", []),
        services=top.children.get("services", []),
        extensions=extra,
    )
