"""Model-turn replay: a not re-runnable sample with recorded tool results is sent as its
model turn only, against the fake server, and nothing else leaves the worker."""

from __future__ import annotations

import hashlib
import json
import socket
import sys
from collections.abc import Iterator
from io import StringIO
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.db import IntegrityError, transaction
from rest_framework.test import APIClient

from replay import jsonl, services
from replay.models import Result, Run, SampleSet
from replay.outbound import DestinationPolicy
from tests.replay.factories import ResultFactory, SampleFactory
from tests.replay.helpers import backend_on, make_set, replay_now

pytestmark = pytest.mark.django_db

REFUND_TOOL = {
    "type": "function",
    "function": {
        "name": "issue_refund",
        "description": "Refund an amount on an order. Moves money.",
        "parameters": {
            "type": "object",
            "properties": {"order_id": {"type": "string"}, "amount": {"type": "number"}},
            "required": ["order_id", "amount"],
        },
    },
}
TICKET_SCHEMA = {
    "type": "object",
    "properties": {"title": {"type": "string", "minLength": 5}},
    "required": ["title"],
}
TICKET_TOOL = {
    "type": "function",
    "function": {"name": "create_ticket", "parameters": TICKET_SCHEMA},
}
REFUND_CALL = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {
            "id": "call_refund_1",
            "type": "function",
            "function": {
                "name": "issue_refund",
                "arguments": '{"order_id": "A-1043", "amount": 49.9}',
            },
        }
    ],
}
REFUND_RESULT = {
    "tool_call_id": "call_refund_1",
    "name": "issue_refund",
    "content": "refund R-88 of 49.90 EUR created on order A-1043",
}


def refund_sample(key: str = "refund", directive: str = "", **fields: Any) -> dict[str, Any]:
    """A refund recorded up to the assistant's call, with what the refund tool answered."""
    ask = "Refund 49.90 EUR on order A-1043, the customer returned the parcel."
    spec: dict[str, Any] = {
        "key": key,
        "category": "tool_call",
        "rerunnable": False,
        "messages": [
            {"role": "user", "content": f"{ask}\nfake: {directive}" if directive else ask},
            REFUND_CALL,
        ],
        "params": {"temperature": 0, "max_tokens": 64, "tools": [REFUND_TOOL]},
        "tool_results": [REFUND_RESULT],
    }
    spec.update(fields)
    return spec


def _line(**fields: Any) -> str:
    return json.dumps({**refund_sample(), **fields})


# ---------------------------------------------------------------- the JSONL format


def test_recorded_tool_results_are_kept_with_the_sample_and_exported_as_written():
    sample_set = make_set("refunds", [refund_sample()])

    stored = sample_set.samples.get()
    exported = jsonl.parse_samples(services.export_sample_set(sample_set))

    assert stored.tool_results == [REFUND_RESULT]
    assert stored.replay_mode == Result.Mode.MODEL_TURN
    assert exported[0]["tool_results"] == [REFUND_RESULT]


