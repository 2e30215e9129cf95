"""What exists: services, the model assets and runtimes they run, revisions, capabilities."""

from __future__ import annotations

import pgtrigger
from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _
from django.utils.translation import gettext_noop

from ledger import locks
from ledger.engines import Engine
from ledger.validators import (
    validate_digest,
    validate_gpu_count,
    validate_gpu_memory,
    validate_image_reference,
    validate_name_token,
    validate_repository,
    validate_spdx_id,
    validate_version,
)
from lib.choices import ChoiceLabels


class Team(models.Model):
    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=120)
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, related_name="teams", blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class TaskType(models.Model):
    """A kind of work a service does for its tenants (chat, rag, sql, …)."""

    slug = models.SlugField(max_length=40, unique=True)
    name = models.CharField(max_length=80)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class ServiceQuerySet(models.QuerySet):
    def for_catalog(self) -> ServiceQuerySet:
        return self.select_related(
            "team",
            "live_revision__model_asset",
            "live_revision__runtime",
            "live_revision__gateway_policy",
        ).prefetch_related("task_types")


class Service(ChoiceLabels, models.Model):
    class Tier(models.TextChoices):
        EXPERIMENTAL = "experimental", _("Experimental")
        INTERNAL = "internal", _("Internal")
        PRODUCTION = "production", _("Production")

    class Exposure(models.TextChoices):
        INTERNAL = "internal", gettext_noop("Internal users only")
        EXTERNAL = "external", gettext_noop("External users")
        CUSTOMER_DATA = "customer_data", gettext_noop("Processes customer data")

    slug = models.SlugField(
        max_length=64,
        unique=True,
        help_text=_("Stable name used by the gateway, e.g. kb-assistant."),
    )
    name = models.CharField(max_length=120)
    description = models.TextField(blank=True)
    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="services")
    tier = models.CharField(max_length=16, choices=Tier.choices, default=Tier.INTERNAL)
    exposure = models.CharField(max_length=16, choices=Exposure.choices, default=Exposure.INTERNAL)
    task_types = models.ManyToManyField(TaskType, related_name="services", blank=True)
    tenants = models.JSONField(
        default=list, blank=True, help_text=_('Business tenants served, e.g. ["support", "sales"].')
    )
    slo_ttft_p95_ms = models.PositiveIntegerField(_("SLO p95 TTFT (ms)"), null=True, blank=True)
    slo_ttft_p99_ms = models.PositiveIntegerField(_("SLO p99 TTFT (ms)"), null=True, blank=True)
    slo_tpot_ms = models.PositiveIntegerField(_("SLO p95 TPOT (ms)"), null=True, blank=True)
    slo_error_rate_pct = models.DecimalField(
        _("SLO error rate (%)"),
        max_digits=5,
        decimal_places=2,
        null=True,
        blank=True,
        validators=[MinValueValidator(0), MaxValueValidator(100)],
    )
    # The performance boundary of table 6-2, beside the latency SLOs above.
    slo_min_output_tokens_per_s = models.PositiveIntegerField(
        _("SLO minimum throughput (output tokens/s)"),
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text=_(
            "Output tokens per second the service must sustain, judged against the output "
            "tokens/s a load-test report records for its first load level."
        ),
    )
    slo_min_concurrency = models.PositiveIntegerField(
        _("SLO minimum concurrency (requests)"),
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text=_(
            "Concurrent requests the service must carry within its latency SLOs, judged "
            "against the concurrency a load-test report ran its first load level at (the "
            "level its latencies come from); a report driven by request rate alone has none."
        ),
    )
    slo_timeout_rate_pct = models.DecimalField(
        _("SLO timeout rate (%)"),
        max_digits=5,
        decimal_places=2,
        null=True,
        blank=True,
        validators=[MinValueValidator(0), MaxValueValidator(100)],
        help_text=_(
            "Highest acceptable share of requests timing out, 0 to 100. Judged on the "
            "gateway's days of run evidence in the periodic review; no load-test importer "
            "records timeouts, so the SLO matrix shows it as not measured."
        ),
    )
    review_cadence_days = models.PositiveIntegerField(default=90, validators=[MinValueValidator(1)])
    live_revision = models.ForeignKey(
        "Revision", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = ServiceQuerySet.as_manager()

    # What a person states about a service, in the order forms and files show it: the
    # form, the API, the declarative file and the export all read this list.
    STATED_FIELDS = (
        "slug",
        "name",
        "description",
        "team",
        "tier",
        "exposure",
        "task_types",
        "tenants",
        "slo_ttft_p95_ms",
        "slo_ttft_p99_ms",
        "slo_tpot_ms",
        "slo_error_rate_pct",
        "slo_min_output_tokens_per_s",
        "slo_min_concurrency",
        "slo_timeout_rate_pct",
        "review_cadence_days",
    )
    SLO_FIELDS = (
        "slo_ttft_p95_ms",
        "slo_ttft_p99_ms",
        "slo_tpot_ms",
        "slo_error_rate_pct",
        "slo_min_output_tokens_per_s",
        "slo_min_concurrency",
        "slo_timeout_rate_pct",
    )

    class Meta:
        ordering = ["slug"]
        permissions = [
            ("set_live_revision", "Can point a service at a revision outside a release"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(tier__in=["experimental", "internal", "production"]),
                name="ledger_service_tier_valid",
            ),
            models.CheckConstraint(
                condition=Q(exposure__in=["internal", "external", "customer_data"]),
                name="ledger_service_exposure_valid",
            ),
            models.CheckConstraint(
                condition=Q(slo_error_rate_pct__isnull=True)
                | Q(slo_error_rate_pct__gte=0, slo_error_rate_pct__lte=100),
                name="ledger_service_error_rate_percent",
            ),
            models.CheckConstraint(
                condition=Q(slo_timeout_rate_pct__isnull=True)
                | Q(slo_timeout_rate_pct__gte=0, slo_timeout_rate_pct__lte=100),
                name="ledger_service_timeout_rate_percent",
            ),
            models.CheckConstraint(
                condition=Q(slo_min_output_tokens_per_s__isnull=True)
                | Q(slo_min_output_tokens_per_s__gte=1),
                name="ledger_service_min_throughput_positive",
            ),
            models.CheckConstraint(
                condition=Q(slo_min_concurrency__isnull=True) | Q(slo_min_concurrency__gte=1),
                name="ledger_service_min_concurrency_positive",
            ),
            models.CheckConstraint(
                condition=Q(slo_ttft_p95_ms__isnull=True)
                | Q(slo_ttft_p99_ms__isnull=True)
                | Q(slo_ttft_p99_ms__gte=models.F("slo_ttft_p95_ms")),
                name="ledger_service_ttft_p99_not_below_p95",
                violation_error_code="ttft_p99_below_p95",
                violation_error_message=(
                    "SLO p99 TTFT (ms) must be at least the SLO p95 TTFT (ms): give a p99 "
                    "equal to or above the p95 (e.g. p95 900, p99 1500), or leave one of them "
                    "empty."
                ),
            ),
            models.CheckConstraint(
                condition=Q(review_cadence_days__gte=1), name="ledger_service_cadence_positive"
            ),
        ]

    def __str__(self) -> str:
        return self.slug


class License(ChoiceLabels, models.Model):
    """A license as the ledger classifies it; identified by SPDX id or LicenseRef-…"""

    class Kind(models.TextChoices):
        PERMISSIVE = "permissive", gettext_noop("Permissive")
        COPYLEFT = "copyleft", gettext_noop("Copyleft")
        NON_COMMERCIAL = "non_commercial", gettext_noop("Non-commercial")
        ACCEPTABLE_USE = "acceptable_use", gettext_noop("Acceptable-use / custom terms")

    spdx_id = models.CharField(
        _("SPDX id"),
        max_length=100,
        unique=True,
        validators=[validate_spdx_id],
        help_text=_(
            "An SPDX identifier such as Apache-2.0, or LicenseRef-<name> for custom model licenses."
        ),
    )
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    gated = models.BooleanField(
        default=False,
        help_text=_(
            "Terms must be accepted (e.g. on the model hub) before the weights may be used."
        ),
    )
    terms_url = models.URLField(blank=True)

    class Meta:
        ordering = ["spdx_id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(
                    kind__in=["permissive", "copyleft", "non_commercial", "acceptable_use"]
                ),
                name="ledger_license_kind_valid",
            ),
        ]

    def __str__(self) -> str:
        return self.spdx_id


