"""Every string the pages show is translatable, and translated into 简体中文.

Three checks, each per file so a failure names it:

- no English text is left outside the translation tags of a template (the text
  between tags, and the attributes a reader sees: title, aria-label, placeholder,
  alt, and a submit input's value);
- every message a template or a module marks is in the compiled zh-hans catalog
  the site reads (locale/zh_Hans/LC_MESSAGES/django.mo), translated;
- the compiled catalog is the one built from the .po kept beside it, with no
  message left empty or fuzzy.

Rebuild the catalog with `scripts/translations.py` (docs/glossary.md has the terms).
"""

from __future__ import annotations

import ast
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from babel.messages.extract import DEFAULT_KEYWORDS, extract_from_file
from babel.messages.mofile import read_mo
from babel.messages.pofile import read_po
from django.template import engines
from django.template.base import Lexer, TokenType
from django.templatetags.i18n import BlockTranslateNode, TranslateNode

ROOT = Path(__file__).resolve().parents[2]
CATALOG_DIR = ROOT / "locale" / "zh_Hans" / "LC_MESSAGES"
TEMPLATE_DIR = ROOT / "templates"
TEMPLATES = sorted(str(path.relative_to(TEMPLATE_DIR)) for path in TEMPLATE_DIR.rglob("*.html"))
PYTHON_PACKAGES = ("config", "ledger", "lib", "releases", "replay")
PYTHON_FILES = sorted(
    str(path.relative_to(ROOT))
    for package in PYTHON_PACKAGES
    for path in (ROOT / package).rglob("*.py")
    if "migrations" not in path.parts
)
KEYWORDS = {
    **DEFAULT_KEYWORDS,
    "gettext_lazy": None,
    "ngettext_lazy": (1, 2),
    "pgettext_lazy": ((1, "c"), 2),
    "npgettext_lazy": ((1, "c"), 2, 3),
}

# Words that read the same in both languages: units, metrics, formats, protocols.
SAME_IN_BOTH = {
    "api",
    "csv",
    "cyclonedx",
    "dsse",
    "gpu",
    "gpus",
    "http",
    "https",
    "id",
    "json",
    "jsonl",
    "llm",
    "ms",
    "openapi",
    "p50",
    "p90",
    "p95",
    "p99",
    "qps",
    "s3",
    "sha256",
    "slo",
    "slos",
    "sre",
    "tpot",
    "ttft",
    "url",
    "utc",
    "uuid",
    "webhook",
    "webhooks",
    "yaml",
    "ok",
    "mib",
    "gib",
    "kib",
    "mb",
    "kb",
    "gb",
    "bom",
    "ml",
    "pdf",
    "sse",
    "itl",
    "rps",
    "tps",
}
LATIN_WORD = re.compile(r"[A-Za-z][A-Za-z0-9'\u2019_-]*")
SHOWN_ATTRIBUTES = {"title", "aria-label", "placeholder", "alt"}
SKIPPED_BLOCKS = {
    "blocktranslate": "endblocktranslate",
    "blocktrans": "endblocktrans",
    "comment": "endcomment",
    "verbatim": "endverbatim",
}


def _untranslated_source(source: str) -> str:
    """The template with its tags, variables and translated blocks replaced by a blank."""
    parts: list[str] = []
    closing: str | None = None
    for token in Lexer(source).tokenize():
        if closing is not None:
            if token.token_type == TokenType.BLOCK and token.contents.split()[0] == closing:
                closing = None
            continue
        if token.token_type == TokenType.TEXT:
            parts.append(token.contents)
            continue
        if token.token_type == TokenType.BLOCK:
            closing = SKIPPED_BLOCKS.get(token.contents.split()[0])
        parts.append("\x00")
    return "".join(parts)


