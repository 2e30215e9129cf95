"""Reading a registry document: YAML with line numbers, and problems that name their path.

A problem is located by its document path (`services[2].revisions[0].runtime`)
and, when the document came from a file, the line it is on, so that an error
reads like a compiler's: `registry.yaml:48: services[2].revisions[0].runtime: …`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

Path = tuple[str | int, ...]


def format_path(path: Path) -> str:
    """("services", 2, "revisions", 0, "runtime") -> "services[2].revisions[0].runtime"."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else part
    return text


@dataclass(frozen=True)
class Problem:
    path: Path
    message: str
    line: int | None = None
    column: int | None = None

    def render(self, source: str | None = None) -> str:
        where = [part for part in (source, self.line, self.column) if part]
        prefix = ":".join(str(part) for part in where)
        text = f"{format_path(self.path)}: {self.message}" if self.path else self.message
        return f"{prefix}: {text}" if prefix else text


class DocumentError(Exception):
    """The document cannot be applied; nothing was written. Carries every problem found."""

    def __init__(self, problems: list[Problem], source: str | None = None) -> None:
        self.problems = problems
        self.source = source
        super().__init__(str(self))

    def __str__(self) -> str:
        return "\n".join(problem.render(self.source) for problem in self.problems)

    def messages(self) -> list[str]:
        return [problem.render(self.source) for problem in self.problems]


@dataclass
class Document:
    """Parsed data plus where each path sits in the source text (1-based lines)."""

    data: Any
    source: str | None = None
    lines: dict[Path, int] = field(default_factory=dict)

    def line_of(self, path: Path) -> int | None:
        # A domain error may name a field the document left out: point at its entry.
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return None

    def locate(self, problem: Problem) -> Problem:
        if problem.line is not None:
            return problem
        return Problem(problem.path, problem.message, self.line_of(problem.path))


def parse_yaml(text: str, source: str | None = None) -> Document:
    """Parse YAML text; syntax errors and duplicate keys raise DocumentError with line/column."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        reason = " ".join(part for part in (exc.context, exc.problem) if part)
        problem = Problem(
            (),
            f"YAML syntax error: {reason}",
            mark.line + 1 if mark else None,
            mark.column + 1 if mark else None,
        )
        raise DocumentError([problem], source) from exc
    except yaml.YAMLError as exc:
        raise DocumentError([Problem((), f"YAML syntax error: {exc}")], source) from exc
    lines: dict[Path, int] = {}
    problems: list[Problem] = []
    if node is not None:
        _walk(node, (), lines, problems)
    if problems:
        raise DocumentError(problems, source)
    return Document(data, source, lines)


def _walk(node: yaml.Node, path: Path, lines: dict[Path, int], problems: list[Problem]) -> None:
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                continue
            key = key_node.value
            line = key_node.start_mark.line + 1
            if key in seen:
                # PyYAML keeps the last value silently; in a registry that hides a mistake.
                problems.append(
                    Problem(
                        (*path, key),
                        f"duplicate key {key!r}; it is already given on line {seen[key]}",
                        line,
                    )
                )
                continue
            seen[key] = line
            lines[(*path, key)] = line
            _walk(value_node, (*path, key), lines, problems)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            lines[(*path, index)] = item.start_mark.line + 1
            _walk(item, (*path, index), lines, problems)
