"""Top-level sections that other apps add to the registry document.

The replay app declares `backends:` and `sample_sets:` this way, so that they live in
the same YAML as the services they test. An app registers an `Extension` in its own
`<app>/declarative.py`; those modules are imported the first time a document is
validated, applied or exported (as Django's admin discovers `admin.py`).

An extension validates its section's value (appending problems located by document
path), applies it inside `apply_document`'s transaction after the registry's own
sections, through its domain verbs and `Run.call`/`Run.record` so refusals and
changes are reported like the registry's own, and exports its section back.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.utils.module_loading import autodiscover_modules

from ledger.declarative.document import Document, Path, Problem

if TYPE_CHECKING:
    from ledger.declarative.run import Run
    from ledger.declarative.schema import Entry, Section


@dataclass(frozen=True)
class Extension:
    key: str
    # (value, path, document, problems) -> the normalized value, or None after a problem.
    validate: Callable[[Any, Path, Document, list[Problem]], Any]
    # (run, normalized value) -> None; refusals go to run.problems.
    apply: Callable[[Run, Any], None]
    # () -> the section's entries in document form; empty leaves the key out.
    export: Callable[[], list[dict[str, Any]]]


_EXTENSIONS: dict[str, Extension] = {}


def register(extension: Extension) -> Extension:
    """Add (or replace) the section ``extension.key``; sections apply in registration order."""
    _EXTENSIONS[extension.key] = extension
    return extension


def extensions() -> list[Extension]:
    autodiscover_modules("declarative")
    return list(_EXTENSIONS.values())


def check_entries(
    value: Any, section: Section, path: Path, problems: list[Problem]
) -> list[Entry] | None:
    """The registry's own check of a list of entries, for extensions that use `schema.Key`s."""
    from ledger.declarative.schema import _check_list

    return _check_list(value, section, path, problems)
