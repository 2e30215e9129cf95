"""Forms of the registry objects: they shape and check input; the verbs in
`ledger.services` write it."""

from __future__ import annotations

from typing import Any, cast

from django import forms
from django.core.exceptions import ValidationError
from django.core.validators import validate_slug
from django.db.models import QuerySet
from django.db.models.fields import BLANK_CHOICE_DASH
from django.utils.text import format_lazy
from django.utils.translation import gettext, pgettext_lazy
from django.utils.translation import gettext_lazy as _

from ledger import permissions, services
from ledger.engines import Engine, check_launch_parameters
from ledger.models import (
    Capability,
    License,
    ModelAsset,
    Revision,
    Runtime,
    Service,
    Team,
)
from ledger.validators import (
    parse_image,
    unpinned_image_message,
    validate_json_object,
    validate_name_token,
)
from lib.forms import CommaListField, InlineValidationMixin, JSONField, PrettyJSONField

# ---------------------------------------------------------------- services


class ServiceForm(InlineValidationMixin, forms.ModelForm):
    task_types = CommaListField(
        label=_("Task types"),
        item_validator=validate_slug,
        help_text=_(
            "The kinds of work it does for its tenants, separated by commas: chat, rag, sql."
        ),
    )
    tenants = CommaListField(
        label=_("Tenants"),
        help_text=_("The business tenants it serves, separated by commas: support, sales."),
    )

    class Meta:
        model = Service
        fields = list(Service.STATED_FIELDS)
        labels = {
            "slug": _("Slug"),
            "name": _("Name"),
            "description": _("Description"),
            "team": _("Team"),
            "tier": _("Tier"),
            "exposure": _("Exposure"),
            "review_cadence_days": _("Review cadence days"),
        }
        help_texts = {
            "name": _("A human name for it, e.g. Knowledge-base assistant."),
            "description": _("What it is for and who relies on it."),
            "team": _("The team whose model owners may change it."),
            "tier": _("Production requires images pinned by digest and approved licenses."),
            "exposure": _("Who sees its outputs; decides which licenses it may serve."),
            "slo_ttft_p95_ms": _("Time to first token, 95th percentile, in milliseconds."),
            "slo_ttft_p99_ms": _("Time to first token, 99th percentile; not below the p95."),
            "slo_tpot_ms": _("Time per output token, 95th percentile, in milliseconds."),
            "slo_error_rate_pct": _("Highest acceptable share of failed requests, 0 to 100."),
            "review_cadence_days": _("How often the service is reviewed, in days."),
        }
        widgets = {"description": forms.Textarea(attrs={"rows": 3})}

    def __init__(self, *args: Any, teams: QuerySet[Team], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        team = cast("forms.ModelChoiceField[Team]", self.fields["team"])
        team.queryset = teams
        team.empty_label = None
        if self.instance.pk:
            self.initial["task_types"] = [t.slug for t in self.instance.task_types.all()]
            # The gateway routes by the slug: renaming it would cut traffic.
            self.fields["slug"].disabled = True
            self.fields["slug"].help_text = gettext(
                "The gateway routes by this name, so it does not change."
            )


# ---------------------------------------------------------------- model assets


class LicenseChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, obj: License) -> str:
        kind = gettext(obj.get_kind_display()).lower()
        if obj.gated:
            return gettext("%(license)s (%(kind)s, gated)") % {"license": obj.spdx_id, "kind": kind}
        return f"{obj.spdx_id} ({kind})"


ASSET_FIELDS = [
    "name",
    "revision",
    "team",
    "family",
    "source_repository",
    "derived_from",
    "derivation",
    "quantization",
    "license",
    "weights_digest",
    "tokenizer_id",
    "tokenizer_digest",
    "chat_template_digest",
    "generation_config_digest",
    "config_digest",
    "model_card_url",
]
DIGEST_HELP = _("sha256: followed by 64 lowercase hexadecimal characters.")


