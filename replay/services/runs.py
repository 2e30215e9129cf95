"""Replay runs: queue one, execute it (resumably), reap the ones whose worker died.

A run is claimed by a conditional update that also counts ``attempts``; that count
is the claim's fencing token. Every heartbeat and the final write are conditional on
it, so a worker that was presumed dead and comes back finds its claim gone and stops,
instead of finishing a run someone else now owns. Results are unique per (run,
sample, attempt) and inserted with ON CONFLICT DO NOTHING, so a resumed run only
sends what is missing and never stores anything twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import hashlib
import logging
from dataclasses import dataclass

from asgiref.sync import async_to_sync, sync_to_async
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext as _

from ledger.chain import append_event
from lib import metrics
from replay.checks import CheckOutcome, judge
from replay.client import BackendConfig, ChatRequest, ReplayResult, replay_many
from replay.models import Backend, Result, Run, Sample, SampleSet
from replay.modelturn import request_messages
from replay.permissions import ensure_can_manage_backend
from replay.services.backends import CredentialMissing, backend_config
from replay.services.common import try_singleton_lock
from replay.services.verdicts import choose_baseline, compare_runs, decide, summarize_run

logger = logging.getLogger(__name__)

__all__ = ["compare_runs", "execute_run", "reap_stale_runs", "start_run"]

# How often results finished meanwhile are stored while a run is replaying.
_FLUSH_SECONDS = 1.0
_OUTPUT_LIMIT = 200_000  # characters kept of one answer; its hash and length cover all of it
_REDACTED = "[redacted: sensitive sample]"
# Error details that never quote the answer or the prompt: kept for sensitive samples.
_SAFE_DETAIL_CODES = ("connect_error", "timeout_first_token", "timeout_idle", "timeout_total")


class RunLost(Exception):
    """The run was reaped and claimed again while this worker still held it."""


def _count_outcome(outcome: str) -> None:
    """Count a run that ended (ledger_replay_runs) once its end is committed."""
    transaction.on_commit(metrics.REPLAY_RUNS.labels(outcome=outcome).inc)


def _label(run: Run) -> str:
    return f"run {run.pk}: {run.sample_set} on {run.backend.name}"


# -- queueing ---------------------------------------------------------------------------


@transaction.atomic
def start_run(
    *,
    actor,
    backend: Backend,
    sample_set: SampleSet,
    trigger: str = Run.Trigger.MANUAL,
    concurrency: int | None = None,
    enqueue: bool = True,
) -> Run:
    """Queue a replay of ``sample_set`` against ``backend``, bound to the revision it serves.

    Appends ``replay.run_queued`` and enqueues ``run_replay`` once the transaction
    commits. ``enqueue=False`` is for the command, which executes the run itself.
    """
    backend = Backend.objects.select_related("revision__service__team").get(pk=backend.pk)
    ensure_can_manage_backend(actor, backend.revision)
    if not backend.enabled:
        raise ValidationError(
            {
                "backend": _("%(backend)s is disabled; enable it before replaying against it.")
                % {"backend": backend.name}
            }
        )
    if concurrency is not None and not 1 <= concurrency <= backend.concurrency_limit:
        raise ValidationError(
            {
                "concurrency": _(
                    "Choose from 1 to %(limit)s, the concurrency limit of %(backend)s."
                )
                % {"limit": backend.concurrency_limit, "backend": backend.name}
            }
        )
    if not sample_set.samples.exists():
        raise ValidationError(
            {"sample_set": _("%(sample_set)s has no samples.") % {"sample_set": sample_set}}
        )
    run = Run.objects.create(
        sample_set=sample_set,
        backend=backend,
        revision=backend.revision,
        fingerprint=backend.revision.fingerprint,
        trigger=trigger,
        concurrency=concurrency,
        requested_by=actor,
    )
    append_event(
        actor=actor,
        action="replay.run_queued",
        subject=run,
        subject_label=_label(run),
        payload={
            "backend": backend.name,
            "sample_set": str(sample_set),
            "revision": backend.revision_id,
            "fingerprint": run.fingerprint,
            "trigger": trigger,
            "concurrency": concurrency,
        },
    )
    if enqueue:
        from replay.tasks import run_replay

        run_replay.delay_on_commit(run.pk)
    return run


# -- claiming ---------------------------------------------------------------------------


def _stale_before() -> dt.datetime:
    return timezone.now() - dt.timedelta(seconds=settings.REPLAY_STALE_AFTER_SECONDS)


def _claim(run_id: int) -> int | None:
    """Take the run for this worker; its new ``attempts`` is the fencing token."""
    claimable = Q(state__in=[Run.State.QUEUED, Run.State.INTERRUPTED]) | Q(
        state=Run.State.RUNNING, heartbeat_at__lt=_stale_before()
    )
    with transaction.atomic():
        run = Run.objects.select_for_update().filter(claimable, pk=run_id).first()
        if run is None:
            return None
        now = timezone.now()
        run.state = Run.State.RUNNING
        run.started_at = run.started_at or now
        run.heartbeat_at = now
        run.attempts += 1
        run.save(update_fields=["state", "started_at", "heartbeat_at", "attempts"])
        return run.attempts


def _held(run_id: int, token: int) -> Q:
    return Q(pk=run_id, state=Run.State.RUNNING, attempts=token)


# -- results ----------------------------------------------------------------------------


def _output_of(result: ReplayResult) -> str:
    parts = [result.output_text] if result.output_text else []
    parts += [f"[tool call] {call.name}({call.arguments})" for call in result.tool_calls]
    return "\n".join(parts)


def _redacted_check(outcome: CheckOutcome) -> dict:
    return {
        "name": outcome.name,
        "passed": outcome.passed,
        "expected": outcome.expected,
        "got": _REDACTED,
    }


def result_row(run: Run, sample: Sample, attempt: int, replayed: ReplayResult) -> Result:
    """One attempt's Result: outcome from the checks, output redacted for sensitive samples."""
    judged, outcomes = judge(replayed, sample.checks)
    if judged.ok:
        outcome = Result.Outcome.PASSED
    elif judged.error_code == "check_failed":
        outcome = Result.Outcome.FAILED
    else:
        outcome = Result.Outcome.ERROR
    output = _output_of(judged)
    failed = [o for o in outcomes if not o.passed]
    detail = judged.error_detail
    row = Result(
        run=run,
        sample=sample,
        attempt=attempt,
        outcome=outcome,
        mode=sample.replay_mode,
        error_code=judged.error_code or "",
        ttft_ms=judged.ttft_ms,
        tpot_ms=judged.tpot_ms,
        e2e_ms=judged.e2e_ms,
        server_ttft_ms=judged.server_ttft_ms,
        server_timing=judged.server_timing,
        prompt_tokens=judged.prompt_tokens,
        output_tokens=judged.output_tokens,
        finish_reason=(judged.finish_reason or "")[:40],
        output_sha256=hashlib.sha256(output.encode()).hexdigest() if output else "",
        output_length=len(output),
    )
    if sample.sensitive:
        row.redacted = True
        row.output = ""
        row.failed_checks = [_redacted_check(o) for o in failed]
        safe = judged.error_code in _SAFE_DETAIL_CODES or judged.error_code == "check_failed"
        row.error_detail = detail if safe or not detail else _REDACTED
    else:
        row.output = output[:_OUTPUT_LIMIT]
        row.failed_checks = [o.to_dict() for o in failed]
        row.error_detail = detail
    return row