def test_samples_without_tool_results_keep_the_digest_they_had():
    """Digests recorded in earlier import events still name the same content."""
    specs = jsonl.parse_samples(
        json.dumps(
            {"key": "a", "category": "short_qa", "messages": [{"role": "user", "content": "hi"}]}
        )
    )
    # The canonical form of a sample before tool_results existed.
    before = {name: value for name, value in specs[0].items() if name != "tool_results"}
    canonical = json.dumps(before, sort_keys=True, separators=(",", ":"))

    digest = jsonl.content_digest(specs)

    assert digest == "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()
    assert jsonl.content_digest(jsonl.parse_samples(_line())) != jsonl.content_digest(
        jsonl.parse_samples(_line(tool_results=[{**REFUND_RESULT, "content": "other"}]))
    )


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        (
            {"rerunnable": True},
            'tool_results: only a sample with "rerunnable": false carries recorded tool '
            "results; a re-runnable sample is sent whole",
        ),
        (
            {"tool_results": {"call_refund_1": "done"}},
            "tool_results: must be a list of recorded tool results, got an object",
        ),
        (
            {"tool_results": ["refund done"]},
            "tool_results[0]: must be an object with tool_call_id, name, content, got text",
        ),
        (
            {"tool_results": [{"name": "issue_refund", "content": "done"}]},
            "tool_results[0].tool_call_id: is required",
        ),
        (
            {"tool_results": [{**REFUND_RESULT, "tool_call_id": ""}]},
            "tool_results[0].tool_call_id: must be non-empty text, got text",
        ),
        (
            {"tool_results": [{**REFUND_RESULT, "content": "x" * 2001}]},
            "tool_results[0].content: is 2001 characters; a recorded result is a summary of "
            "at most 2000",
        ),
        (
            {"tool_results": [{**REFUND_RESULT, "status": 200}]},
            "tool_results[0].status: unknown field; known fields: tool_call_id, name, content",
        ),
        (
            {"tool_results": [{**REFUND_RESULT, "tool_call_id": "call_9"}]},
            "tool_results[0].tool_call_id: 'call_9' is not a tool call of the last message; "
            "its calls: 'call_refund_1'",
        ),
        (
            {"tool_results": [{**REFUND_RESULT, "name": "create_ticket"}]},
            "tool_results[0].name: must be 'issue_refund', the tool that call "
            "'call_refund_1' called",
        ),
        (
            {"tool_results": [REFUND_RESULT, REFUND_RESULT]},
            "tool_results[1].tool_call_id: 'call_refund_1' is already answered by tool_results[0]",
        ),
        (
            {"messages": [{"role": "user", "content": "Refund order A-1043."}]},
            "messages: with tool_results, the last message must be the assistant's tool call "
            "(role assistant, with tool_calls) that the recorded results answer",
        ),
        (
            {
                "messages": [
                    {"role": "user", "content": "Refund order A-1043."},
                    {
                        **REFUND_CALL,
                        "tool_calls": [
                            *REFUND_CALL["tool_calls"],
                            {"id": "call_2", "function": {"name": "issue_refund"}},
                        ],
                    },
                ]
            },
            "tool_results: no recorded result for tool call 'call_2' of the last message; "
            "every call needs one",
        ),
        (
            {
                "messages": [
                    {"role": "user", "content": "Refund order A-1043."},
                    {**REFUND_CALL, "tool_calls": [{"function": {"name": "issue_refund"}}]},
                ]
            },
            "messages[1].tool_calls[0].id: must be the call's id, e.g. call_1",
        ),
    ],
)
def test_bad_tool_results_are_reported_by_line_and_field(fields, error):
    good = json.dumps(
        {"key": "ok", "category": "short_qa", "messages": [{"role": "user", "content": "hi"}]}
    )

    with pytest.raises(jsonl.JsonlError) as raised:
        jsonl.parse_samples(f"{good}\n{_line(**fields)}\n")

    assert raised.value.errors == [f"line 2: {error}"]


def test_a_set_with_a_bad_tool_result_imports_nothing():
    text = json.dumps(refund_sample(key="good")) + "\n" + _line(tool_results="done") + "\n"

    with pytest.raises(ValidationError) as raised:
        services.import_sample_set(actor=None, name="refunds", jsonl=text)

    assert raised.value.message_dict == {
        "jsonl": ["line 2: tool_results: must be a list of recorded tool results, got text"]
    }
    assert not SampleSet.objects.filter(name="refunds").exists()


def test_the_database_refuses_tool_results_on_a_re_runnable_sample():
    with pytest.raises(IntegrityError), transaction.atomic():
        SampleFactory(rerunnable=True, tool_results=[REFUND_RESULT])


def test_the_database_refuses_a_skipped_result_that_says_it_was_sent():
    with pytest.raises(IntegrityError), transaction.atomic():
        ResultFactory(outcome=Result.Outcome.SKIPPED, mode=Result.Mode.MODEL_TURN)


