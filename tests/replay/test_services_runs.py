"""Executing runs against the fake server: outcomes, error codes, repeats, redaction, resume."""

from __future__ import annotations

import hashlib
import threading
from collections import Counter

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import connection
from django.db.models import F

from ledger.models import Event
from replay import services
from replay.models import Result, Run
from tests.factories import UserFactory
from tests.replay.factories import ResultFactory
from tests.replay.helpers import backend_on, make_set, replay_now, sample
from tests.support.fake_openai import REFUSAL_TEXT

pytestmark = pytest.mark.django_db

SECRET = "sk-live-replay-secret-0123456789"


def _results(run: Run) -> dict[str, Result]:
    return {r.sample.key: r for r in run.results.select_related("sample")}


def _sent_contents(fake) -> list[str]:
    return [r.body["messages"][-1]["content"] for r in fake.chat_requests]


def test_each_fault_is_stored_with_its_own_error_code(fake):
    backend = backend_on(
        fake, first_token_timeout_s=1, idle_timeout_s=0.5, total_timeout_s=3, concurrency_limit=8
    )
    sample_set = make_set(
        "faults",
        [
            sample("ok", "Say four.\nfake: reply=4"),
            sample("http-503", "x\nfake: fault=http_error status=503"),
            sample("hang", "x\nfake: fault=hang"),
            sample("drip", "x\nfake: fault=drip drip_after=1 drip_gap_ms=2000"),
            sample("slow-total", "x\nfake: tokens=30 itl_ms=300", params={"max_tokens": 64}),
            sample("cut", "x\nfake: fault=cut cut_after=2"),
            sample("malformed", "x\nfake: fault=malformed cut_after=1"),
            sample("empty", "x\nfake: fault=empty"),
            sample(
                "refused",
                "x\nfake: output=refusal",
                checks=[{"type": "contains", "value": "4"}],
            ),
        ],
    )

    run = replay_now(backend, sample_set)

    results = _results(run)
    assert {key: (r.outcome, r.error_code) for key, r in results.items()} == {
        "ok": ("passed", ""),
        "http-503": ("error", "http_503"),
        "hang": ("error", "timeout_first_token"),
        "drip": ("error", "timeout_idle"),
        "slow-total": ("error", "timeout_total"),
        "cut": ("error", "stream_interrupted"),
        "malformed": ("error", "malformed_chunk"),
        "empty": ("error", "empty_output"),
        # A refusal is a complete answer: it fails its check instead of erroring.
        "refused": ("failed", "check_failed"),
    }
    assert results["refused"].output == REFUSAL_TEXT
    assert results["refused"].failed_checks[0]["expected"] == "output contains '4'"
    assert results["ok"].ttft_ms is not None and results["ok"].output == "4"
    assert results["http-503"].error_detail.startswith("Internal server error")
    assert run.state == Run.State.FINISHED
    assert run.summary["error_codes"] == {
        "check_failed": 1,
        "empty_output": 1,
        "http_503": 1,
        "malformed_chunk": 1,
        "stream_interrupted": 1,
        "timeout_first_token": 1,
        "timeout_idle": 1,
        "timeout_total": 1,
    }
    assert run.verdict == Run.Verdict.FAILED
    assert run.summary["samples_below_budget"] == sorted(set(results) - {"ok"})


def test_a_sample_repeated_k_times_sends_k_requests_and_stores_each_attempt(fake):
    backend = backend_on(fake)
    sample_set = make_set("repeats", [sample("four", "fake: reply=4", repeat=3)])

    run = replay_now(backend, sample_set)

    assert len(fake.chat_requests) == 3
    assert sorted(run.results.values_list("attempt", flat=True)) == [1, 2, 3]
    assert run.summary["per_sample"]["four"] == {
        "category": "short_qa",
        "mode": "rerun",
        "attempts": 3,
        "passed": 3,
        "rate": 1.0,
        "min_pass_rate": 1.0,
        "ok": True,
        "error_codes": {},
    }
    assert run.verdict == Run.Verdict.PASSED


