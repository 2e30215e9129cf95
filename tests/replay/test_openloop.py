"""The open-loop plan and runner (replay.openloop), against the fake server; no database.

Event-based: the server's own arrival log (count, order, which request) is compared
with the plan; no test asserts a duration band (the machine is shared and noisy).
"""

from __future__ import annotations

import itertools
import math
import time
from collections import Counter

import pytest

from replay.client import BackendConfig, ChatRequest, Timeouts
from replay.openloop import (
    ArrivalProfile,
    MixEntry,
    OpenLoopResult,
    Plan,
    PlanInvalid,
    PlanSample,
    ceiling_problem,
    run_open_loop_sync,
)
from replay.openloop.shards import merge, run_shard
from replay.openloop.summary import RequestRecord
from tests.support.fake_openai import FakeOpenAI


def chat(text: str = "Tell me something.") -> ChatRequest:
    return ChatRequest(messages=[{"role": "user", "content": text}], params={"max_tokens": 8})


def entry(task_type: str, weight: float, *keys: str, directive: str = "") -> MixEntry:
    text = f"Tell me something.\nfake: {directive}" if directive else "Tell me something."
    return MixEntry(task_type, tuple(PlanSample(key, chat(text)) for key in keys), weight)


def constant(rate: float, duration_s: float) -> ArrivalProfile:
    return ArrivalProfile.from_json({"type": "constant", "rate": rate, "duration_s": duration_s})


def backend_for(server: FakeOpenAI) -> BackendConfig:
    return BackendConfig(
        base_url=server.base_url,
        model=server.config.model,
        timeouts=Timeouts(connect=5, first_token=60, idle=60, total=120),
    )


# -- the plan -------------------------------------------------------------------------------


def test_a_constant_profile_plans_rate_times_duration_arrivals_evenly_spaced():
    plan = Plan(constant(20, 3), (entry("qa", 1, "a"),), seed=1)
    offsets = [a.offset_s for a in plan.arrivals()]
    assert len(offsets) == 60
    assert offsets == pytest.approx([k / 20 for k in range(60)])
    assert {a.stage for a in plan.arrivals()} == {0}


def test_a_ramp_moves_the_rate_linearly_between_stages_as_k6_does():
    profile = ArrivalProfile.from_json(
        {"type": "ramp", "stages": [{"duration_s": 10, "rate": 10}, {"duration_s": 5, "rate": 10}]}
    )
    plan = Plan(profile, (entry("qa", 1, "a"),), seed=1)
    stages = Counter(a.stage for a in plan.arrivals())
    # 0 -> 10/s over 10 s carries 50 arrivals, then 10/s held for 5 s carries 50.
    assert stages == {0: 50, 1: 50}
    # Arrival k of the first stage is where the rate's integral t^2 / 2 reaches k.
    first = [a.offset_s for a in plan.arrivals() if a.stage == 0]
    assert first[:4] == pytest.approx([0, math.sqrt(2), math.sqrt(4), math.sqrt(6)])
    assert sum(1 for t in first if t < 5) == 13  # the slow start: a quarter of the stage's load
    assert profile.peak_rate == 10


def test_poisson_arrivals_are_seeded_exponential_gaps_at_the_mean_rate():
    profile = ArrivalProfile.from_json({"type": "poisson", "rate": 50, "duration_s": 20})
    one = Plan(profile, (entry("qa", 1, "a"),), seed=7).arrivals()
    again = Plan(profile, (entry("qa", 1, "a"),), seed=7).arrivals()
    other = Plan(profile, (entry("qa", 1, "a"),), seed=8).arrivals()
    assert [a.offset_s for a in one] == [a.offset_s for a in again]
    assert [a.offset_s for a in one] != [a.offset_s for a in other]
    # 1,000 expected; a Poisson count's sd is sqrt(1000) ~ 32: 5 sd either side.
    assert abs(len(one) - 1000) < 5 * math.sqrt(1000)
    assert all(b.offset_s > a.offset_s for a, b in itertools.pairwise(one))
    assert one[0].offset_s > 0 and one[-1].offset_s < 20