# ---------------------------------------------------------------- the run


_connections: list[tuple[str, int]] | None = None


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event == "socket.connect" and _connections is not None:
        sock, address = args
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            _connections.append((str(address[0]), int(address[1])))


sys.addaudithook(_audit)  # an audit hook cannot be removed: it records only while asked


@pytest.fixture
def connections() -> Iterator[list[tuple[str, int]]]:
    """Every TCP connection this process opens meanwhile (the database's are libpq's)."""
    global _connections
    _connections = []
    try:
        yield _connections
    finally:
        _connections = None


@pytest.fixture
def only_the_fake(settings, fake) -> DestinationPolicy:
    """An allow-list that admits the fake server's port and nothing else."""
    settings.REPLAY_ALLOWED_HOSTS = [f"127.0.0.1:{fake.port}"]
    return DestinationPolicy.from_settings()


def test_the_model_turn_is_the_only_request_and_carries_the_recorded_results(
    fake, only_the_fake, connections
):
    backend = backend_on(fake)
    reply = "Refund R-88 of 49.90 EUR is on its way to the customer."
    sample_set = make_set(
        "refunds",
        [
            refund_sample(
                directive=f'output=text reply="{reply}"',
                checks=[{"type": "contains", "value": "R-88"}],
            )
        ],
    )
    connections.clear()  # only what the run opens

    run = replay_now(backend, sample_set)

    stored = sample_set.samples.get()
    (request,) = fake.requests  # nothing else reached the server: no tool endpoint either
    assert (request.method, request.path) == ("POST", "/v1/chat/completions")
    assert request.body["messages"] == [
        *stored.messages,
        {
            "role": "tool",
            "tool_call_id": "call_refund_1",
            "content": "refund R-88 of 49.90 EUR created on order A-1043",
        },
    ]
    assert request.body["tools"] == [REFUND_TOOL]
    # The one connection the run opened went to the backend, admitted by the allow-list.
    assert connections == [("127.0.0.1", fake.port)]
    assert all(only_the_fake.refusal(h, p, host=h) == "" for h, p in connections)
    result = run.results.get()
    assert (result.mode, result.outcome, result.output) == ("model_turn", "passed", reply)
    assert run.verdict == Run.Verdict.PASSED


@pytest.mark.parametrize(
    ("expected_tool", "outcome"), [("create_ticket", "passed"), ("issue_refund", "failed")]
)
def test_the_models_next_tool_call_is_judged_by_the_samples_checks(
    fake, only_the_fake, expected_tool, outcome
):
    backend = backend_on(fake)
    sample_set = make_set(
        "refunds",
        [
            refund_sample(
                params={
                    "max_tokens": 64,
                    "tools": [REFUND_TOOL, TICKET_TOOL],
                    "tool_choice": {"type": "function", "function": {"name": "create_ticket"}},
                },
                checks=[{"type": "tool_call", "name": expected_tool}],
            )
        ],
    )

    run = replay_now(backend, sample_set)

    result = run.results.get()
    assert (result.mode, result.outcome) == ("model_turn", outcome)
    assert result.output.startswith("[tool call] create_ticket(")
    assert fake.chat_requests[0].body["messages"][-1]["role"] == "tool"


