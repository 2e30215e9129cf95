"""The cost_record gate: is there a price for an hour of the hardware the candidate runs on?

"Basic evaluation and a cost record" before an internal service's release: the
candidate's runtime names its GPU model, and that model has a price sheet in force on
the day (UTC) of the assessment. The reason names neither the price nor the day: the
snapshot binds the gates' reasons (a waived gate's too), and a new price version or a
new day is no new fact about the release that should void its sign-offs; the evidence
cites the version and its price.
"""

from __future__ import annotations

import datetime as dt

from django.urls import reverse

from releases.governance.gates.base import Inputs, Verdict, cite


def assessment_day(now: dt.datetime) -> dt.date:
    """The day whose price holds: price sheets take effect on UTC days."""
    return now.astimezone(dt.UTC).date()


def cost_record(inputs: Inputs) -> Verdict:
    runtime = inputs.release.to_revision.runtime
    prices = reverse("ledger:price_sheet_list")
    if not runtime.gpu_model:
        return (
            "fail",
            f"Runtime {runtime.name} names no GPU model, so no price sheet applies: name its "
            f"GPU model on the runtime, then record its price at {prices}.",
            [
                cite(
                    "runtime",
                    runtime.pk,
                    runtime.name,
                    reverse("ledger:runtime_detail", args=[runtime.name]),
                )
            ],
        )
    sheet = inputs.price_sheet
    if sheet is None:
        return (
            "fail",
            f"No price sheet for {runtime.gpu_model} in force today: record one at {prices}.",
            [],
        )
    ref = cite(
        "price_sheet",
        sheet.pk,
        f"{sheet.gpu_model}: {sheet.price_per_gpu_hour} {sheet.currency} per GPU-hour "
        f"from {sheet.effective_from.isoformat()}",
        f"{prices}#gpu-{sheet.gpu_model}",
    )
    return (
        "pass",
        f"{runtime.gpu_model} ({runtime.gpu_count} per replica on {runtime.name}) has a "
        "price sheet in force.",
        [ref],
    )
