"""PromQL label matchers, as a backend states the series that are its own.

A matcher list is written as Prometheus writes it: ``{model_name="kb-live"}`` or
``{job="vllm", instance=~"10\\.0\\.0\\.5:.*"}``. `parse_matchers` reads one (braces
optional) and says what is wrong by position; each `Matcher` writes itself as PromQL
does, which is how the ledger pastes it into queries.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_OPERATOR = re.compile(r"=~|!~|!=|=")
_STRING = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
MAX_MATCHERS = 8


class MatcherError(ValueError):
    pass


@dataclass(frozen=True)
class Matcher:
    label: str
    operator: str  # =, !=, =~, !~
    value: str  # as written between the quotes (escapes kept)

    def __str__(self) -> str:
        return f'{self.label}{self.operator}"{self.value}"'


def parse_matchers(text: str) -> list[Matcher]:
    """The matchers `text` states; MatcherError says what was expected where."""
    body = text.strip()
    if body.startswith("{"):
        if not body.endswith("}"):
            raise MatcherError('a matcher list that opens with "{" must close with "}"')
        body = body[1:-1]
    matchers: list[Matcher] = []
    position = 0
    while True:
        position = _skip_spaces(body, position)
        if position == len(body):
            break
        label = _LABEL.match(body, position)
        if label is None:
            raise MatcherError(f"character {position + 1}: expected a label name, e.g. model_name")
        position = _skip_spaces(body, label.end())
        operator = _OPERATOR.match(body, position)
        if operator is None:
            raise MatcherError(
                f"character {position + 1}: expected =, !=, =~ or !~ after {label.group()}"
            )
        position = _skip_spaces(body, operator.end())
        value = _STRING.match(body, position)
        if value is None:
            raise MatcherError(
                f'character {position + 1}: expected a value in double quotes, e.g. "kb-live"'
            )
        matchers.append(Matcher(label.group(), operator.group(), value.group(1)))
        position = _skip_spaces(body, value.end())
        if position == len(body):
            break
        if body[position] != ",":
            raise MatcherError(f'character {position + 1}: expected "," between matchers')
        position += 1
    if not matchers:
        raise MatcherError('no matcher: write at least one, e.g. {model_name="kb-live"}')
    if len(matchers) > MAX_MATCHERS:
        raise MatcherError(f"at most {MAX_MATCHERS} matchers")
    if not any(m.operator == "=" and m.value for m in matchers):
        # Prometheus refuses a selector whose every matcher matches the empty string.
        raise MatcherError('at least one matcher must be an equality with a value, e.g. job="vllm"')
    return matchers


def _skip_spaces(text: str, position: int) -> int:
    while position < len(text) and text[position] in " \t":
        position += 1
    return position


def quoted(value: str) -> str:
    """`value` as a PromQL double-quoted string's contents."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
