"""Run a planned drill now and print what each task type did against its bounds.

`--workers 0` (the default) sends every request from this process; `--workers N` splits
the arrivals over N shards on the Celery workers (a rate above what one process holds)
and waits for them. The results are recorded on the drill (`drill.ran`), a rerun of a
drill that ran replaces them; a concluded drill is not run again.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from releases.drills.plan import PlanRefused
from releases.drills.run import run_drill
from releases.governance.services.errors import TransitionRefused
from releases.models import Drill


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.0f}"


class Command(BaseCommand):
    help = "Run a drill now (open-loop arrivals of its task mix) and print the per-task-type table."

    def add_arguments(self, parser):
        parser.add_argument("drill", type=int, help="The drill's id.")
        parser.add_argument(
            "--workers",
            type=int,
            default=0,
            help="Shards on the Celery workers (0: send from this process).",
        )
        parser.add_argument("--queue", default=None, help="The workers' queue (default: theirs).")

    def handle(self, *args, **options):
        drill = Drill.objects.filter(pk=options["drill"]).first()
        if drill is None:
            raise CommandError(f"There is no drill #{options['drill']}.")
        if options["workers"] < 0:
            raise CommandError("--workers: expected 0 or more.")
        try:
            drill = run_drill(drill, actor=None, workers=options["workers"], queue=options["queue"])
        except PlanRefused as refused:
            raise CommandError(
                "; ".join(f"{path}: {message}" for path, message in refused.errors.items())
            ) from None
        except TransitionRefused as refused:
            raise CommandError(refused.message) from None
        results = drill.results or {}
        self.stdout.write(
            f"drill #{drill.pk} {drill.name}: {results['requests']} requests, "
            f"{results['achieved_rate']}/s of {results['planned_rate']}/s planned, "
            f"{results['late_starts']} late, {results['dropped_starts']} dropped, "
            f"{results['workers']} worker process(es)"
        )
        header = f"{'task type':<16} {'requests':>8} {'p95 TTFT':>9} {'p95 e2e':>9} {'errors':>7}  verdict"
        self.stdout.write(header)
        for entry in drill.mix:
            task_type = entry["task_type"]
            row = results["by_task_type"][task_type]
            bounds = drill.bounds.get(task_type, {})
            self.stdout.write(
                f"{task_type:<16} {row['requests']:>8} "
                f"{_ms(row['ttft_p95_ms']):>5}/{bounds.get('ttft_p95_ms', 0):<4.0f}"
                f"{_ms(row['e2e_p95_ms']):>5}/{bounds.get('e2e_p95_ms', 0):<5.0f}"
                f"{row['error_rate_pct']:>6}%  {row['verdict']}"
                + (f" ({'; '.join(row['reasons'])})" if row["reasons"] else "")
            )
        for stage in results["stages"] if len(results["stages"]) > 1 else []:
            self.stdout.write(
                f"stage {stage['index'] + 1}: up to {stage['rate']}/s, "
                f"{stage['achieved_rate']}/s achieved, "
                + (
                    "every task type met its bounds"
                    if stage["met"]
                    else "not every task type met its bounds"
                )
            )
        knee = results.get("knee_rate")
        self.stdout.write(
            f"knee: {knee}/s"
            if knee is not None
            else "knee: no stage where every task type met its bounds"
        )
