"""Does it still behave: backends, versioned sample sets, replay runs and their results."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

from ledger.engines import Engine
from lib.choices import ChoiceLabels
from lib.promql import Matcher, MatcherError, parse_matchers, quoted


def validate_metrics_matcher(value: str) -> None:
    try:
        parse_matchers(value)
    except MatcherError as error:
        raise ValidationError(
            _('%(problem)s (a PromQL matcher list, e.g. {model_name="kb-live"}).')
            % {"problem": error}
        ) from error


class Backend(ChoiceLabels, models.Model):
    """An OpenAI-compatible endpoint serving one registered revision."""

    name = models.SlugField(
        max_length=100, unique=True, help_text=_("e.g. kb-assistant-vllm-canary")
    )
    revision = models.ForeignKey(
        "ledger.Revision", on_delete=models.PROTECT, related_name="backends"
    )
    base_url = models.URLField(
        help_text=_("Root of the OpenAI-compatible API, without /v1, e.g. http://10.0.0.5:8000")
    )
    model_name = models.CharField(
        max_length=200, help_text=_("The `model` the server expects in requests.")
    )
    engine = models.CharField(max_length=32, choices=Engine.choices, default=Engine.VLLM)
    credential_env = models.CharField(
        _("credential variable"),
        max_length=100,
        blank=True,
        help_text=_(
            "Name of the environment variable holding the API key on the workers "
            "(the key itself is never stored here), e.g. LEDGER_BACKEND_KEY_KB_ASSISTANT."
        ),
    )
    concurrency_limit = models.PositiveSmallIntegerField(
        default=8, validators=[MinValueValidator(1), MaxValueValidator(512)]
    )
    connect_timeout_s = models.FloatField(default=5, validators=[MinValueValidator(0.1)])
    first_token_timeout_s = models.FloatField(default=30, validators=[MinValueValidator(0.1)])
    idle_timeout_s = models.FloatField(default=30, validators=[MinValueValidator(0.1)])
    total_timeout_s = models.FloatField(default=300, validators=[MinValueValidator(1)])
    enabled = models.BooleanField(
        default=True, help_text=_("Replay probes it, replays against it and verifies with it.")
    )
    routed = models.BooleanField(
        _("routed by the gateway"),
        default=True,
        help_text=_(
            "The gateway sends it its share of its revision's traffic (the rendered LiteLLM "
            "config lists it). Untick to take it out of the gateway, e.g. to drain it."
        ),
    )
    metrics_matcher = models.CharField(
        _("Prometheus matcher"),
        max_length=500,
        blank=True,
        validators=[validate_metrics_matcher],
        help_text=_(
            "The label matchers that select this backend's series in Prometheus, e.g. "
            '{model_name="kb-live"} or {job="vllm", instance="10.0.0.5:8000"}. Empty: '
            '{model_name="<its model name>"}, as vLLM and SGLang label their metrics. A gray '
            "stage's analysis measures the candidate and the baseline with it."
        ),
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    # What a person states about a backend: the form, the API, the verbs and the
    # declarative file read this list.
    STATED_FIELDS = (
        "name",
        "revision",
        "base_url",
        "model_name",
        "engine",
        "credential_env",
        "concurrency_limit",
        "connect_timeout_s",
        "first_token_timeout_s",
        "idle_timeout_s",
        "total_timeout_s",
        "enabled",
        "routed",
        "metrics_matcher",
    )

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=Q(concurrency_limit__gte=1, concurrency_limit__lte=512),
                name="replay_backend_concurrency_range",
            ),
            models.CheckConstraint(
                condition=Q(credential_env="") | Q(credential_env__regex=r"^[A-Z_][A-Z0-9_]*$"),
                name="replay_backend_credential_env_name",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def matchers(self) -> list[Matcher]:
        """What selects its series in Prometheus (the stated matcher, or its model name)."""
        if self.metrics_matcher:
            return parse_matchers(self.metrics_matcher)
        return [Matcher("model_name", "=", quoted(self.model_name))]


class Probe(models.Model):
    """What a backend reported about itself, and how that compares with its revision."""

    backend = models.ForeignKey(Backend, on_delete=models.CASCADE, related_name="probes")
    fingerprint = models.CharField(max_length=71)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    reachable = models.BooleanField(default=False)
    served_models = models.JSONField(default=list, blank=True)
    max_context = models.PositiveIntegerField(null=True, blank=True)
    engine_version = models.CharField(max_length=80, blank=True)
    drift = models.JSONField(
        default=list, blank=True, help_text=_("Each disagreement: what, registered, reported.")
    )
    capability_results = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-started_at"]
        indexes = [
            # Backend page and drift flags: the latest probe of a backend.
            models.Index(fields=["backend", "-started_at"], name="replay_probe_latest_idx"),
        ]

    def __str__(self) -> str:
        return f"probe of {self.backend} at {self.started_at:%Y-%m-%d %H:%M}"


class SampleSet(models.Model):
    """One version of a named set of samples; a change makes a new version."""

    name = models.SlugField(max_length=100)
    version = models.PositiveIntegerField()
    description = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name", "-version"]
        constraints = [
            models.UniqueConstraint(
                fields=["name", "version"], name="replay_sampleset_name_version_unique"
            ),
            models.CheckConstraint(
                condition=Q(version__gte=1), name="replay_sampleset_version_positive"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name}@{self.version}"


class Sample(ChoiceLabels, models.Model):
    class Category(models.TextChoices):
        SHORT_QA = "short_qa", pgettext_lazy("sample category", "Short Q&A")
        LONG_CONTEXT = "long_context", pgettext_lazy("sample category", "Long context")
        STRUCTURED_JSON = "structured_json", pgettext_lazy("sample category", "Structured JSON")
        TOOL_CALL = "tool_call", pgettext_lazy("sample category", "Tool-call arguments")
        REFUSAL = "refusal", pgettext_lazy("sample category", "Refusal")
        LONG_STREAM = "long_stream", pgettext_lazy("sample category", "Long streamed report")
        CONCURRENCY_BURST = (
            "concurrency_burst",
            pgettext_lazy("sample category", "Concurrency burst"),
        )

    sample_set = models.ForeignKey(SampleSet, on_delete=models.CASCADE, related_name="samples")
    key = models.SlugField(max_length=100, help_text=_("Stable id of the sample within its set."))
    category = models.CharField(max_length=20, choices=Category.choices)
    messages = models.JSONField(help_text=_("OpenAI chat messages."))
    params = models.JSONField(
        default=dict, blank=True, help_text=_("Generation parameters, response_format, tools…")
    )
    checks = models.JSONField(default=list, blank=True)
    tags = models.JSONField(default=list, blank=True)
    rerunnable = models.BooleanField(
        default=True,
        help_text=_(
            "False for requests with side effects: never sent as recorded; with recorded "
            "tool results only the model turn is sent."
        ),
    )
    # Of a not re-runnable sample: what its tools answered, recorded (tool_call_id, name,
    # content), so that replay sends only the model turn after them (replay.modelturn).
    tool_results = models.JSONField(default=list, blank=True)
    sensitive = models.BooleanField(
        default=False,
        help_text=_("Outputs are stored redacted: hash, length and check results only."),
    )
    repeat = models.PositiveSmallIntegerField(
        default=1, validators=[MinValueValidator(1), MaxValueValidator(50)]
    )
    min_pass_rate = models.FloatField(
        default=1.0,
        validators=[MinValueValidator(0), MaxValueValidator(1)],
        help_text=_("Flakiness budget: the share of repeats that must pass."),
    )

    class Meta:
        ordering = ["sample_set", "key"]
        constraints = [
            models.UniqueConstraint(fields=["sample_set", "key"], name="replay_sample_key_unique"),
            models.CheckConstraint(
                condition=Q(repeat__gte=1), name="replay_sample_repeat_positive"
            ),
            models.CheckConstraint(
                condition=Q(min_pass_rate__gte=0, min_pass_rate__lte=1),
                name="replay_sample_pass_rate_range",
            ),
            # A re-runnable sample is sent whole: recorded results would be ignored.
            models.CheckConstraint(
                condition=Q(rerunnable=False) | Q(tool_results=[]),
                name="replay_sample_tool_results_not_rerunnable",
            ),
        ]

    def __str__(self) -> str:
        return self.key

    @property
    def replay_mode(self) -> str:
        """How a run replays it: whole, its model turn after the recorded tool results, or not."""
        if self.rerunnable:
            return Result.Mode.RERUN
        return Result.Mode.MODEL_TURN if self.tool_results else Result.Mode.SKIPPED

    def get_replay_mode_display(self) -> str:
        return str(Result.Mode(self.replay_mode).label)


class RunQuerySet(models.QuerySet):
    def latest_verdict(self, sample_set_name: str, revision) -> Run | None:
        """The latest finished run of a set (any version) on a revision: what gates read."""
        return (
            self.filter(
                sample_set__name=sample_set_name, revision=revision, state=Run.State.FINISHED
            )
            .order_by("-finished_at")
            .first()
        )


class Run(ChoiceLabels, models.Model):
    class State(models.TextChoices):
        QUEUED = "queued", pgettext_lazy("run state", "Queued")
        RUNNING = "running", pgettext_lazy("run state", "Running")
        FINISHED = "finished", pgettext_lazy("run state", "Finished")
        INTERRUPTED = "interrupted", pgettext_lazy("run state", "Interrupted")
        FAILED = "failed", pgettext_lazy("run state", "Failed")

    class Verdict(models.TextChoices):
        PENDING = "pending", pgettext_lazy("verdict", "Pending")
        PASSED = "passed", pgettext_lazy("verdict", "Passed")
        FAILED = "failed", pgettext_lazy("verdict", "Failed")
        REGRESSED = "regressed", pgettext_lazy("verdict", "Regressed")
        # Not a verdict on the model: no attempt reached the backend.
        ERRORED = "errored", pgettext_lazy("verdict", "Errored (backend unreachable)")

    class Trigger(models.TextChoices):
        MANUAL = "manual", pgettext_lazy("run trigger", "Manual")
        SCHEDULE = "schedule", pgettext_lazy("run trigger", "Schedule")
        VERIFICATION = "verification", pgettext_lazy("run trigger", "Rollback-target verification")
        COMMAND = "command", pgettext_lazy("run trigger", "Command line")

    sample_set = models.ForeignKey(SampleSet, on_delete=models.PROTECT, related_name="runs")
    backend = models.ForeignKey(Backend, on_delete=models.PROTECT, related_name="runs")
    revision = models.ForeignKey(
        "ledger.Revision", on_delete=models.PROTECT, related_name="replay_runs"
    )
    fingerprint = models.CharField(
        max_length=71, help_text=_("The revision's fingerprint when the run started.")
    )
    trigger = models.CharField(max_length=12, choices=Trigger.choices, default=Trigger.MANUAL)
    state = models.CharField(max_length=12, choices=State.choices, default=State.QUEUED)
    verdict = models.CharField(max_length=10, choices=Verdict.choices, default=Verdict.PENDING)
    concurrency = models.PositiveSmallIntegerField(null=True, blank=True)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(
        null=True, blank=True, help_text=_("Last sign of life from the worker.")
    )
    finished_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    summary = models.JSONField(
        default=dict, blank=True, help_text=_("Pass rate, latency percentiles, error codes.")
    )
    baseline = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    comparison = models.JSONField(
        default=dict, blank=True, help_text=_("Deltas against the baseline.")
    )

    objects = RunQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            # "Latest verdict of set S on revision R" (gates, incident screen).
            models.Index(
                fields=["revision", "state", "-finished_at"], name="replay_run_verdict_idx"
            ),
            # The reaper: running runs whose heartbeat is old.
            models.Index(fields=["state", "heartbeat_at"], name="replay_run_reaper_idx"),
        ]

    def __str__(self) -> str:
        return f"run {self.pk} {self.sample_set} on {self.backend}"


class Result(ChoiceLabels, models.Model):
    """One attempt of one sample in one run; unique so a resumed run never duplicates."""

    class Outcome(models.TextChoices):
        PASSED = "passed", pgettext_lazy("sample outcome", "Passed")
        FAILED = "failed", pgettext_lazy("sample outcome", "Failed")
        ERROR = "error", pgettext_lazy("sample outcome", "Error")
        SKIPPED = "skipped", pgettext_lazy("sample outcome", "Skipped (not re-runnable)")

    class Mode(models.TextChoices):
        """What was sent of the sample (``Sample.replay_mode``)."""

        RERUN = "rerun", pgettext_lazy("replay mode", "Re-run")
        MODEL_TURN = "model_turn", pgettext_lazy("replay mode", "Model turn only")
        SKIPPED = "skipped", pgettext_lazy("sample outcome", "Skipped (not re-runnable)")

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="results")
    sample = models.ForeignKey(Sample, on_delete=models.PROTECT, related_name="results")
    attempt = models.PositiveSmallIntegerField(default=1)
    outcome = models.CharField(max_length=8, choices=Outcome.choices)
    mode = models.CharField(max_length=10, choices=Mode.choices, default=Mode.RERUN)
    error_code = models.CharField(max_length=40, blank=True)
    error_detail = models.TextField(blank=True)
    ttft_ms = models.FloatField(null=True, blank=True)
    tpot_ms = models.FloatField(null=True, blank=True)
    e2e_ms = models.FloatField(null=True, blank=True)
    server_ttft_ms = models.FloatField(
        null=True,
        blank=True,
        help_text=_(
            "The server's own TTFT, when it reports one (vLLM metrics, llama.cpp timings)."
        ),
    )
    server_timing = models.JSONField(
        default=dict, blank=True, help_text=_("The timing object the server sent, as it sent it.")
    )
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    output_tokens = models.PositiveIntegerField(null=True, blank=True)
    finish_reason = models.CharField(max_length=40, blank=True)
    failed_checks = models.JSONField(default=list, blank=True)
    output = models.TextField(blank=True, help_text=_("Empty for sensitive samples."))
    output_sha256 = models.CharField(max_length=64, blank=True)
    output_length = models.PositiveIntegerField(default=0)
    redacted = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "sample__key", "attempt"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "sample", "attempt"], name="replay_result_once_per_attempt"
            ),
            models.CheckConstraint(
                condition=Q(attempt__gte=1), name="replay_result_attempt_positive"
            ),
            models.CheckConstraint(
                condition=~Q(redacted=True) | Q(output=""),
                name="replay_result_redacted_has_no_output",
            ),
            models.CheckConstraint(
                condition=Q(outcome="skipped", mode="skipped")
                | (~Q(outcome="skipped") & ~Q(mode="skipped")),
                name="replay_result_skipped_is_not_sent",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.sample} #{self.attempt}: {self.outcome}"


class Schedule(ChoiceLabels, models.Model):
    """A sample set, a backend and a crontab, kept in django-celery-beat's database scheduler."""

    class Purpose(models.TextChoices):
        REGULAR = "regular", pgettext_lazy("schedule purpose", "Regular replay")
        ROLLBACK_VERIFICATION = (
            "rollback_verification",
            pgettext_lazy("schedule purpose", "Rollback-target verification"),
        )

    sample_set_name = models.SlugField(
        max_length=100, help_text=_("Runs use the latest version of this set.")
    )
    backend = models.ForeignKey(Backend, on_delete=models.CASCADE, related_name="schedules")
    purpose = models.CharField(max_length=24, choices=Purpose.choices, default=Purpose.REGULAR)
    periodic_task = models.OneToOneField(
        "django_celery_beat.PeriodicTask", on_delete=models.CASCADE, related_name="replay_schedule"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["backend", "sample_set_name"]
        constraints = [
            models.UniqueConstraint(
                fields=["backend", "sample_set_name", "purpose"], name="replay_schedule_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.sample_set_name} on {self.backend}"


class MetricsScrape(models.Model):
    """The scrape of a backend's Prometheus endpoint that opens the day being counted.

    One per backend: the first scrape of a day (UTC) is kept until the first
    scrape of the next day, which closes the window; the day's run summary is
    the difference between the two (replay.services.metrics).
    """

    backend = models.OneToOneField(
        Backend, on_delete=models.CASCADE, primary_key=True, related_name="metrics_scrape"
    )
    taken_at = models.DateTimeField()
    engine = models.CharField(max_length=16, help_text=_("Whose metric names the text has."))
    text = models.TextField(help_text=_("The exposition text as the endpoint answered it."))

    def __str__(self) -> str:
        return f"metrics of {self.backend} at {self.taken_at:%Y-%m-%d %H:%M}"