class ModelAssetQuerySet(models.QuerySet):
    def usable(self) -> ModelAssetQuerySet:
        return self.exclude(lifecycle=ModelAsset.Lifecycle.RETIRED)


class ModelAsset(ChoiceLabels, models.Model):
    class Quantization(models.TextChoices):
        FP32 = "fp32", _("FP32")
        BF16 = "bf16", _("BF16")
        FP16 = "fp16", _("FP16")
        FP8 = "fp8", _("FP8")
        INT8 = "int8", _("INT8")
        INT4_AWQ = "int4-awq", _("INT4 AWQ")
        INT4_GPTQ = "int4-gptq", _("INT4 GPTQ")
        GGUF_Q4_K_M = "gguf-q4_k_m", _("GGUF Q4_K_M")
        GGUF_Q5_K_M = "gguf-q5_k_m", _("GGUF Q5_K_M")
        GGUF_Q8_0 = "gguf-q8_0", _("GGUF Q8_0")

    class Derivation(models.TextChoices):
        BASE = "base", _("Base (not derived)")
        QUANTIZED = "quantized", _("Quantized")
        MERGED = "merged", _("Merged")
        FINE_TUNED = "fine_tuned", _("Fine-tuned")

    class LicenseApproval(models.TextChoices):
        PENDING = "pending", gettext_noop("Pending")
        APPROVED = "approved", gettext_noop("Approved")
        REJECTED = "rejected", gettext_noop("Rejected")

    class Lifecycle(models.TextChoices):
        ACTIVE = "active", _("Active")
        DEPRECATED = "deprecated", _("Deprecated")
        RETIRED = "retired", _("Retired")

    name = models.CharField(
        max_length=160,
        validators=[validate_name_token],
        help_text=_("e.g. Qwen2.5-7B-Instruct-AWQ"),
    )
    revision = models.CharField(
        max_length=80,
        validators=[validate_version],
        help_text=_("The artifact's own revision: a hub commit, tag or version."),
    )
    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="model_assets")
    family = models.CharField(
        max_length=80,
        validators=[validate_name_token],
        help_text=_("e.g. qwen2.5, llama-3.1, gemma-3"),
    )
    source_repository = models.CharField(
        max_length=300,
        validators=[validate_repository],
        help_text=_("Where the weights come from: a hub repo id or URL."),
    )
    weights_digest = models.CharField(max_length=71, validators=[validate_digest])
    license = models.ForeignKey(License, on_delete=models.PROTECT, related_name="model_assets")
    license_approval = models.CharField(
        max_length=10, choices=LicenseApproval.choices, default=LicenseApproval.PENDING
    )
    quantization = models.CharField(
        max_length=16, choices=Quantization.choices, default=Quantization.BF16
    )
    derived_from = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="derivatives"
    )
    derivation = models.CharField(
        max_length=12, choices=Derivation.choices, default=Derivation.BASE
    )
    tokenizer_id = models.CharField(max_length=300, blank=True, validators=[validate_repository])
    tokenizer_digest = models.CharField(max_length=71, validators=[validate_digest])
    chat_template_digest = models.CharField(
        max_length=71,
        validators=[validate_digest],
        help_text=_(
            "Digest of the chat template actually used; a derived repository may change it silently."
        ),
    )
    generation_config_digest = models.CharField(max_length=71, validators=[validate_digest])
    config_digest = models.CharField(
        max_length=71, validators=[validate_digest], help_text=_("Digest of config.json.")
    )
    model_card_url = models.URLField(blank=True)
    lifecycle = models.CharField(max_length=10, choices=Lifecycle.choices, default=Lifecycle.ACTIVE)
    deprecated_on = models.DateField(null=True, blank=True)
    retired_on = models.DateField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = ModelAssetQuerySet.as_manager()

    class Meta:
        ordering = ["name", "revision"]
        constraints = [
            models.UniqueConstraint(
                fields=["name", "revision"], name="ledger_modelasset_name_revision_unique"
            ),
            models.CheckConstraint(
                condition=Q(derivation="base", derived_from__isnull=True)
                | (~Q(derivation="base") & Q(derived_from__isnull=False)),
                name="ledger_modelasset_derivation_matches_parent",
                violation_error_code="derivation_mismatch",
                violation_error_message=(
                    "Derivation and Derived from must agree: a base model is derived from "
                    "nothing; a quantized, merged or fine-tuned one names the asset it was "
                    "derived from."
                ),
            ),
            models.CheckConstraint(
                condition=~Q(derived_from=models.F("id")),
                name="ledger_modelasset_not_derived_from_itself",
                violation_error_code="derived_from_itself",
                violation_error_message=(
                    "Derived from cannot be the asset itself: name the asset it was quantized, "
                    "merged or fine-tuned from, or make it a base model."
                ),
            ),
            models.CheckConstraint(
                condition=~Q(lifecycle="deprecated") | Q(deprecated_on__isnull=False),
                name="ledger_modelasset_deprecated_has_date",
            ),
            models.CheckConstraint(
                condition=~Q(lifecycle="retired") | Q(retired_on__isnull=False),
                name="ledger_modelasset_retired_has_date",
            ),
            models.CheckConstraint(
                condition=Q(weights_digest__regex=r"^sha256:[0-9a-f]{64}$"),
                name="ledger_modelasset_weights_digest_format",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name}@{self.revision}"

    def lineage(self) -> list[ModelAsset]:
        """This asset and its ancestors, base first (one query per generation; chains are short)."""
        chain = [self]
        seen = {self.pk}
        while chain[0].derived_from_id and chain[0].derived_from_id not in seen:
            parent = ModelAsset.objects.select_related("license").get(pk=chain[0].derived_from_id)
            seen.add(parent.pk)
            chain.insert(0, parent)
        return chain

    def lock_reasons(self) -> list[str]:
        return locks.reasons_for(self)


class Runtime(ChoiceLabels, models.Model):
    name = models.SlugField(max_length=100, unique=True, help_text=_("e.g. vllm-0-6-3-h100x2"))
    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="runtimes")
    engine = models.CharField(max_length=24, choices=Engine.choices)
    engine_version = models.CharField(
        max_length=40, validators=[validate_version], help_text=_("e.g. 0.6.3")
    )
    image = models.CharField(
        max_length=300,
        validators=[validate_image_reference],
        help_text=_("Container image, pinned by digest: registry/repo:tag@sha256:<64 hex>."),
    )
    launch_parameters = models.JSONField(
        default=dict,
        blank=True,
        help_text=_('Engine flags as a JSON object, e.g. {"max_model_len": 32768}.'),
    )
    gpu_model = models.CharField(
        _("GPU model"), max_length=60, blank=True, help_text=_("e.g. H100-80GB")
    )
    gpu_count = models.PositiveSmallIntegerField(
        _("GPU count"), default=1, validators=[validate_gpu_count]
    )
    gpu_memory_gb = models.PositiveIntegerField(
        _("GPU memory (GB each)"), null=True, blank=True, validators=[validate_gpu_memory]
    )
    cuda_version = models.CharField(
        _("CUDA version"),
        max_length=40,
        blank=True,
        validators=[validate_version],
        help_text=_("The CUDA runtime the image is built with, e.g. 12.4.1."),
    )
    driver_version = models.CharField(
        _("GPU driver version"),
        max_length=40,
        blank=True,
        validators=[validate_version],
        help_text=_("The host's NVIDIA driver the runtime was run on, e.g. 550.54.15."),
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    # What a person states about a runtime, in the order forms and files show it.
    STATED_FIELDS = (
        "name",
        "team",
        "engine",
        "engine_version",
        "image",
        "launch_parameters",
        "gpu_model",
        "gpu_count",
        "gpu_memory_gb",
        "cuda_version",
        "driver_version",
    )

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=Q(engine__in=[choice for choice, _ in Engine.choices]),
                name="ledger_runtime_engine_valid",
            ),
            models.CheckConstraint(
                condition=Q(gpu_count__gte=1),
                name="ledger_runtime_gpu_count_positive",
                violation_error_message="A runtime runs on at least 1 GPU per replica.",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def image_digest(self) -> str | None:
        digest = self.image.partition("@")[2]
        return digest or None

    def lock_reasons(self) -> list[str]:
        return locks.reasons_for(self)


class RevisionQuerySet(models.QuerySet):
    def with_parts(self) -> RevisionQuerySet:
        # The asset's license too: pages judge it (ledger.queries.license_problems).
        return self.select_related("service", "model_asset__license", "runtime", "gateway_policy")


class Revision(models.Model):
    """The unit released and rolled back to: what one service runs, exactly."""

    service = models.ForeignKey(Service, on_delete=models.PROTECT, related_name="revisions")
    number = models.PositiveIntegerField(help_text=_("Counts up per service: r1, r2, …"))
    model_asset = models.ForeignKey(ModelAsset, on_delete=models.PROTECT, related_name="revisions")
    runtime = models.ForeignKey(Runtime, on_delete=models.PROTECT, related_name="revisions")
    context_limit = models.PositiveIntegerField(
        help_text=_("Largest prompt + output, in tokens, this revision serves.")
    )
    gateway_policy = models.ForeignKey(
        "ledger.GatewayPolicy",
        on_delete=models.PROTECT,
        related_name="revisions",
        help_text=_("The version of the service's gateway policy this revision runs with."),
    )
    notes = models.TextField(blank=True)
    based_on = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="successors"
    )
    fingerprint = models.CharField(max_length=71, editable=False)
    served_at = models.DateTimeField(
        null=True, blank=True, editable=False, help_text=_("First time it went live.")
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = RevisionQuerySet.as_manager()

    class Meta:
        ordering = ["service", "-number"]
        constraints = [
            models.UniqueConstraint(
                fields=["service", "number"], name="ledger_revision_number_unique"
            ),
            models.CheckConstraint(
                condition=Q(number__gte=1), name="ledger_revision_number_positive"
            ),
            models.CheckConstraint(
                condition=Q(context_limit__gte=1),
                name="ledger_revision_context_positive",
                violation_error_code="context_limit_not_positive",
                violation_error_message=(
                    "Context limit must be at least 1 token: give the largest prompt + output "
                    "this revision serves, e.g. 32768."
                ),
            ),
        ]
        indexes = [
            # "Which other revisions are the same thing?" on every revision page.
            models.Index(fields=["fingerprint"], name="ledger_rev_fingerprint_idx"),
        ]
        triggers = [
            # What served is what a rollback goes back to: once a revision has been
            # live, the database itself refuses a change of its content (only its
            # notes may change), whoever writes around the domain verbs.
            pgtrigger.Protect(
                name="ledger_revision_served_is_frozen",
                operation=pgtrigger.Update,
                condition=pgtrigger.Condition(
                    "OLD.served_at IS NOT NULL AND ("
                    + " OR ".join(
                        f"OLD.{column} IS DISTINCT FROM NEW.{column}"
                        for column in (
                            "service_id",
                            "number",
                            "model_asset_id",
                            "runtime_id",
                            "context_limit",
                            "gateway_policy_id",
                            "fingerprint",
                            "served_at",
                        )
                    )
                    + ")"
                ),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.service.slug} r{self.number}"

    @property
    def label(self) -> str:
        return f"r{self.number}"

    @property
    def gateway_policy_version(self) -> str:
        """How the revision names its policy version (v2, or a name from before
        policies were versioned): what forms, the API and the registry file show."""
        return self.gateway_policy.label

    def lock_reasons(self) -> list[str]:
        return locks.reasons_for(self)


class Capability(ChoiceLabels, models.Model):
    """One thing a revision declares it can do, and whether that was verified."""

    class Kind(models.TextChoices):
        CONTEXT_LENGTH = "context_length", gettext_noop("Context length (tokens)")
        MAX_CONCURRENCY = "max_concurrency", gettext_noop("Max concurrency")
        RECOMMENDED_BATCH = "recommended_batch", gettext_noop("Recommended batch size")
        STREAMING = "streaming", gettext_noop("Streaming protocol")
        STRUCTURED_OUTPUT = "structured_output", gettext_noop("Structured output modes")
        TOOL_CALLING = "tool_calling", gettext_noop("Tool calling")
        TASK_TYPES = "task_types", gettext_noop("Verified task types")
        ERROR_CODES = "error_codes", gettext_noop("Error-code map")
        METRICS = "metrics", gettext_noop("Metrics exposed")
        ROLLBACK_METHOD = "rollback_method", gettext_noop("Rollback method")

    class Status(models.TextChoices):
        DECLARED = "declared", _("Declared")
        VERIFIED = "verified", _("Verified")
        FAILED = "failed", _("Failed")

    revision = models.ForeignKey(Revision, on_delete=models.CASCADE, related_name="capabilities")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    value = models.JSONField(help_text=_("What is declared; its shape depends on the kind."))
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.DECLARED)
    verified_fingerprint = models.CharField(max_length=71, blank=True)
    verified_at = models.DateTimeField(null=True, blank=True)
    evidence = models.JSONField(
        default=dict, blank=True, help_text=_("What was seen when it was verified or failed.")
    )

    class Meta:
        ordering = ["revision", "kind"]
        constraints = [
            models.UniqueConstraint(
                fields=["revision", "kind"], name="ledger_capability_kind_unique"
            ),
            models.CheckConstraint(
                condition=Q(status="declared") | Q(verified_at__isnull=False),
                name="ledger_capability_checked_has_time",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.revision} {self.kind}"


# Said by the forms and serializers that take them, too.
TERMS_VERSION_MAX_LENGTH = 80
ACCEPTED_BY_MAX_LENGTH = 150


class LicenseAcceptance(models.Model):
    """Who accepted which terms of a gated license, for which asset, and when."""

    model_asset = models.ForeignKey(
        ModelAsset, on_delete=models.PROTECT, related_name="license_acceptances"
    )
    license = models.ForeignKey(License, on_delete=models.PROTECT, related_name="acceptances")
    terms_version = models.CharField(
        max_length=TERMS_VERSION_MAX_LENGTH,
        help_text=_("The version or date of the terms accepted."),
    )
    accepted_by = models.CharField(
        max_length=ACCEPTED_BY_MAX_LENGTH,
        help_text=_("The person who accepted, on behalf of the company."),
    )
    accepted_at = models.DateTimeField()
    recorded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    note = models.TextField(blank=True)

    class Meta:
        ordering = ["-accepted_at"]
        constraints = [
            # Its index (model_asset, license, …) also answers "were this asset's license
            # terms accepted?" on every revision and service page.
            models.UniqueConstraint(
                fields=["model_asset", "license", "terms_version", "accepted_by"],
                name="ledger_licenseacceptance_once",
                violation_error_message=(
                    "This acceptance is already recorded: the same person accepting the same "
                    "terms version of this license for this asset."
                ),
            ),
            models.CheckConstraint(
                condition=~Q(terms_version=""), name="ledger_licenseacceptance_terms_version_given"
            ),
            models.CheckConstraint(
                condition=~Q(accepted_by=""), name="ledger_licenseacceptance_accepted_by_given"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.license} {self.terms_version} by {self.accepted_by}"
