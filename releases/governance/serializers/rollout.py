"""The rollout and rollbacks over REST: stages with their observations, what a gateway
posts for a stage, the verbs' bodies, and a rollback as it was recorded."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from releases.governance.playbooks import FAILURE_MODES
from releases.governance.queries.analysis import StageAnalysis, stage_analyses
from releases.models import Observation, Release, RollbackEvent, Stage
from releases.schemas import OBSERVATION_EXAMPLE


def _slug(field: str, *, null: bool = False) -> serializers.SlugRelatedField:
    return serializers.SlugRelatedField(slug_field=field, read_only=True, allow_null=null)


class GuardResultSerializer(serializers.Serializer):
    metric = serializers.CharField()
    label = serializers.CharField()  # type: ignore[assignment]  # a field named like Field.label
    status = serializers.ChoiceField(choices=["pass", "fail", "inconclusive"])
    value = serializers.FloatField(allow_null=True)
    baseline = serializers.FloatField(allow_null=True)
    why = serializers.CharField()
    critical = serializers.BooleanField()
    dry_run = serializers.BooleanField()


class ObservationSerializer(serializers.ModelSerializer):
    stage = serializers.IntegerField(source="stage.number", read_only=True)
    posted_by = _slug("username", null=True)
    guard_results = GuardResultSerializer(many=True, read_only=True)
    candidate = serializers.JSONField()
    baseline = serializers.JSONField()

    class Meta:
        model = Observation
        fields = [
            "id",
            "stage",
            "window_start",
            "window_end",
            "source",
            "candidate",
            "baseline",
            "source_error",
            "verdict",
            "guard_results",
            "posted_by",
            "created_at",
        ]


class ObservationRequestSerializer(serializers.Serializer):
    """One window of the candidate beside the live baseline: aggregates, or raw
    per-request TTFTs in ms (percentiles are computed from them, and a relative bound is
    then tested with Mann-Whitney U), or both. A side measured by Prometheus may carry
    its TTFT histogram in its aggregates (`ttft_buckets`: cumulative `[le, count]`
    pairs, `"+Inf"` last), and a relative bound is then tested on the buckets."""

    window_start = serializers.DateTimeField()
    window_end = serializers.DateTimeField()
    candidate = serializers.JSONField(
        required=False, default=dict, help_text=f"Aggregates. Example: {OBSERVATION_EXAMPLE}"
    )
    baseline = serializers.JSONField(
        required=False, default=dict, help_text="The live revision's aggregates, same keys."
    )
    candidate_ttft_ms = serializers.ListField(
        child=serializers.FloatField(min_value=0),
        required=False,
        default=list,
        max_length=100_000,
        help_text="Raw per-request TTFTs of the candidate, ms.",
    )
    baseline_ttft_ms = serializers.ListField(
        child=serializers.FloatField(min_value=0),
        required=False,
        default=list,
        max_length=100_000,
        help_text="Raw per-request TTFTs of the live revision, ms.",
    )
    source = serializers.CharField(  # type: ignore[assignment]  # named like Field.source
        required=False, default="", allow_blank=True, max_length=60
    )
    source_error = serializers.CharField(
        required=False,
        default="",
        allow_blank=True,
        max_length=2000,
        help_text="The metrics source failed: why. The observation is then an error.",
    )


class StageSerializer(serializers.ModelSerializer):
    traffic_pct = serializers.FloatField()
    guards = serializers.JSONField(
        help_text="[{metric, max, max_increase_pct, min_requests, critical, dry_run}]"
    )
    started_by = _slug("username", null=True)
    ended_by = _slug("username", null=True)
    held_by = _slug("username", null=True)
    observations = serializers.SerializerMethodField()

    class Meta:
        model = Stage
        fields = [
            "number",
            "traffic_pct",
            "observation_minutes",
            "guards",
            "failure_limit",
            "error_limit",
            "state",
            "state_reason",
            "held_by",
            "started_at",
            "started_by",
            "ended_at",
            "ended_by",
            "observations",
        ]

    def get_observations(self, stage: Stage) -> dict[str, int]:
        counts: dict[str, int] = self.context.get("counts", {}).get(stage.pk, {})
        return counts


class AnalysisQuerySerializer(serializers.Serializer):
    candidate = serializers.CharField(help_text="PromQL measuring the candidate.")
    baseline = serializers.CharField(help_text="PromQL measuring the live baseline.")
    origin = serializers.ChoiceField(
        choices=["plan", "default"], help_text="The plan's own query, or the engine's default."
    )


class StageAnalysisSerializer(serializers.Serializer):
    stage = serializers.IntegerField()
    source = serializers.CharField()  # type: ignore[assignment]  # a field named like Field.source
    interval_s = serializers.IntegerField()
    consecutive_error_limit = serializers.IntegerField()
    on_breach = serializers.ChoiceField(choices=["hold", "rollback"])
    auto_promote = serializers.BooleanField()
    paused = serializers.BooleanField()
    paused_by = serializers.CharField(allow_null=True)
    pause_reason = serializers.CharField(allow_blank=True)
    queries = serializers.DictField(
        child=AnalysisQuerySerializer(),
        help_text="Per guard metric, the PromQL that measures each side (paste it into "
        "Prometheus).",
    )
    unmeasured = serializers.ListField(
        child=serializers.CharField(),
        help_text="Guard metrics no query measures: their guards read inconclusive.",
    )
    problems = serializers.ListField(child=serializers.CharField())


def analysis_shape(analyses: list[StageAnalysis]) -> list[dict[str, Any]]:
    shaped = []
    for found in analyses:
        row = found.stage_row
        paused_by = row.analysis_paused_by if row is not None else None
        shaped.append(
            {
                "stage": found.stage,
                **{k: v for k, v in found.spec.as_dict().items() if k != "queries"},
                "paused": found.paused,
                "paused_by": paused_by.get_username() if paused_by is not None else None,
                "pause_reason": row.analysis_pause_reason if row is not None else "",
                "queries": found.queries,
                "unmeasured": found.unmeasured,
                "problems": found.problems,
            }
        )
    return shaped


class RolloutSerializer(serializers.Serializer):
    state = serializers.CharField(help_text="The release's state.")
    traffic_pct = serializers.FloatField(help_text="The candidate's share of traffic now.")
    current_stage = serializers.IntegerField(allow_null=True)
    breached = serializers.BooleanField()
    held = serializers.BooleanField()
    earliest_full_at = serializers.DateTimeField(
        allow_null=True, help_text="The earliest time the candidate can carry all traffic."
    )
    rollback_minutes = serializers.IntegerField(
        allow_null=True, help_text="How long a rollback takes, by the plan."
    )
    stages = StageSerializer(many=True)
    analysis = StageAnalysisSerializer(
        many=True,
        help_text="The stages judged from Prometheus: their analysis and the queries it runs.",
    )


class ReasonSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=2000)


class StartSerializer(serializers.Serializer):
    early_reason = serializers.CharField(
        required=False,
        default="",
        allow_blank=True,
        max_length=2000,
        help_text="Why the rollout starts before the release's planned start (needed then).",
    )


class PromoteSerializer(serializers.Serializer):
    note = serializers.CharField(required=False, default="", allow_blank=True, max_length=2000)


class CloseSerializer(serializers.Serializer):
    close_code = serializers.ChoiceField(choices=Release.CloseCode.choices)
    note = serializers.CharField(required=False, default="", allow_blank=True, max_length=2000)
    incidents = serializers.JSONField(
        required=False,
        help_text='Linked incidents: [{"ticket": "INC-4412", "url": "https://…"}].',
    )


def _cache_answer(help_text: str) -> serializers.ChoiceField:
    return serializers.ChoiceField(
        choices=RollbackEvent.CacheAnswer.choices,
        required=False,
        allow_blank=True,
        default="",
        help_text=help_text,
    )


PREFIX_CACHE_HELP = (
    "Was the engine's prefix (KV) cache flushed after the rollback: flushed, not_flushed, "
    "not_in_use, or blank (not answered yet). vLLM: POST /reset_prefix_cache (only with "
    "VLLM_SERVER_DEV_MODE=1); SGLang: POST /flush_cache; other engines: restart the replica."
)
RESPONSE_CACHE_HELP = (
    "Was the gateway's response cache flushed after the rollback: flushed, not_flushed, "
    "not_in_use, or blank (not answered yet)."
)


class RollbackRequestSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=2000)
    symptom = serializers.ChoiceField(
        choices=[("", "none"), *FAILURE_MODES.items()], required=False, default=""
    )
    target_revision = serializers.IntegerField(
        required=False,
        allow_null=True,
        default=None,
        help_text="A revision id of the service; default: the rollback plan's target, or the "
        "revision that served before when no plan is in force (never one rolled back off the "
        "service that no release has put live since).",
    )
    confirm_rolled_back = serializers.BooleanField(
        required=False,
        default=False,
        help_text="True to go back to a target that was rolled back off the service; with "
        "rolled_back_reason.",
    )
    rolled_back_reason = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        max_length=2000,
        help_text="Why go back to a target that was rolled back off the service (recorded).",
    )
    prefix_cache = _cache_answer(PREFIX_CACHE_HELP)
    response_cache = _cache_answer(RESPONSE_CACHE_HELP)


class RollbackCachesSerializer(serializers.Serializer):
    """Answers given after the rollback was recorded; a blank one keeps its answer."""

    prefix_cache = _cache_answer(PREFIX_CACHE_HELP)
    response_cache = _cache_answer(RESPONSE_CACHE_HELP)


class ConfirmRollbackSerializer(serializers.Serializer):
    succeeded = serializers.BooleanField()
    note = serializers.CharField(max_length=2000)


class RevisionLabelSerializer(serializers.Serializer):
    id = serializers.IntegerField(read_only=True)
    label = serializers.CharField(read_only=True)  # type: ignore[assignment]  # like Field.label


class VerificationQueuedSerializer(serializers.Serializer):
    """A verification replay of a rollback target, queued by Verify now."""

    run = serializers.IntegerField(source="pk", help_text="The replay run: /api/replay/runs/{id}/.")
    target = RevisionLabelSerializer(source="revision")
    backend = serializers.CharField(source="backend.name")
    sample_set = serializers.CharField(help_text="name@version")


class RollbackEventSerializer(serializers.ModelSerializer):
    service = _slug("slug")
    from_revision = RevisionLabelSerializer(read_only=True, allow_null=True)
    to_revision = RevisionLabelSerializer(read_only=True)
    recorded_by = _slug("username", null=True)
    duration_seconds = serializers.SerializerMethodField()

    class Meta:
        model = RollbackEvent
        fields = [
            "id",
            "service",
            "release",
            "from_revision",
            "to_revision",
            "kind",
            "reason",
            "symptom",
            "recorded_by",
            "started_at",
            "finished_at",
            "duration_seconds",
            "expected_minutes",
            "state",
            "verification_run",
            "outcome_note",
            "prefix_cache",
            "response_cache",
        ]

    def get_duration_seconds(self, rollback: RollbackEvent) -> float | None:
        return round(rollback.duration.total_seconds(), 3) if rollback.duration else None


def rollout_shape(release: Release, rollout: Any) -> dict[str, Any]:
    """`RolloutSerializer`'s input from `releases.governance.queries.rollout.rollout_of`."""
    if rollout is None:
        return {
            "state": release.state,
            "traffic_pct": 0.0,
            "current_stage": None,
            "breached": False,
            "held": False,
            "earliest_full_at": None,
            "rollback_minutes": release.rollback_expected_minutes,
            "stages": [],
            "analysis": analysis_shape(stage_analyses(release, [])),
        }
    current = rollout.current
    stages = [view.stage for view in rollout.stages]
    counts = {view.stage.pk: view.counts for view in rollout.stages}
    return {
        "state": release.state,
        "traffic_pct": rollout.traffic_pct,
        "current_stage": current.stage.number if current else None,
        "breached": rollout.breached,
        "held": rollout.held,
        "earliest_full_at": rollout.earliest_full_at,
        "rollback_minutes": rollout.rollback_minutes,
        "stages": StageSerializer(stages, many=True, context={"counts": counts}).data,
        "analysis": analysis_shape(stage_analyses(release, stages)),
    }