def _skipped_row(run: Run, sample: Sample) -> Result:
    return Result(
        run=run,
        sample=sample,
        attempt=1,
        outcome=Result.Outcome.SKIPPED,
        mode=Result.Mode.SKIPPED,
        error_detail=(
            "not re-runnable and no recorded tool results: the request has side effects, "
            "so it is never sent"
        ),
    )


# -- executing --------------------------------------------------------------------------


@dataclass
class _Work:
    sample: Sample
    attempt: int


class _Execution:
    """The body of one claimed run; ORM calls stay on the calling thread."""

    def __init__(self, run: Run, token: int) -> None:
        self.run = run
        self.token = token
        self.samples = list(run.sample_set.samples.order_by("key"))

    def missing(self) -> list[_Work]:
        done = set(self.run.results.values_list("sample_id", "attempt"))
        skipped = [
            _skipped_row(self.run, s)
            for s in self.samples
            if s.replay_mode == Result.Mode.SKIPPED and (s.pk, 1) not in done
        ]
        Result.objects.bulk_create(skipped, ignore_conflicts=True)
        return [
            _Work(sample, attempt)
            for sample in self.samples
            if sample.replay_mode != Result.Mode.SKIPPED
            for attempt in range(1, sample.repeat + 1)
            if (sample.pk, attempt) not in done
        ]

    def store(self, done: list[tuple[_Work, ReplayResult]]) -> None:
        rows = [
            result_row(self.run, work.sample, work.attempt, replayed) for work, replayed in done
        ]
        # ON CONFLICT DO NOTHING: a zombie worker's copy of the same attempt is dropped.
        Result.objects.bulk_create(rows, ignore_conflicts=True)

    def beat(self) -> bool:
        """Heartbeat; False when the claim was lost (reaped and taken by another worker)."""
        held = _held(self.run.pk, self.token)
        return Run.objects.filter(held).update(heartbeat_at=timezone.now()) == 1

    def checkpoint(self, done: list[tuple[_Work, ReplayResult]], *, beat: bool) -> bool:
        """Store a batch of results and, when due, beat; False when the claim was lost."""
        if done:
            self.store(done)
        return self.beat() if beat else True

    async def replay(self, config: BackendConfig, work: list[_Work]) -> None:
        """Replay ``work``; results are stored in batches on the ORM's thread.

        The streams' event loop only appends each result to a list: judging, building
        rows and inserting them happen in ``checkpoint`` calls on the calling thread,
        at most every ``_FLUSH_SECONDS``, so no stream waits on the database while
        another one is being timed. A worker that dies loses at most that much work,
        which the resumed run sends again.
        """
        # A model-turn sample is sent with its recorded tool results after its messages.
        requests = [
            ChatRequest(
                messages=request_messages(w.sample.messages, w.sample.tool_results),
                params=w.sample.params,
            )
            for w in work
        ]
        done: list[tuple[_Work, ReplayResult]] = []

        def on_result(index: int, replayed: ReplayResult) -> None:
            done.append((work[index], replayed))

        task = asyncio.ensure_future(replay_many(config, requests, on_result=on_result))
        interval = settings.REPLAY_HEARTBEAT_SECONDS
        checkpoint = sync_to_async(self.checkpoint)
        loop = asyncio.get_running_loop()
        last_beat = loop.time()
        try:
            while True:
                finished, _ = await asyncio.wait({task}, timeout=min(_FLUSH_SECONDS, interval))
                if finished:
                    task.result()
                    return
                batch, done[:] = done[:], []
                beat = loop.time() - last_beat >= interval
                if not await checkpoint(batch, beat=beat):
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
                    raise RunLost
                if beat:
                    last_beat = loop.time()
        finally:
            if done and not task.cancelled():
                # What finished after the last checkpoint, or before a failure.
                await sync_to_async(self.store)(done)


