"""Model-turn replay of a request with side effects (the seed's §6.9).

A not re-runnable sample is never sent as recorded: its tools write (a refund, a
ticket). When it carries recorded tool results (``Sample.tool_results``, validated by
``replay.jsonl``), replay sends only the model turn instead: the sample's messages,
which end with the assistant's tool call, then each recorded result as a ``tool``
message, in the OpenAI chat format. The model's next tool call or answer is judged by
the sample's checks as any answer is. No tool is called: the only request is the one
to the backend, through the outbound allow-list like every replay request.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def tool_messages(tool_results: Sequence[Mapping[str, str]]) -> list[dict[str, Any]]:
    """The recorded results as ``tool`` messages, in the order recorded."""
    return [
        {"role": "tool", "tool_call_id": result["tool_call_id"], "content": result["content"]}
        for result in tool_results
    ]


def request_messages(
    messages: list[dict[str, Any]], tool_results: Sequence[Mapping[str, str]]
) -> list[dict[str, Any]]:
    """What is sent of a sample: its messages, and after them its recorded tool results."""
    return [*messages, *tool_messages(tool_results)]