@pytest.mark.parametrize(("min_pass_rate", "verdict"), [(0.6, "passed"), (0.8, "failed")])
def test_a_flaky_sample_passes_within_its_budget_and_fails_beyond_it(fake, min_pass_rate, verdict):
    backend = backend_on(fake)
    sample_set = make_set(
        "flaky", [sample("four", "fake: reply=4", repeat=5, min_pass_rate=min_pass_rate)]
    )
    run = services.start_run(actor=None, backend=backend, sample_set=sample_set, enqueue=False)
    four = sample_set.samples.get()
    # Two attempts already failed before the worker died; three more pass now.
    for attempt in (1, 2):
        ResultFactory(
            run=run, sample=four, attempt=attempt, outcome="failed", error_code="check_failed"
        )

    run = services.execute_run(run.pk)

    assert run.summary["per_sample"]["four"]["rate"] == 0.6
    assert run.summary["pass_rate"] == 0.6
    assert run.verdict == verdict
    if verdict == "failed":
        assert run.summary["verdict_reasons"] == [
            "four: 3/5 attempts passed, below its minimum pass rate of 80%"
        ]


def test_sensitive_output_is_stored_redacted_hash_length_and_check_names_only(fake):
    backend = backend_on(fake)
    reply = "Customer IBAN DE89370400440532013000 belongs to Erika Mustermann"
    sample_set = make_set(
        "sensitive",
        [
            sample(
                "pii",
                f'Summarize the complaint.\nfake: reply="{reply}"',
                sensitive=True,
                checks=[{"type": "contains", "value": "refund"}],
            )
        ],
    )

    run = replay_now(backend, sample_set)

    result = run.results.get()
    assert result.redacted is True
    assert result.output == ""
    assert result.output_length == len(reply)
    assert result.output_sha256 == hashlib.sha256(reply.encode()).hexdigest()
    assert result.outcome == "failed"
    assert result.failed_checks == [
        {
            "name": "contains",
            "passed": False,
            "expected": "output contains 'refund'",
            "got": "[redacted: sensitive sample]",
        }
    ]
    stored = [str(v) for v in Result.objects.values_list()] + list(
        Event.objects.values_list("payload", flat=True)
    )
    assert not any("DE89370400440532013000" in text for text in stored)
    assert not any("Erika" in text for text in stored)


def test_non_rerunnable_samples_are_recorded_skipped_and_never_sent(fake):
    backend = backend_on(fake)
    sample_set = make_set(
        "side-effects",
        [
            sample("lookup", "fake: reply=4"),
            sample("refund", "Refund order A-1043 to the customer's card.", rerunnable=False),
        ],
    )

    run = replay_now(backend, sample_set)

    assert not any("Refund order" in text for text in _sent_contents(fake))
    assert len(fake.chat_requests) == 1
    refund = run.results.get(sample__key="refund")
    assert (refund.outcome, refund.attempt) == ("skipped", 1)
    assert run.summary["skipped"] == 1
    assert run.summary["per_sample"]["refund"]["ok"] is None
    assert run.verdict == Run.Verdict.PASSED


def test_a_resumed_run_sends_only_the_missing_attempts_and_never_duplicates(fake):
    backend = backend_on(fake)
    sample_set = make_set(
        "resume",
        [
            sample("a", "fake: reply=4", repeat=2),
            sample("b", "fake: reply=4", repeat=2),
            sample("c", "fake: reply=4"),
        ],
    )
    run = services.start_run(actor=None, backend=backend, sample_set=sample_set, enqueue=False)
    samples = {s.key: s for s in sample_set.samples.all()}
    ResultFactory(run=run, sample=samples["a"], attempt=1)
    ResultFactory(run=run, sample=samples["a"], attempt=2)
    ResultFactory(run=run, sample=samples["b"], attempt=1)
    Run.objects.filter(pk=run.pk).update(state=Run.State.INTERRUPTED, attempts=1)

    run = services.execute_run(run.pk)

    assert len(fake.chat_requests) == 2  # b#2 and c#1
    counts = Counter(run.results.values_list("sample__key", "attempt"))
    assert counts == {("a", 1): 1, ("a", 2): 1, ("b", 1): 1, ("b", 2): 1, ("c", 1): 1}
    assert run.state == Run.State.FINISHED
    assert run.attempts == 2


