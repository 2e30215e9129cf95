"""Replay sample sets against backends now, in this process, and print the run summaries.

The same code as the `run_replay` task (`services.start_run` + `services.execute_run`),
without a worker: for CI pipelines, for an SRE checking a backend by hand, and for
replaying the starter sets against a local model. The run is recorded like any other
(trigger `command`), compared with its baseline and given a verdict. Each backend
and set is its own run; `--per-sample` adds every attempt's outcome and timings.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.core.serializers.json import DjangoJSONEncoder

from replay import services
from replay.management.commands._common import messages, sample_set_arg
from replay.models import Backend, Result, Run


def sample_reports(run: Run) -> list[dict]:
    """Each attempt of the run, as --per-sample prints it."""
    rows = run.results.select_related("sample").order_by("sample__key", "attempt")
    return [
        {
            "sample": row.sample.key,
            "attempt": row.attempt,
            "outcome": row.outcome,
            "mode": row.mode,
            "error_code": row.error_code or None,
            "ttft_ms": row.ttft_ms,
            "server_ttft_ms": row.server_ttft_ms,
            "tpot_ms": row.tpot_ms,
            "e2e_ms": row.e2e_ms,
            "prompt_tokens": row.prompt_tokens,
            "output_tokens": row.output_tokens,
            "finish_reason": row.finish_reason or None,
            "failed_checks": [check["name"] for check in row.failed_checks],
        }
        for row in rows
    ]


def run_report(run: Run, *, per_sample: bool = False) -> dict:
    """The run as the command prints it with --json."""
    summary = run.summary or {}
    report = {
        "run": run.pk,
        "backend": run.backend.name,
        "sample_set": str(run.sample_set),
        "revision": run.revision_id,
        "fingerprint": run.fingerprint,
        "state": run.state,
        "verdict": run.verdict,
        "reasons": summary.get("verdict_reasons", []),
        "started_at": run.started_at,
        "finished_at": run.finished_at,
        "summary": summary,
        "baseline": run.baseline_id,
        "comparison": run.comparison,
    }
    if per_sample:
        report["samples"] = sample_reports(run)
    return report


def _ms(summary: dict, name: str, percentile: str) -> str:
    value = (summary.get(name) or {}).get(percentile)
    return "n/a" if value is None else f"{value:.1f} ms"


def _cell(value: float | int | None, unit: str = "") -> str:
    if value is None:
        return "-"
    return f"{value:.1f}{unit}" if isinstance(value, float) else f"{value}{unit}"


class Command(BaseCommand):
    help = (
        "Replay sample sets (NAME or NAME@VERSION) against backends synchronously, one run "
        "per backend and set, and print the run summaries; --json prints them as JSON."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--backend",
            required=True,
            action="append",
            metavar="NAME",
            help="Backend name; repeat to replay against several (each its own run).",
        )
        parser.add_argument(
            "--sample-set",
            required=True,
            action="append",
            metavar="NAME[@VERSION]",
            help="The set to replay (latest version without @VERSION); repeat to replay several.",
        )
        parser.add_argument(
            "--concurrency",
            type=int,
            metavar="N",
            help="Requests in flight at once (default and maximum: the backend's limit).",
        )
        parser.add_argument("--json", action="store_true", help="Print the run(s) as JSON.")
        parser.add_argument(
            "--per-sample",
            action="store_true",
            help="Also print each attempt: outcome, error code, TTFT, TPOT and tokens.",
        )
        parser.add_argument(
            "--dry-run",
            action="store_true",
            help="Print what would be sent and skipped; send nothing, record nothing.",
        )
        parser.add_argument(
            "--strict",
            action="store_true",
            help="Exit with status 1 when a run's verdict is failed or regressed (for CI).",
        )

    def handle(self, *args, **options):
        backends = self._backends(options["backend"])
        sample_sets = [sample_set_arg(value) for value in options["sample_set"]]
        if options["dry_run"]:
            for backend in backends:
                for sample_set in sample_sets:
                    self._plan(backend, sample_set, options["concurrency"])
            return
        runs: list[Run] = []
        for backend in backends:
            for sample_set in sample_sets:
                try:
                    run = services.start_run(
                        actor=None,
                        backend=backend,
                        sample_set=sample_set,
                        trigger=Run.Trigger.COMMAND,
                        concurrency=options["concurrency"],
                        enqueue=False,
                    )
                except ValidationError as error:
                    problems = "; ".join(messages(error))
                    done = f" (runs finished before it: {', '.join(str(r.pk) for r in runs)})"
                    raise CommandError(
                        f"{backend.name}: {problems}{done if runs else ''}"
                    ) from error
                runs.append(services.execute_run(run.pk))
        if options["json"]:
            reports = [run_report(run, per_sample=options["per_sample"]) for run in runs]
            data = reports[0] if len(reports) == 1 else reports
            self.stdout.write(json.dumps(data, indent=2, cls=DjangoJSONEncoder))
        else:
            for run in runs:
                self._print(run)
                if options["per_sample"]:
                    self._print_samples(run)
        bad = [run for run in runs if run.verdict != Run.Verdict.PASSED]
        if options["strict"] and bad:
            raise CommandError(
                ", ".join(
                    f"run {run.pk} {run.sample_set} on {run.backend.name}: {run.verdict}"
                    for run in bad
                )
            )

    def _backends(self, names: list[str]) -> list[Backend]:
        wanted = list(dict.fromkeys(names))  # each once, in the order given
        found = {
            b.name: b
            for b in Backend.objects.select_related("revision__service").filter(name__in=wanted)
        }
        unknown = [name for name in wanted if name not in found]
        if unknown:
            known = ", ".join(Backend.objects.values_list("name", flat=True)) or "none yet"
            listed = ", ".join(repr(name) for name in unknown)
            raise CommandError(f"--backend: no backend named {listed} (known: {known})")
        return [found[name] for name in wanted]

    def _plan(self, backend: Backend, sample_set, concurrency: int | None) -> None:
        samples = list(sample_set.samples.order_by("key"))
        sent = [s for s in samples if s.replay_mode != Result.Mode.SKIPPED]
        attempts = sum(s.repeat for s in sent)
        self.stdout.write(
            self.style.MIGRATE_HEADING(
                f"Dry run: {sample_set} on {backend.name} ({backend.revision}), "
                f"concurrency {concurrency or backend.concurrency_limit}"
            )
        )
        for sample in samples:
            if sample.replay_mode == Result.Mode.SKIPPED:
                what = "skip (not re-runnable)"
            else:
                what = f"send {sample.repeat} times" if sample.repeat > 1 else "send"
            if sample.replay_mode == Result.Mode.MODEL_TURN:
                what += f" the model turn only ({len(sample.tool_results)} recorded tool results)"
            extra = " sensitive: output stored redacted" if sample.sensitive else ""
            self.stdout.write(f"  {sample.key:<40} {sample.category:<18} {what}{extra}")
        self.stdout.write(
            f"{attempts} requests to send, {len(samples) - len(sent)} samples skipped. "
            "Nothing was sent or recorded."
        )

    def _print(self, run: Run) -> None:
        summary = run.summary or {}
        styles: dict[str, Callable[[str], str]] = {
            Run.Verdict.PASSED: self.style.SUCCESS,
            Run.Verdict.FAILED: self.style.ERROR,
            Run.Verdict.REGRESSED: self.style.ERROR,
            Run.Verdict.ERRORED: self.style.WARNING,
        }
        style = styles.get(run.verdict, self.style.WARNING)
        verdict = run.verdict if run.state == Run.State.FINISHED else run.state
        self.stdout.write(
            style(
                f"Run {run.pk}: {run.sample_set} on {run.backend.name} ({run.revision}) — {verdict}"
            )
        )
        if "error" in summary:
            self.stdout.write(f"  {summary['error']}")
            return
        rate = summary.get("pass_rate")
        shown = "n/a" if rate is None else f"{rate:.1%}"
        self.stdout.write(
            f"  pass rate {shown} ({summary.get('passed', 0)}/{summary.get('attempts', 0)} "
            f"attempts); {summary.get('samples_ok', 0)} of {summary.get('samples', 0)} samples "
            f"within budget; {summary.get('skipped', 0)} skipped (not re-runnable)"
            + (
                f"; {summary['model_turn']} sent as the model turn only"
                if summary.get("model_turn")
                else ""
            )
        )
        self.stdout.write(
            f"  TTFT p50 {_ms(summary, 'ttft_ms', 'p50')}, p95 {_ms(summary, 'ttft_ms', 'p95')}; "
            f"TPOT p50 {_ms(summary, 'tpot_ms', 'p50')}, p95 {_ms(summary, 'tpot_ms', 'p95')}"
        )
        codes = summary.get("error_codes") or {}
        if codes:
            self.stdout.write(
                "  errors: " + ", ".join(f"{code} ({count})" for code, count in codes.items())
            )
        for key, sample in (summary.get("per_sample") or {}).items():
            if sample.get("ok") is False:
                self.stdout.write(
                    f"  below budget: {key} {sample['passed']}/{sample['attempts']} "
                    f"(needs {sample['min_pass_rate']:.0%})"
                )
        if run.baseline_id:
            self.stdout.write(f"  baseline: run {run.baseline_id}")
        for reason in (run.comparison or {}).get("regressions", []):
            self.stdout.write(self.style.ERROR(f"  regression: {reason['detail']}"))

    def _print_samples(self, run: Run) -> None:
        self.stdout.write(
            f"  {'sample':<32} {'#':>2} {'outcome':<8} {'error':<20} {'TTFT':>10} "
            f"{'TPOT':>9} {'tokens':>6}"
        )
        for row in sample_reports(run):
            self.stdout.write(
                f"  {row['sample']:<32} {row['attempt']:>2} {row['outcome']:<8} "
                f"{row['error_code'] or '-':<20} {_cell(row['ttft_ms'], ' ms'):>10} "
                f"{_cell(row['tpot_ms'], ' ms'):>9} {_cell(row['output_tokens']):>6}"
            )