def test_the_mix_is_drawn_by_weight_within_a_binomial_tolerance_and_repeats_by_seed():
    mix = (
        entry("hr-bot", 70, "h1", "h2"),
        entry("legal-bot", 20, "l1"),
        entry("sql-bot", 10, "s1", "s2", "s3"),
        entry("unused", 0, "u1"),
    )
    plan = Plan(constant(100, 50), mix, seed=42)
    drawn = [(a.offset_s, a.task_type, a.sample_key) for a in plan.arrivals()]
    n = len(drawn)
    counts = Counter(task_type for _, task_type, _ in drawn)
    for task_type, share in (("hr-bot", 0.7), ("legal-bot", 0.2), ("sql-bot", 0.1)):
        sd = math.sqrt(n * share * (1 - share))
        assert abs(counts[task_type] - n * share) < 5 * sd, (task_type, counts)
    assert counts["unused"] == 0
    # Every sample of a type is used; the same seed draws the same sequence, another does not.
    assert {key for _, t, key in drawn if t == "sql-bot"} == {"s1", "s2", "s3"}
    assert drawn == [
        (a.offset_s, a.task_type, a.sample_key)
        for a in Plan(constant(100, 50), mix, seed=42).arrivals()
    ]
    assert drawn != [
        (a.offset_s, a.task_type, a.sample_key)
        for a in Plan(constant(100, 50), mix, seed=43).arrivals()
    ]


def test_samples_not_rerunnable_are_never_drawn():
    samples = (PlanSample("safe", chat()), PlanSample("refund", chat(), rerunnable=False))
    plan = Plan(constant(50, 10), (MixEntry("tools", samples, 1),), seed=3)
    assert {a.sample_key for a in plan.arrivals()} == {"safe"}
    assert plan.to_json()["mix"][0]["not_rerunnable"] == ["refund"]


def test_shards_partition_the_plan_exactly():
    plan = Plan(constant(30, 10), (entry("a", 1, "x"), entry("b", 2, "y")), seed=5)
    shards = [plan.shard(i, 3) for i in range(3)]
    indexes = sorted(a.index for shard in shards for a in shard)
    assert indexes == list(range(len(plan.arrivals())))
    assert sorted(shards[1] + shards[0] + shards[2], key=lambda a: a.index) == plan.arrivals()


@pytest.mark.parametrize(
    ("arrival", "field"),
    [
        ({"type": "constant", "rate": 0, "duration_s": 10}, "arrival.rate"),
        ({"type": "poisson", "rate": -1, "duration_s": 10}, "arrival.rate"),
        ({"type": "constant", "rate": 5, "duration_s": 0}, "arrival.duration_s"),
        ({"type": "constant", "rate": "fast", "duration_s": 10}, "arrival.rate"),
        ({"type": "burst", "rate": 5, "duration_s": 10}, "arrival.type"),
        ({"type": "ramp", "stages": []}, "arrival.stages"),
        ({"type": "ramp", "stages": [{"duration_s": 5, "rate": -2}]}, "arrival.stages[0].rate"),
        ({"type": "ramp", "stages": [{"duration_s": 5, "rate": 0}]}, "arrival.stages"),
        ({"type": "constant", "rate": 5, "duration_s": 10, "stages": []}, "arrival.stages"),
    ],
)
def test_a_bad_arrival_profile_is_refused_naming_the_field(arrival, field):
    with pytest.raises(PlanInvalid) as refused:
        ArrivalProfile.from_json(arrival)
    assert field in refused.value.errors


@pytest.mark.parametrize(
    ("mix", "field"),
    [
        ((), "mix"),
        ((entry("a", 0, "x"), entry("b", 0, "y")), "mix.weight"),
        ((entry("a", -1, "x"),), "mix[0].weight"),
        ((entry("a", 1, "x"), MixEntry("b", (), 1)), "mix[1].samples"),
        ((MixEntry("a", (PlanSample("k", chat(), rerunnable=False),), 1),), "mix[0].samples"),
        ((entry("a", 1, "x"), entry("a", 1, "y")), "mix[1].task_type"),
        ((entry("", 1, "x"),), "mix[0].task_type"),
    ],
)
def test_a_bad_mix_is_refused_naming_the_field(mix, field):
    with pytest.raises(PlanInvalid) as refused:
        Plan(constant(5, 10), mix, seed=1)
    assert field in refused.value.errors


def test_a_plan_too_large_or_without_a_seed_is_refused():
    with pytest.raises(PlanInvalid) as refused:
        Plan(constant(10_000, 3600), (entry("a", 1, "x"),), seed=1)
    assert "arrival" in refused.value.errors
    with pytest.raises(PlanInvalid) as refused:
        Plan(constant(5, 10), (entry("a", 1, "x"),), seed=None)  # type: ignore[arg-type]
    assert "seed" in refused.value.errors


