"""The declarative registry: teams, licenses, assets, runtimes and services as a YAML document.

`load_file` / `parse_yaml` read a document, `apply_document` makes the
registry say what it says (through the domain verbs, all or nothing),
`export_document` + `dump_document` write the registry back in the same
format. The format is described in docs/registry-format.md.
"""

from ledger.declarative.apply import ApplyResult, Change, apply_document
from ledger.declarative.document import (
    Document,
    DocumentError,
    Problem,
    format_path,
    parse_yaml,
)
from ledger.declarative.export import dump_document, export_document

__all__ = [
    "ApplyResult",
    "Change",
    "Document",
    "DocumentError",
    "Problem",
    "apply_document",
    "dump_document",
    "export_document",
    "format_path",
    "parse_yaml",
]