def test_a_finished_run_executed_again_sends_nothing(fake):
    backend = backend_on(fake)
    sample_set = make_set("twice", [sample("four", "fake: reply=4")])
    run = replay_now(backend, sample_set)
    events = Event.objects.count()

    again = services.execute_run(run.pk)

    assert again.state == Run.State.FINISHED
    assert len(fake.chat_requests) == 1
    assert run.results.count() == 1
    assert Event.objects.count() == events


def test_the_credential_is_read_from_the_named_variable_and_never_stored(fake, monkeypatch):
    fake.configure(api_key=SECRET)
    monkeypatch.setenv("LEDGER_BACKEND_KEY_KB_REPLAY", SECRET)
    backend = backend_on(fake, credential_env="LEDGER_BACKEND_KEY_KB_REPLAY")
    # A server may echo the key in an answer or an error body; the run must not pass it on.
    sample_set = make_set(
        "auth",
        [
            sample("four", "fake: reply=4"),
            sample("boom", "x\nfake: fault=http_error"),
            sample("echo", f'x\nfake: reply="your key is {SECRET}"'),
        ],
    )

    run = replay_now(backend, sample_set)

    assert fake.chat_requests[0].headers["authorization"] == f"Bearer {SECRET}"
    assert run.results.get(sample__key="four").outcome == "passed"
    stored = [str(v) for v in Result.objects.values_list()]
    stored += list(Event.objects.values_list("payload", flat=True))
    stored += [str(Run.objects.filter(pk=run.pk).values().get())]
    assert not any(SECRET in text for text in stored)


def test_a_missing_credential_fails_the_run_naming_the_variable_not_a_value(fake, monkeypatch):
    monkeypatch.delenv("LEDGER_BACKEND_KEY_KB_MISSING", raising=False)
    backend = backend_on(fake, credential_env="LEDGER_BACKEND_KEY_KB_MISSING")
    sample_set = make_set("nokey", [sample("four", "fake: reply=4")])

    run = replay_now(backend, sample_set)

    assert run.state == Run.State.FAILED
    assert "LEDGER_BACKEND_KEY_KB_MISSING" in run.summary["error"]
    assert fake.chat_requests == []
    assert Event.objects.filter(action="replay.run_failed", subject_id=str(run.pk)).exists()


def test_start_run_binds_the_revision_and_fingerprint_and_enqueues_on_commit(
    fake, django_capture_on_commit_callbacks
):
    backend = backend_on(fake)
    sample_set = make_set("queued", [sample("four")])

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        run = services.start_run(actor=None, backend=backend, sample_set=sample_set)

    # run_replay.delay, sent once the transaction commits (beside the metrics' counts of
    # the appended events, which wait for the commit too).
    enqueued = [c for c in callbacks if getattr(getattr(c, "func", c), "__name__", "") != "inc"]
    assert len(enqueued) == 1
    assert (run.state, run.revision, run.fingerprint) == (
        "queued",
        backend.revision,
        backend.revision.fingerprint,
    )
    event = Event.objects.get(action="replay.run_queued")
    assert event.service_id == backend.revision.service_id
    assert event.payload_data["sample_set"] == "queued@1"


def test_start_run_refuses_concurrency_above_the_backend_limit_and_disabled_backends(fake):
    backend = backend_on(fake, concurrency_limit=4)
    sample_set = make_set("limits", [sample("four")])

    with pytest.raises(ValidationError) as raised:
        services.start_run(actor=None, backend=backend, sample_set=sample_set, concurrency=5)
    assert "from 1 to 4" in raised.value.message_dict["concurrency"][0]

    services.update_backend(backend, actor=None, enabled=False)
    with pytest.raises(ValidationError) as raised:
        services.start_run(actor=None, backend=backend, sample_set=sample_set)
    assert "disabled" in raised.value.message_dict["backend"][0]
    assert not Run.objects.exists()


