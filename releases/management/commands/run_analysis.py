"""Run one tick of the rollout analysis now — what the beat runs every
ANALYSIS_TICK_SECONDS — and print what it measured and decided.

    manage.py run_analysis

One line per stage measured: the release, service, stage and window, the verdict, the
candidate's and the baseline's measures, and the action taken (promote, rollback, hold,
stop) with why. Nothing due prints one line saying so.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from releases.analysis.services import run_tick


def _measures(values: dict[str, Any]) -> str:
    return ", ".join(f"{key} {value}" for key, value in sorted(values.items())) or "nothing"


class Command(BaseCommand):
    help = "Measure every gray stage whose analysis is due, through Prometheus, and act."

    def handle(self, *args: Any, **options: Any) -> None:
        outcomes = run_tick()
        if not outcomes:
            self.stdout.write("No stage with an analysis is due for a measurement.")
        for outcome in outcomes:
            self.stdout.write(
                f"release #{outcome.release} ({outcome.service}) stage {outcome.stage} "
                f"window {outcome.window}: {outcome.verdict or 'not recorded'}"
            )
            self.stdout.write(f"  candidate: {_measures(outcome.candidate)}")
            self.stdout.write(f"  baseline:  {_measures(outcome.baseline)}")
            if outcome.action or outcome.why:
                self.stdout.write(f"  {outcome.action or 'no action'}: {outcome.why}")
