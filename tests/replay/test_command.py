"""`manage.py replay`, `import_sample_set` and `export_sample_set` through call_command."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from replay import jsonl
from replay.models import Run, SampleSet
from replay.starters import starter_files
from tests.replay.helpers import backend_on, make_set, sample

pytestmark = pytest.mark.django_db


def _call(*args) -> str:
    out = StringIO()
    call_command(*args, stdout=out, stderr=StringIO())
    return out.getvalue()


@pytest.fixture
def backend(fake):
    return backend_on(fake, name="kb-vllm")


@pytest.fixture
def smoke():
    return make_set(
        "kb-smoke",
        [
            sample(
                "four", "What is 2 + 2?\nfake: reply=4", checks=[{"type": "contains", "value": "4"}]
            ),
            sample("three", "fake: reply=3", repeat=2, checks=[{"type": "contains", "value": "4"}]),
            sample("refund", "Refund order A-1043.", rerunnable=False),
        ],
    )


def test_replay_prints_the_run_summary(fake, backend, smoke):
    output = _call("replay", "--backend", "kb-vllm", "--sample-set", "kb-smoke")

    run = Run.objects.get()
    assert (run.trigger, run.state, run.verdict) == ("command", "finished", "failed")
    lines = output.splitlines()
    assert lines[0] == f"Run {run.pk}: kb-smoke@1 on kb-vllm ({run.revision}) — failed"
    assert lines[1] == (
        "  pass rate 33.3% (1/3 attempts); 1 of 3 samples within budget; 1 skipped (not re-runnable)"
    )
    assert lines[2].startswith("  TTFT p50 ")
    assert "  errors: check_failed (2)" in lines
    assert "  below budget: three 0/2 (needs 100%)" in lines
    assert len(fake.chat_requests) == 3


def test_replay_json_prints_the_run_as_json(fake, backend, smoke):
    output = _call(
        "replay",
        "--backend",
        "kb-vllm",
        "--sample-set",
        "kb-smoke@1",
        "--json",
        "--concurrency",
        "2",
    )

    report = json.loads(output)
    run = Run.objects.get()
    assert report["run"] == run.pk
    assert (report["state"], report["verdict"]) == ("finished", "failed")
    assert report["sample_set"] == "kb-smoke@1"
    assert report["summary"]["attempts"] == 3
    assert report["summary"]["per_sample"]["four"]["ok"] is True
    assert report["reasons"] == ["three: 0/2 attempts passed, below its minimum pass rate of 100%"]
    assert run.concurrency == 2


def test_replay_of_several_sets_prints_a_list_and_strict_exits_non_zero(fake, backend, smoke):
    make_set("other", [sample("ok", "fake: reply=4")])
    out = StringIO()

    with pytest.raises(CommandError) as raised:
        call_command(
            "replay",
            "--backend",
            "kb-vllm",
            "--sample-set",
            "other",
            "--sample-set",
            "kb-smoke",
            "--json",
            "--strict",
            stdout=out,
        )

    reports = json.loads(out.getvalue())
    assert [(r["sample_set"], r["verdict"]) for r in reports] == [
        ("other@1", "passed"),
        ("kb-smoke@1", "failed"),
    ]
    assert "kb-smoke@1 on kb-vllm: failed" in str(raised.value)


def test_replay_against_several_backends_makes_one_run_each(fake, backend, smoke):
    backend_on(fake, name="kb-sglang", engine="sglang")
    out = StringIO()

    with pytest.raises(CommandError) as raised:
        call_command(
            "replay",
            "--backend=kb-vllm",
            "--backend=kb-sglang",
            "--sample-set=kb-smoke",
            "--json",
            "--strict",
            stdout=out,
        )

    reports = json.loads(out.getvalue())
    assert [(r["backend"], r["sample_set"]) for r in reports] == [
        ("kb-vllm", "kb-smoke@1"),
        ("kb-sglang", "kb-smoke@1"),
    ]
    assert Run.objects.count() == 2
    assert len(fake.chat_requests) == 6
    assert "on kb-vllm: failed" in str(raised.value)
    assert "on kb-sglang: failed" in str(raised.value)


def test_unknown_backends_are_all_named_before_anything_is_sent(fake, backend, smoke):
    with pytest.raises(CommandError) as raised:
        call_command(
            "replay", "--backend=x", "--backend=kb-vllm", "--backend=y", "--sample-set=kb-smoke"
        )

    assert "--backend: no backend named 'x', 'y' (known: kb-vllm)" in str(raised.value)
    assert fake.chat_requests == [] and not Run.objects.exists()


def test_per_sample_json_gives_each_attempt_with_its_timings(fake, backend, smoke):
    fake.configure(ttft_ms=20, server_timing=True)

    report = json.loads(
        _call("replay", "--backend=kb-vllm", "--sample-set=kb-smoke", "--json", "--per-sample")
    )

    samples = {(s["sample"], s["attempt"]): s for s in report["samples"]}
    assert sorted(samples) == [("four", 1), ("refund", 1), ("three", 1), ("three", 2)]
    four = samples[("four", 1)]
    assert (four["outcome"], four["error_code"], four["failed_checks"]) == ("passed", None, [])
    assert four["ttft_ms"] >= four["server_ttft_ms"] >= 20
    assert four["tpot_ms"] is None  # one token: no time per output token
    assert (four["output_tokens"], four["finish_reason"]) == (1, "stop")
    three = samples[("three", 2)]
    assert (three["outcome"], three["error_code"]) == ("failed", "check_failed")
    assert three["failed_checks"] == ["contains"]
    refund = samples[("refund", 1)]
    assert (refund["outcome"], refund["ttft_ms"]) == ("skipped", None)


def test_per_sample_text_prints_a_line_per_attempt(fake, backend, smoke):
    output = _call("replay", "--backend=kb-vllm", "--sample-set=kb-smoke", "--per-sample")

    lines = output.splitlines()
    header = next(i for i, line in enumerate(lines) if line.strip().startswith("sample"))
    rows = [line.split() for line in lines[header + 1 :]]
    assert [(r[0], r[1], r[2], r[3]) for r in rows] == [
        ("four", "1", "passed", "-"),
        ("refund", "1", "skipped", "-"),
        ("three", "1", "failed", "check_failed"),
        ("three", "2", "failed", "check_failed"),
    ]


def test_replay_dry_run_sends_and_records_nothing(fake, backend, smoke):
    output = _call("replay", "--backend", "kb-vllm", "--sample-set", "kb-smoke", "--dry-run")

    assert "3 requests to send, 1 samples skipped. Nothing was sent or recorded." in output
    assert "skip (not re-runnable)" in output
    assert fake.chat_requests == [] and not Run.objects.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--backend", "nope", "--sample-set", "kb-smoke"],
            "--backend: no backend named 'nope' (known: kb-vllm)",
        ),
        (
            ["--backend", "kb-vllm", "--sample-set", "nope"],
            "no sample set nope. Known sets: kb-smoke.",
        ),
        (
            ["--backend", "kb-vllm", "--sample-set", "kb-smoke@7"],
            "no sample set kb-smoke version 7.",
        ),
        (
            ["--backend", "kb-vllm", "--sample-set", "kb-smoke@x"],
            "the version after @ must be a number",
        ),
        (
            ["--backend", "kb-vllm", "--sample-set", "kb-smoke", "--concurrency", "9"],
            "concurrency: Choose from 1 to 4",
        ),
    ],
)
def test_replay_explains_bad_arguments(backend, smoke, args, message):
    with pytest.raises(CommandError) as raised:
        call_command("replay", *args, stdout=StringIO())

    assert message in str(raised.value)


def test_import_and_export_commands_round_trip(tmp_path):
    source = tmp_path / "kb-smoke.jsonl"
    source.write_text(
        jsonl.dump_samples(
            [jsonl.sample_spec(sample("a")), jsonl.sample_spec(sample("b", repeat=2))]
        )
    )

    first = _call("import_sample_set", "kb-smoke", str(source), "--description", "Basics")
    again = _call("import_sample_set", "kb-smoke", str(source))
    exported = tmp_path / "out.jsonl"
    _call("export_sample_set", "kb-smoke@1", "--output", str(exported))

    assert first.strip() == f"Imported kb-smoke@1 from {source}: 2 samples."
    assert again.strip() == f"kb-smoke unchanged: {source} matches kb-smoke@1 (2 samples)."
    assert exported.read_text() == source.read_text()
    assert _call("export_sample_set", "kb-smoke") == source.read_text()


def test_import_command_reports_each_bad_line_and_writes_nothing(tmp_path):
    source = tmp_path / "bad.jsonl"
    source.write_text('{"key": "a"}\nnot json\n')
    err = StringIO()

    with pytest.raises(CommandError):
        call_command("import_sample_set", "kb", str(source), stdout=StringIO(), stderr=err)

    assert err.getvalue().splitlines() == [
        f"{source}: line 1: category: is required",
        f"{source}: line 2: not JSON: Expecting value (column 1)",
    ]
    assert not SampleSet.objects.exists()


def test_the_starter_sets_import_once_and_a_dry_run_writes_nothing():
    dry = _call("import_sample_set", "--starter", "--dry-run")
    assert "Dry run: nothing was written." in dry and not SampleSet.objects.exists()

    output = _call("import_sample_set", "--starter")

    names = sorted(SampleSet.objects.values_list("name", flat=True))
    assert names == sorted(f"starter-{p.stem.replace('_', '-')}" for p in starter_files())
    assert output.count("Imported starter-") == 7
    assert "unchanged" in _call("import_sample_set", "--starter")