def execute_run(run_id: int) -> Run:
    """Claim the run, replay what is missing, and finish it with summary and verdict.

    The synchronous body of the ``run_replay`` task and of ``manage.py replay``.
    Returns the run as it stands when there is nothing to do (finished, failed, or
    held by a live worker). Raises Run.DoesNotExist for an unknown id.
    """
    token = _claim(run_id)
    run = Run.objects.select_related(
        "backend", "revision__service", "revision__model_asset", "sample_set"
    ).get(pk=run_id)
    if token is None:
        return run
    execution = _Execution(run, token)
    work = execution.missing()
    if work:
        try:
            config = backend_config(run.backend, concurrency=run.concurrency)
        except CredentialMissing as error:
            return _fail(run, token, str(error))
        logger.info("%s: replaying %d attempts (claim %d)", _label(run), len(work), token)
        try:
            async_to_sync(execution.replay)(config, work)
        except RunLost:
            logger.warning("%s: claim %d lost to another worker; stopping", _label(run), token)
            run.refresh_from_db()
            return run
    return _finish(run, token)


def _finish(run: Run, token: int) -> Run:
    with transaction.atomic():
        run = (
            Run.objects.select_for_update(of=("self",))
            .select_related("backend", "revision__service", "revision__model_asset", "sample_set")
            .filter(_held(run.pk, token))
            .first()
        ) or Run.objects.get(pk=run.pk)
        if run.state != Run.State.RUNNING or run.attempts != token:
            return run
        summary = summarize_run(run)
        run.summary = summary
        run.baseline = choose_baseline(run)
        run.comparison = compare_runs(run.baseline, run) if run.baseline else {}
        verdict, reasons = decide(summary, run.comparison)
        summary["verdict_reasons"] = reasons
        now = timezone.now()
        run.state, run.verdict = Run.State.FINISHED, verdict
        run.finished_at = run.heartbeat_at = now
        run.save(
            update_fields=[
                "state",
                "verdict",
                "finished_at",
                "heartbeat_at",
                "summary",
                "baseline",
                "comparison",
            ]
        )
        payload = {
            "verdict": verdict,
            "reasons": reasons,
            "pass_rate": summary["pass_rate"],
            "attempts": summary["attempts"],
            "error_codes": summary["error_codes"],
            "ttft_p95_ms": summary["ttft_ms"]["p95"],
            "tpot_p95_ms": summary["tpot_ms"]["p95"],
            "baseline": run.baseline_id,
            "revision": run.revision_id,
            "fingerprint": run.fingerprint,
        }
        _count_outcome(verdict)
        append_event(
            actor=None,
            action="replay.run_finished",
            subject=run,
            subject_label=_label(run),
            payload=payload,
        )
        if verdict == Run.Verdict.REGRESSED:
            append_event(
                actor=None,
                action="replay.regression_detected",
                subject=run,
                subject_label=_label(run),
                payload={
                    "baseline": run.baseline_id,
                    "regressions": run.comparison["regressions"],
                    "sample_set": str(run.sample_set),
                    "backend": run.backend.name,
                    "revision": run.revision_id,
                },
            )
    logger.info("%s: finished, %s", _label(run), verdict)
    return run