class AssetForm(InlineValidationMixin, forms.ModelForm):
    license = LicenseChoiceField(
        queryset=License.objects.all(),
        label=_("License"),
        empty_label=_("Choose a license"),
        help_text=_(
            "Licenses security & compliance has registered. Ask them to add a missing one."
        ),
    )
    model_card_url = forms.URLField(
        label=_("Model card URL"),
        required=False,
        assume_scheme="https",
        help_text=_("Link to the model card, if there is one."),
    )

    class Meta:
        model = ModelAsset
        fields = ASSET_FIELDS
        labels = {
            "name": _("Name"),
            "revision": _("Revision"),
            "team": _("Team"),
            "family": _("Family"),
            "source_repository": _("Source repository"),
            "derived_from": _("Derived from"),
            "derivation": _("Derivation"),
            "quantization": _("Quantization"),
            "weights_digest": _("Weights digest"),
            "tokenizer_id": _("Tokenizer id"),
            "tokenizer_digest": _("Tokenizer digest"),
            "chat_template_digest": _("Chat template digest"),
            "generation_config_digest": _("Generation config digest"),
            "config_digest": _("Config digest"),
        }
        help_texts = {
            "team": _("The team whose model owners may change it."),
            "derived_from": _(
                "The asset it was quantized, merged or fine-tuned from; empty for a base model."
            ),
            "derivation": _("How it was made from the asset it derives from."),
            "quantization": _("The numeric format of the weights as served."),
            "weights_digest": format_lazy("{} {}", _("Digest of the weights files."), DIGEST_HELP),
            "tokenizer_id": _("Where the tokenizer comes from, if not the source repository."),
            "tokenizer_digest": format_lazy(
                "{} {}", _("Digest of the tokenizer files."), DIGEST_HELP
            ),
            "chat_template_digest": format_lazy(
                "{} {}",
                _(
                    "Digest of the chat template actually used; a derived "
                    "repository may change it silently."
                ),
                DIGEST_HELP,
            ),
            "generation_config_digest": format_lazy(
                "{} {}", _("Digest of generation_config.json."), DIGEST_HELP
            ),
            "config_digest": format_lazy("{} {}", _("Digest of config.json."), DIGEST_HELP),
        }

    def __init__(
        self, *args: Any, teams: QuerySet[Team], locked: bool = False, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        if locked:
            # A frozen asset keeps its content; only governance fields may change.
            mutable = services.MUTABLE_WHEN_LOCKED[ModelAsset]
            for name in list(self.fields):
                if name not in mutable:
                    del self.fields[name]
            return
        team = cast("forms.ModelChoiceField[Team]", self.fields["team"])
        team.queryset = teams
        team.empty_label = None
        parents = ModelAsset.objects.usable()
        if self.instance.pk:
            parents = parents.exclude(pk=self.instance.pk)
        derived_from = cast("forms.ModelChoiceField[ModelAsset]", self.fields["derived_from"])
        derived_from.queryset = parents
        derived_from.empty_label = gettext("None: a base model")


class LifecycleForm(forms.Form):
    on = forms.DateField(
        label=_("Effective date"),
        required=False,
        widget=forms.DateInput(attrs={"type": "date"}),
        help_text=_("Leave empty for today."),
    )


# ---------------------------------------------------------------- runtimes


class RuntimeForm(InlineValidationMixin, forms.ModelForm):
    launch_parameters = PrettyJSONField(
        label=_("Launch parameters"),
        required=False,
        help_text=_(
            'Engine flags as a JSON object, e.g. {"max_model_len": 32768, '
            '"tensor_parallel_size": 2}. Known flags of the engine are checked.'
        ),
        widget=forms.Textarea(attrs={"rows": 6, "spellcheck": "false"}),
    )

    class Meta:
        model = Runtime
        fields = list(Runtime.STATED_FIELDS)
        labels = {
            "name": _("Name"),
            "team": _("Team"),
            "engine": _("Engine"),
            "engine_version": _("Engine version"),
            "image": _("Image"),
        }
        help_texts = {
            "name": _("A slug naming engine, version and hardware, e.g. vllm-0-6-3-h100x2."),
            "team": _("The team whose model owners may change it."),
            "engine": _("The inference engine that serves the model."),
            "engine_version": _("The engine's release, e.g. 0.6.3."),
            "gpu_count": _("GPUs per replica."),
            "gpu_memory_gb": _("Memory of each GPU, in GB."),
            "cuda_version": _(
                "The CUDA runtime the image is built with, e.g. 12.4.1; leave empty if unknown."
            ),
            "driver_version": _(
                "The host's NVIDIA driver the runtime runs on, e.g. 550.54.15; leave empty "
                "if unknown."
            ),
        }
        widgets = {"image": forms.TextInput(attrs={"spellcheck": "false"})}

    def __init__(self, *args: Any, teams: QuerySet[Team], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        team = cast("forms.ModelChoiceField[Team]", self.fields["team"])
        team.queryset = teams
        team.empty_label = None
        # The engines' labels stay English where they are stored (gettext_noop in ledger.engines).
        engine = cast("forms.ChoiceField", self.fields["engine"])
        engine.choices = [*BLANK_CHOICE_DASH, *((v, gettext(label)) for v, label in Engine.choices)]
        if self.instance.pk:
            self.fields["name"].disabled = True
            self.fields["name"].help_text = gettext(
                "Revisions and people refer to it by this name."
            )

    def clean_launch_parameters(self) -> dict:
        value = self.cleaned_data.get("launch_parameters")
        if value is None:
            return {}
        validate_json_object(value)
        return value

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        image = cleaned.get("image")
        if image:
            try:
                if not parse_image(image).pinned:
                    self.warn(
                        "image",
                        unpinned_image_message(image) + " Production services refuse it.",
                    )
            except ValidationError:
                pass  # the model field's validator names the problem
        engine, parameters = cleaned.get("engine"), cleaned.get("launch_parameters")
        if not engine and parameters:
            self.warn("launch_parameters", "Choose the engine to have its flags checked.")
        if engine and isinstance(parameters, dict):
            check = check_launch_parameters(engine, parameters)
            for flag, problem in check.errors.items():
                self.add_error("launch_parameters", f"{flag}: {problem}" if flag else problem)
            for warning in check.warnings:
                self.warn("launch_parameters", warning)
        return cleaned


# ---------------------------------------------------------------- revisions and capabilities


class RuntimeChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, obj: Runtime) -> str:
        gpus = f"{obj.gpu_count} x {obj.gpu_model}" if obj.gpu_model else f"{obj.gpu_count} GPU"
        return gettext("%(runtime)s (%(engine)s %(version)s, %(gpus)s; team %(team)s)") % {
            "runtime": obj.name,
            "engine": gettext(obj.get_engine_display()),
            "version": obj.engine_version,
            "gpus": gpus,
            "team": obj.team.slug,
        }


class RevisionForm(InlineValidationMixin, forms.Form):
    model_asset = forms.ModelChoiceField(
        queryset=ModelAsset.objects.none(),
        label=_("Model asset"),
        help_text=_(
            "Active or deprecated assets of the service's team; retired ones cannot be used."
        ),
    )
    runtime = RuntimeChoiceField(
        queryset=Runtime.objects.none(),
        label=_("Runtime"),
        help_text=_(
            "Any runtime in the registry: its team maintains it, every service may use it."
        ),
    )
    context_limit = forms.IntegerField(
        label=_("Context limit"),
        min_value=1,
        help_text=_(
            "Largest prompt + output, in tokens; the runtime's context flag may not exceed it."
        ),
    )
    gateway_policy_version = forms.CharField(
        label=_("Gateway policy version"),
        max_length=40,
        validators=[validate_name_token],
        help_text=_("Version of the gateway routing/limits policy, e.g. gw-12."),
    )
    notes = forms.CharField(
        label=_("Notes"),
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text=_("Why this revision exists; what changed from the one before."),
    )
    based_on = forms.ModelChoiceField(
        queryset=Revision.objects.none(), required=False, widget=forms.HiddenInput
    )

    def __init__(
        self, *args: Any, service: Service, copy_of: Revision | None = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.service = service
        # Copies of the class's ModelChoiceFields; `self.fields` types them as plain Fields.
        model_asset = cast("forms.ModelChoiceField[ModelAsset]", self.fields["model_asset"])
        model_asset.queryset = permissions.assets_usable_by(service)
        runtime = cast("forms.ModelChoiceField[Runtime]", self.fields["runtime"])
        runtime.queryset = permissions.runtimes_usable_by(service).select_related("team")
        based_on = cast("forms.ModelChoiceField[Revision]", self.fields["based_on"])
        based_on.queryset = service.revisions.all()
        if copy_of is not None:
            self._explain_what_cannot_be_copied(copy_of)

    def _explain_what_cannot_be_copied(self, source: Revision) -> None:
        """A copy keeps every part of its source; a part that can no longer be offered
        is named with the reason, instead of an empty choice and "This field is required"."""
        if not permissions.assets_usable_by(self.service).filter(pk=source.model_asset_id).exists():
            why = permissions.asset_refusal(self.service, source.model_asset)
            self.warn(
                "model_asset",
                f"{source.label}'s model asset {source.model_asset} is not offered: "
                f"{why or 'it cannot be used here.'}",
            )
        if not permissions.runtimes_usable_by(self.service).filter(pk=source.runtime_id).exists():
            self.warn(
                "runtime",
                f"{source.label}'s runtime {source.runtime.name} is not offered; choose another.",
            )

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        asset, runtime = cleaned.get("model_asset"), cleaned.get("runtime")
        context_limit = cleaned.get("context_limit")
        if asset is None or runtime is None:
            return cleaned
        try:
            # The domain's revision check, run without writing so the form can say
            # "no" as the user types.
            services.check_revision(self.service, asset, runtime, context_limit)
        except ValidationError as error:
            for name, messages in error.message_dict.items():
                for message in messages:
                    self.add_error(name if name in self.fields else None, message)
        else:
            if runtime.image_digest is None:
                self.warn("runtime", unpinned_image_message(runtime.image))
        return cleaned


class CapabilityForm(InlineValidationMixin, forms.Form):
    kind = forms.ChoiceField(
        label=pgettext_lazy("capability kind", "Kind"),
        # The kinds' labels stay English where they are stored (gettext_noop in the model).
        choices=[(value, _(label)) for value, label in Capability.Kind.choices],
        help_text=_(
            "Declaring a kind again replaces its value; a changed value must be verified again."
        ),
    )
    value = JSONField(
        label=_("Value"),
        widget=forms.Textarea(attrs={"rows": 3, "spellcheck": "false"}),
        help_text=_('JSON; its shape depends on the kind: 32768, "sse", ["json_schema"], true.'),
    )

    def __init__(self, *args: Any, revision: Revision, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.revision = revision

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        if "kind" in cleaned and "value" in cleaned:
            try:
                services.validate_capability_value(
                    cleaned["kind"], cleaned["value"], context_limit=self.revision.context_limit
                )
            except ValidationError as error:
                for name, messages in error.message_dict.items():
                    self.add_error(name if name in self.fields else None, messages)
        return cleaned