def test_a_ceiling_that_cannot_carry_the_peak_at_the_expected_latency_is_named():
    plan = Plan(constant(50, 10), (entry("a", 1, "x"),), seed=1)
    assert "needs at least 100" in (ceiling_problem(plan, 64, expected_e2e_s=2.0) or "")
    assert ceiling_problem(plan, 128, expected_e2e_s=2.0) is None


# -- the runner -----------------------------------------------------------------------------


def _server_order(server: FakeOpenAI) -> list[str]:
    arrived = sorted(server.chat_requests, key=lambda r: r.received_at)
    return [r.headers["x-request-id"] for r in arrived]


def test_starts_do_not_wait_for_a_slow_server_the_open_loop_property():
    """Slowed tenfold (and queueing behind a cap of 2), the server still receives every
    planned request, in the planned order, all before it has finished its first answer."""
    plan = Plan(constant(20, 1), (entry("a", 1, "x"), entry("b", 1, "y")), seed=11)
    planned = [(a.index, a.task_type) for a in plan.arrivals()]
    seen = {}
    for ttft_ms in (200, 2000):
        with FakeOpenAI(ttft_ms=ttft_ms, tokens=2) as server:
            server.configure(max_concurrent=2)
            result = run_open_loop_sync(backend_for(server), plan, ceiling=100)
            by_id = {r.request_id: r for r in result.records}
            order = _server_order(server)
            seen[ttft_ms] = order
            assert len(order) == len(planned) == 20
            assert [(by_id[i].index, by_id[i].task_type) for i in order] == planned
            first_answered = min(
                r.timing.last_chunk for r in server.chat_requests if r.timing.last_chunk
            )
            if ttft_ms == 2000:
                # Every arrival came before the server finished anything: no start waited.
                assert all(r.timing.received < first_answered for r in server.chat_requests)
            assert server.max_in_flight == 2  # the cap queued the rest
            assert {r.start for r in result.records} <= {"on_time", "late"}
            assert all(r.outcome == "ok" for r in result.records)
            assert all(r.lateness_ms >= 0 for r in result.records)  # never early
    assert len(seen[200]) == len(seen[2000])


def test_starts_over_the_in_flight_ceiling_are_dropped_and_reported():
    plan = Plan(constant(20, 0.5), (entry("a", 1, "x"),), seed=2)
    with FakeOpenAI(ttft_ms=3000, tokens=1) as server:
        result = run_open_loop_sync(backend_for(server), plan, ceiling=3)
        assert len(server.chat_requests) == 3
    starts = Counter(r.start for r in result.records)
    assert starts["dropped"] == 7 and starts["on_time"] + starts["late"] == 3
    assert len(result.records) == 10  # nothing skipped silently
    dropped = [r for r in result.records if r.start == "dropped"]
    assert all(r.outcome is None and r.started_ms is None for r in dropped)
    overall = result.summary()["overall"]
    assert (overall["planned"], overall["requests"], overall["dropped"]) == (10, 3, 7)


def test_a_start_made_after_the_tolerance_is_counted_late_with_its_lateness():
    plan = Plan(constant(10, 0.5), (entry("a", 1, "x"),), seed=2)
    with FakeOpenAI(tokens=1) as server:
        # The plan's start was a second ago: every start is at least that late.
        result = run_open_loop_sync(
            backend_for(server), plan, ceiling=10, start_at=time.time() - 1.0
        )
    assert {r.start for r in result.records} == {"late"}
    assert all(r.started_ms >= 1000 - 5 for r in result.records)
    assert all(r.lateness_ms >= 1000 - r.planned_ms - 5 for r in result.records)
    overall = result.summary()["overall"]
    assert overall["late"] == 5 and overall["late_share"] == 1.0
    assert overall["lateness_ms"]["p50"] >= 500


def test_results_are_summarised_per_task_type_with_errors_by_code():
    mix = (
        entry("kb", 3, "k1", "k2", directive="ttft_ms=5"),
        entry("sql", 1, "s1", directive="fault=http_error status=503"),
    )
    plan = Plan(constant(40, 1), mix, seed=9)
    with FakeOpenAI(tokens=3) as server:
        result = run_open_loop_sync(backend_for(server), plan, ceiling=100)
    planned = Counter(a.task_type for a in plan.arrivals())
    summary = result.summary()
    kb, sql = summary["by_task_type"]["kb"], summary["by_task_type"]["sql"]
    assert (kb["requests"], sql["requests"]) == (planned["kb"], planned["sql"])
    assert kb["error_rate"] == 0 and kb["ttft_ms"]["p95"] is not None
    assert sql["error_codes"] == {"http_503": planned["sql"]} and sql["error_rate"] == 1.0
    assert sql["ttft_ms"]["p50"] is None  # latencies are over successful requests only
    assert summary["overall"]["requests"] == 40
    assert set(summary["by_stage"]) == {"0"}
    # Each ok request is timed as replay times it: TTFT, e2e and TPOT (3 tokens).
    ok = [r for r in result.records if r.outcome == "ok"]
    assert all(
        r.ttft_ms is not None and r.e2e_ms >= r.ttft_ms and r.tpot_ms is not None for r in ok
    )