class _ShownText(HTMLParser):
    """The text a reader sees: data outside <script> and <style>, and shown attributes."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.shown: list[str] = []
        self._hidden_depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in {"script", "style"}:
            self._hidden_depth += 1
        attributes = dict(attrs)
        for name, value in attrs:
            if value and name in SHOWN_ATTRIBUTES:
                self.shown.append(value)
        if (
            tag == "input"
            and attributes.get("type") in {"submit", "button"}
            and attributes.get("value")
        ):
            self.shown.append(attributes["value"] or "")

    def handle_endtag(self, tag: str) -> None:
        if tag in {"script", "style"} and self._hidden_depth:
            self._hidden_depth -= 1

    def handle_data(self, data: str) -> None:
        if not self._hidden_depth:
            self.shown.append(data)


def english_left(source: str) -> list[str]:
    parser = _ShownText()
    parser.feed(_untranslated_source(source))
    parser.close()
    left = []
    for text in parser.shown:
        words = [word for word in LATIN_WORD.findall(text) if len(word) > 1]
        if any(word.lower() not in SAME_IN_BOTH for word in words):
            left.append(" ".join(text.replace("\x00", "…").split()))
    return left


def test_the_checker_finds_english_outside_translation_tags() -> None:
    source = (
        '{% load i18n %}<h1>{% translate "Services" %}</h1>'
        '<p title="Plain title">{{ n }} ms</p>'
        "{% blocktranslate %}Kept {{ x }}{% endblocktranslate %}"
        "<script>var notShown = 1;</script>{# Comment #}"
        "<p>Left here</p>"
    )
    assert english_left(source) == ["Plain title", "Left here"]


@pytest.mark.parametrize("name", TEMPLATES)
def test_no_english_outside_translation_tags(name: str) -> None:
    source = (TEMPLATE_DIR / name).read_text()
    assert english_left(source) == [], f"{name}: mark these with {{% translate %}}"


def _hashable(value: object) -> object:
    # read_mo gives a plural message's ids and strings as lists, read_po as tuples.
    return tuple(value) if isinstance(value, list | tuple) else value


def _by_key(catalog: object) -> dict[object, object]:
    return {
        (_hashable(message.id), message.context): _hashable(message.string)
        for message in catalog  # type: ignore[attr-defined]
        if message.id
    }


def _zh_catalog() -> dict[object, object]:
    with (CATALOG_DIR / "django.mo").open("rb") as handle:
        return _by_key(read_mo(handle))


def _is_translated(catalog: dict[object, object], msgid: object, context: str | None) -> bool:
    string = catalog.get((msgid, context))
    strings = string if isinstance(string, tuple | list) else (string,)
    return bool(string) and all(strings)


def _template_messages(name: str) -> list[tuple[object, str | None]]:
    template = engines["django"].engine.get_template(name)  # type: ignore[attr-defined]
    found: list[tuple[object, str | None]] = []
    for node in template.nodelist.get_nodes_by_type(TranslateNode):
        var = node.filter_expression.var
        literal = getattr(var, "literal", None)
        if isinstance(literal, str) and not node.noop:
            context = node.message_context.var if node.message_context else None
            found.append((str(literal), getattr(context, "literal", context)))
    for node in template.nodelist.get_nodes_by_type(BlockTranslateNode):
        singular, _vars = node.render_token_list(node.singular)
        context = node.message_context.var if node.message_context else None
        context = getattr(context, "literal", context)
        if node.plural and node.countervar:
            plural, _vars = node.render_token_list(node.plural)
            found.append(((singular, plural), context))
        else:
            found.append((singular, context))
    return found


@pytest.mark.parametrize("name", TEMPLATES)
def test_template_messages_are_translated(name: str) -> None:
    catalog = _zh_catalog()
    missing = [
        msgid
        for msgid, context in _template_messages(name)
        if not _is_translated(catalog, msgid, context)
    ]
    assert missing == [], f"{name}: no zh-hans translation in the compiled catalog"


@pytest.mark.parametrize("path", PYTHON_FILES)
def test_python_messages_are_translated(path: str) -> None:
    catalog = _zh_catalog()
    with (ROOT / path).open("rb") as handle:
        extracted = list(extract_from_file("python", str(ROOT / path), keywords=KEYWORDS))
    del handle
    missing = [
        message
        for _line, message, _comments, context in extracted
        if not _is_translated(catalog, message, context)
    ]
    assert missing == [], f"{path}: no zh-hans translation in the compiled catalog"


def test_compiled_catalog_is_built_from_the_po_and_complete() -> None:
    with (CATALOG_DIR / "django.po").open("rb") as handle:
        source = read_po(handle)
    untranslated = [
        message.id
        for message in source
        if message.id
        and (
            message.fuzzy
            or not all(message.string if isinstance(message.string, tuple) else (message.string,))
        )
    ]
    assert untranslated == []
    assert not source.fuzzy, "the catalog's header is marked fuzzy: msgfmt would drop its charset"
    assert _zh_catalog() == _by_key(source), "django.mo is out of date: run scripts/translations.py"


# Where a module hands the reader text: a form's or model's label and help, a flash
# message, a refusal (the 403 page shows it), a validation error beside a field, a
# choice's label. The API's serializers, management commands and log lines are not
# pages: they stay English.
UI_KEYWORDS = {"label", "help_text", "empty_label", "verbose_name", "verbose_name_plural"}
UI_CALLS = {"PermissionDenied", "ValidationError"}
MESSAGE_LEVELS = {"success", "error", "info", "warning", "debug"}
NOT_UI = ("/api/", "/serializers/", "/management/", "/migrations/", "/demo", "config/settings")


def _is_plain_text(node: ast.AST) -> bool:
    if isinstance(node, ast.JoinedStr):
        return any(
            isinstance(part, ast.Constant) and str(part.value).strip() for part in node.values
        )
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        text = node.value.strip()
        is_sentence = bool(LATIN_WORD.search(text)) and " " in text
        return is_sentence or text[:1].isupper()
    if isinstance(node, ast.BinOp):  # "..." % args
        return _is_plain_text(node.left)
    return False


def _choices_class(node: ast.ClassDef) -> bool:
    names = {getattr(base, "attr", getattr(base, "id", "")) for base in node.bases}
    return bool(names & {"TextChoices", "IntegerChoices", "Choices"})


def untranslated_python_text(source: str) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and _choices_class(node):
            for statement in node.body:
                value = getattr(statement, "value", None)
                if (
                    isinstance(value, ast.Tuple)
                    and len(value.elts) >= 2
                    and _is_plain_text(value.elts[-1])
                ):
                    found.append((statement.lineno, "choice label"))
        if not isinstance(node, ast.Call):
            continue
        callee = node.func
        name = getattr(callee, "attr", getattr(callee, "id", ""))
        for keyword in node.keywords:
            if keyword.arg in UI_KEYWORDS and _is_plain_text(keyword.value):
                found.append((node.lineno, f"{keyword.arg}="))
        if name in UI_CALLS and node.args and _is_plain_text(node.args[0]):
            found.append((node.lineno, name))
        if (
            name in MESSAGE_LEVELS
            and isinstance(callee, ast.Attribute)
            and getattr(callee.value, "id", "") == "messages"
            and len(node.args) >= 2
            and _is_plain_text(node.args[1])
        ):
            found.append((node.lineno, f"messages.{name}"))
    return sorted(found)


def test_the_python_checker_finds_text_outside_gettext() -> None:
    source = (
        "from django.utils.translation import gettext as _\n"
        "class Kind(models.TextChoices):\n"
        "    A = 'a', 'Plain label'\n"
        "    B = 'b', _('Marked label')\n"
        "f = forms.CharField(label='Name shown', help_text=_('Marked help'))\n"
        "messages.success(request, f'Saved {x}.')\n"
        "raise PermissionDenied(_('Marked reason'))\n"
        "raise ValidationError('Refused here.', code='x')\n"
    )
    assert untranslated_python_text(source) == [
        (3, "choice label"),
        (5, "label="),
        (6, "messages.success"),
        (8, "ValidationError"),
    ]


UI_PYTHON_FILES = [path for path in PYTHON_FILES if not any(part in f"/{path}" for part in NOT_UI)]


@pytest.mark.parametrize("path", UI_PYTHON_FILES)
def test_python_text_shown_to_readers_is_marked(path: str) -> None:
    left = untranslated_python_text((ROOT / path).read_text())
    assert left == [], f"{path}: wrap these in gettext / gettext_lazy (line, where)"