def _fail(run: Run, token: int, reason: str) -> Run:
    """The run cannot be replayed here (e.g. no credential): failed, not a verdict on the model."""
    with transaction.atomic():
        now = timezone.now()
        updated = Run.objects.filter(_held(run.pk, token)).update(
            state=Run.State.FAILED,
            verdict=Run.Verdict.FAILED,
            finished_at=now,
            heartbeat_at=now,
            summary={"error": reason},
        )
        if updated:
            _count_outcome("run_failed")
            append_event(
                actor=None,
                action="replay.run_failed",
                subject=run,
                subject_label=_label(run),
                payload={"reason": reason},
            )
    logger.warning("%s: failed: %s", _label(run), reason)
    run.refresh_from_db()
    return run


# -- reaping ----------------------------------------------------------------------------


def reap_stale_runs() -> list[int]:
    """Interrupt runs whose worker stopped beating, and queue them again to resume.

    A singleton: a second reaper at the same time returns at once. A run that has
    been claimed ``REPLAY_MAX_ATTEMPTS`` times is failed instead (something in it
    kills its worker). An interrupted run still waiting after another stale period
    is queued again, in case the message was lost. Returns the ids re-queued.
    """
    from replay.tasks import run_replay

    requeued: list[int] = []
    with transaction.atomic():
        if not try_singleton_lock("reap_stale_runs"):
            return []
        now = timezone.now()
        stale = _stale_before()
        running = (
            Run.objects.select_for_update(skip_locked=True, of=("self",))
            .select_related("backend", "sample_set", "revision")
            .filter(state=Run.State.RUNNING, heartbeat_at__lt=stale)
        )
        for run in running:
            silent = (now - run.heartbeat_at).total_seconds()
            if run.attempts >= settings.REPLAY_MAX_ATTEMPTS:
                reason = (
                    f"its worker stopped {run.attempts} times (last heartbeat {silent:.0f} s "
                    "ago); not resumed again"
                )
                Run.objects.filter(pk=run.pk).update(
                    state=Run.State.FAILED,
                    verdict=Run.Verdict.FAILED,
                    finished_at=now,
                    summary={"error": reason},
                )
                _count_outcome("run_failed")
                append_event(
                    actor=None,
                    action="replay.run_failed",
                    subject=run,
                    subject_label=_label(run),
                    payload={"reason": reason, "attempts": run.attempts},
                )
                continue
            Run.objects.filter(pk=run.pk).update(state=Run.State.INTERRUPTED, heartbeat_at=now)
            append_event(
                actor=None,
                action="replay.run_interrupted",
                subject=run,
                subject_label=_label(run),
                payload={
                    "last_heartbeat": run.heartbeat_at,
                    "silent_seconds": round(silent),
                    "attempts": run.attempts,
                    "results_kept": run.results.count(),
                },
            )
            run_replay.delay_on_commit(run.pk)
            requeued.append(run.pk)
        # heartbeat_at of an interrupted run is when it was last queued again.
        waiting = Run.objects.select_for_update(skip_locked=True).filter(
            state=Run.State.INTERRUPTED, heartbeat_at__lt=stale
        )
        for run_id in waiting.values_list("pk", flat=True):
            Run.objects.filter(pk=run_id).update(heartbeat_at=now)
            run_replay.delay_on_commit(run_id)
            requeued.append(run_id)
    if requeued:
        logger.info("reaper: queued runs %s again", requeued)
    return requeued