def test_a_run_tells_re_run_model_turn_and_skipped_apart(fake, only_the_fake):
    backend = backend_on(fake)
    sample_set = make_set(
        "mixed",
        [
            {
                "key": "lookup",
                "category": "short_qa",
                "messages": [{"role": "user", "content": "Say four.\nfake: reply=4"}],
                "checks": [{"type": "contains", "value": "4"}],
            },
            refund_sample(directive='output=text reply="Refund R-88 issued."', repeat=2),
            {
                "key": "wire-transfer",
                "category": "tool_call",
                "rerunnable": False,
                "messages": [{"role": "user", "content": "Wire 10 000 EUR to IBAN DE89."}],
            },
        ],
    )

    run = replay_now(backend, sample_set)

    modes = {(r.sample.key, r.attempt): (r.mode, r.outcome) for r in run.results.all()}
    assert modes == {
        ("lookup", 1): ("rerun", "passed"),
        ("refund", 1): ("model_turn", "passed"),
        ("refund", 2): ("model_turn", "passed"),
        ("wire-transfer", 1): ("skipped", "skipped"),
    }
    assert len(fake.chat_requests) == 3
    assert not any("Wire" in json.dumps(r.body) for r in fake.chat_requests)
    assert (run.summary["rerun"], run.summary["model_turn"], run.summary["skipped"]) == (1, 1, 1)
    assert run.summary["per_sample"]["refund"]["mode"] == "model_turn"
    assert run.summary["per_sample"]["wire-transfer"]["mode"] == "skipped"
    assert run.summary["attempts"] == 3


def test_the_run_page_and_api_show_what_was_sent_of_each_sample(fake, client, auditor):
    backend = backend_on(fake)
    sample_set = make_set(
        "mixed",
        [
            refund_sample(directive='output=text reply="Refund R-88 issued."'),
            {
                "key": "wire-transfer",
                "category": "tool_call",
                "rerunnable": False,
                "messages": [{"role": "user", "content": "Wire 10 000 EUR to IBAN DE89."}],
            },
        ],
    )
    run = replay_now(backend, sample_set)
    client.force_login(auditor)
    api = APIClient()
    api.force_authenticate(auditor)

    page = client.get(f"/replay/runs/{run.pk}/").content.decode()
    data = api.get(f"/api/replay/runs/{run.pk}/").json()
    samples = api.get(f"/api/replay/sample-sets/{sample_set.name}/").json()["samples"]

    assert '<span class="badge warn">Model turn only</span> <strong>1</strong>' in page
    assert '<span class="badge">Re-run</span> <strong>0</strong>' in page
    assert '<span class="badge">Skipped (not re-runnable)</span> <strong>1</strong>' in page
    assert page.count('<span class="badge warn">Model turn only</span>') == 2  # + its row
    assert {r["sample"]: r["mode"] for r in data["results"]} == {
        "refund": "model_turn",
        "wire-transfer": "skipped",
    }
    assert (data["summary"]["model_turn"], data["summary"]["skipped"]) == (1, 1)
    assert {s["key"]: s["tool_results"] for s in samples} == {
        "refund": [REFUND_RESULT],
        "wire-transfer": [],
    }


def test_the_command_says_what_it_would_send_of_each_sample_and_prints_modes(fake, only_the_fake):
    backend = backend_on(fake)
    make_set("refunds", [refund_sample(directive='output=text reply="Refund R-88 issued."')])
    dry, real = StringIO(), StringIO()

    call_command(
        "replay", "--backend", backend.name, "--sample-set", "refunds", "--dry-run", stdout=dry
    )
    assert fake.requests == []
    call_command(
        "replay",
        "--backend",
        backend.name,
        "--sample-set",
        "refunds",
        "--json",
        "--per-sample",
        stdout=real,
    )

    assert "send the model turn only (1 recorded tool results)" in dry.getvalue()
    assert "1 requests to send, 0 samples skipped." in dry.getvalue()
    report = json.loads(real.getvalue())
    assert [(s["sample"], s["mode"], s["outcome"]) for s in report["samples"]] == [
        ("refund", "model_turn", "passed")
    ]
    assert len(fake.chat_requests) == 1


def test_the_sample_set_page_marks_samples_sent_as_their_model_turn(client, auditor):
    sample_set = make_set("refunds", [refund_sample(), refund_sample(key="plain", tool_results=[])])
    client.force_login(auditor)

    page = client.get(f"/replay/sample-sets/{sample_set.name}/v{sample_set.version}/")

    assert page.status_code == 200
    assert page.content.decode().count('<span class="badge">Model turn only</span>') == 1