def test_a_ramp_is_summarised_per_stage():
    profile = ArrivalProfile.from_json(
        {
            "type": "ramp",
            "start_rate": 10,
            "stages": [{"duration_s": 1, "rate": 10}, {"duration_s": 1, "rate": 30}],
        }
    )
    plan = Plan(profile, (entry("a", 1, "x"),), seed=4)
    with FakeOpenAI(tokens=1) as server:
        result = run_open_loop_sync(backend_for(server), plan, ceiling=100)
        assert len(server.chat_requests) == len(plan.arrivals()) == 30
    stages = result.summary()["by_stage"]
    assert (stages["0"]["planned"], stages["1"]["planned"]) == (10, 20)
    assert (stages["0"]["planned_rate"], stages["1"]["planned_rate"]) == (10, 20)


def test_a_result_round_trips_through_its_compact_json():
    plan = Plan(constant(10, 0.3), (entry("a", 1, "x"),), seed=4)
    with FakeOpenAI(tokens=1) as server:
        result = run_open_loop_sync(backend_for(server), plan, ceiling=2)
    data = result.to_json()
    assert data["columns"][:3] == ["index", "planned_ms", "started_ms"]
    again = OpenLoopResult.from_json(data)
    assert again.records == [type(r).from_row(r.row()) for r in result.records]
    assert again.plan == plan.to_json() and again.plan["seed"] == 4


def test_a_sample_the_client_would_refuse_is_refused_before_anything_is_sent():
    bad = ChatRequest(messages=[{"role": "user", "content": "x"}], params={"n": 2})
    plan = Plan(constant(5, 1), (MixEntry("a", (PlanSample("two", bad),), 1),), seed=1)
    with FakeOpenAI() as server:
        with pytest.raises(PlanInvalid) as refused:
            run_open_loop_sync(backend_for(server), plan, ceiling=5)
        assert server.chat_requests == []
    assert "mix[0].samples[0]" in refused.value.errors


# -- merging shards (the Celery path itself: test_openloop_shards.py) -----------------------


def _shard_result(plan: Plan, shard: int, shards: int, worker: str) -> OpenLoopResult:
    records = [
        RequestRecord(
            a.index,
            a.offset_s * 1000,
            a.offset_s * 1000 + 1,
            a.task_type,
            a.stage,
            a.sample_key,
            "on_time",
            "ok",
            10.0,
            20.0,
            1.0,
            f"id-{a.index}",
        )
        for a in plan.shard(shard, shards)
    ]
    return OpenLoopResult(plan.to_json(), shard, shards, 10, 5.0, worker, 0.0, records)


def test_merged_shards_count_each_arrival_once_and_a_partial_shard_not_at_all():
    plan = Plan(constant(30, 2), (entry("a", 1, "x"), entry("b", 1, "y")), seed=6)
    whole = {i: _shard_result(plan, i, 3, f"w{i % 2}") for i in range(3)}
    merged = merge(plan, 3, whole, {}, [])
    assert [row[0] for row in merged["rows"]] == list(range(60))
    assert (merged["workers"], merged["counted"], merged["missing"]) == (2, 60, {})
    assert merged["summary"]["overall"]["requests"] == 60

    partial = _shard_result(plan, 2, 3, "w0")
    partial.records = partial.records[:-1]  # a shard that lost a record is not half-counted
    merged = merge(plan, 3, {**whole, 2: partial}, {}, [2])
    assert merged["completed"] == [0, 1] and "2" in merged["missing"]
    assert merged["reruns"] == []
    assert merged["counted"] == 40 == merged["summary"]["overall"]["planned"]


def test_a_shard_received_long_after_its_start_is_not_run():
    outcome = run_shard({}, 0, 2, time.time() - 3600)  # type: ignore[typeddict-item]
    assert outcome["status"] == "expired"