def test_only_the_owning_team_and_platform_sres_may_start_a_run(fake, owner, sre, outsider):
    backend = backend_on(fake)
    sample_set = make_set("who", [sample("four")])
    other_owner = UserFactory(username="mo", roles=["model_owner"])

    with pytest.raises(PermissionDenied):
        services.start_run(actor=outsider, backend=backend, sample_set=sample_set, enqueue=False)
    with pytest.raises(PermissionDenied):
        services.start_run(actor=other_owner, backend=backend, sample_set=sample_set, enqueue=False)
    backend.revision.service.team.members.add(owner)

    by_owner = services.start_run(
        actor=owner, backend=backend, sample_set=sample_set, enqueue=False
    )
    by_sre = services.start_run(actor=sre, backend=backend, sample_set=sample_set, enqueue=False)

    assert by_owner.requested_by == owner and by_sre.requested_by == sre


def test_concurrency_is_bounded_by_the_run_setting(fake):
    fake.configure(ttft_ms=100)
    backend = backend_on(fake, concurrency_limit=8)
    sample_set = make_set("bounded", [sample(f"s{i}", "fake: reply=4") for i in range(8)])

    replay_now(backend, sample_set, concurrency=2)

    assert fake.max_in_flight == 2


@pytest.mark.django_db(transaction=True)
def test_a_worker_whose_claim_was_taken_over_stops_at_its_next_heartbeat(fake, settings):
    settings.REPLAY_HEARTBEAT_SECONDS = 1
    fake.configure(ttft_ms=4000)
    backend = backend_on(fake)
    sample_set = make_set("fenced", [sample("slow", "fake: reply=4")])
    run = services.start_run(actor=None, backend=backend, sample_set=sample_set, enqueue=False)

    def take_over() -> None:
        # Once the worker's request is out, the reaper thought this worker dead and
        # another worker claimed the run.
        fake.wait_for_chat_requests(1)
        Run.objects.filter(pk=run.pk).update(attempts=F("attempts") + 1)
        connection.close()

    def work() -> None:
        # A thread of its own, as a worker: a browser test may leave a loop on this one.
        outcome.append(services.execute_run(run.pk))
        # What the server had sent by the time the worker gave up.
        chunks_sent.extend(fake.chat_requests[0].timing.chunks)
        connection.close()

    outcome: list[Run] = []
    chunks_sent: list[float] = []
    worker, thief = threading.Thread(target=work), threading.Thread(target=take_over)
    worker.start()
    thief.start()
    worker.join(10)
    thief.join(10)
    [stopped] = outcome

    # Stopped at a heartbeat, before the server sent the answer 4 s after the request.
    assert chunks_sent == []
    assert (stopped.state, stopped.attempts) == ("running", 2)  # left to the new owner
    assert not stopped.results.exists()
    assert not Event.objects.filter(action="replay.run_finished").exists()


def test_server_reported_ttft_is_stored_beside_the_clients(fake):
    fake.configure(style="llama-cpp", server_timing=True, ttft_ms=30)
    backend = backend_on(fake)
    sample_set = make_set("timed", [sample("a", "fake: reply=4"), sample("b", "fake: reply=5")])

    run = replay_now(backend, sample_set)

    sent = {r.body["messages"][-1]["content"]: r.timing for r in fake.chat_requests}
    assert run.results.count() == 2
    for result in run.results.select_related("sample"):
        server = sent[result.sample.messages[-1]["content"]]
        assert result.server_ttft_ms == pytest.approx(server.first_chunk_ms)
        assert result.server_timing["timings"]["prompt_ms"] == result.server_ttft_ms
        assert result.ttft_ms >= result.server_ttft_ms
