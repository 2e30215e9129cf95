"""The registry over REST.

Anyone signed in reads everything (auditors included), so querysets are not
narrowed per user. Writes call the `ledger.services` verbs with the caller as
actor: the domain validates, enforces who may change what, writes and
appends the Event in one transaction; `lib.api.DomainVerbMixin` translates
its refusals into HTTP.
"""

from __future__ import annotations

import hashlib
from typing import TypeAlias

from django.contrib.auth import get_user_model
from django.db.models import Prefetch
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_view,
)
from rest_framework import exceptions, mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.generics import RetrieveAPIView
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request
from rest_framework.response import Response

from ledger import locks, permissions, queries, services
from ledger.cyclonedx import revision_bom
from ledger.filters import (
    CapabilityFilter,
    LicenseFilter,
    ModelAssetFilter,
    RevisionFilter,
    RuntimeFilter,
    ServiceFilter,
    TeamFilter,
)
from ledger.models import (
    Capability,
    License,
    LicenseAcceptance,
    ModelAsset,
    Revision,
    Runtime,
    Service,
    Team,
)
from ledger.serializers import (
    CapabilitySerializer,
    LicenseAcceptanceCreateSerializer,
    LicenseAcceptanceSerializer,
    LicenseReviewSerializer,
    LicenseSerializer,
    LifecycleDateSerializer,
    ModelAssetDetailSerializer,
    ModelAssetSerializer,
    NewRevisionSerializer,
    RevisionDetailSerializer,
    RevisionDiffSerializer,
    RevisionSerializer,
    RuntimeDetailSerializer,
    RuntimeSerializer,
    ServiceDetailSerializer,
    ServiceSerializer,
    TeamSerializer,
    WhoAmISerializer,
)
from ledger.serializers.serving import ServingQuerySerializer, ServingSerializer
from lib.api import DomainVerbMixin
from lib.ids import row_id


@extend_schema(summary="The authenticated caller and the roles it holds")
class WhoAmIView(RetrieveAPIView):
    serializer_class = WhoAmISerializer

    def get_object(self):
        return self.request.user


# ---------------------------------------------------------------- request examples


def _example_digest(seed: str) -> str:
    return "sha256:" + hashlib.sha256(seed.encode()).hexdigest()


def _example(title: str, value: dict) -> list[OpenApiExample]:
    return [OpenApiExample(title, value=value, request_only=True)]


SERVICE_EXAMPLE = _example(
    "A service of kb-team",
    {
        "slug": "kb-assistant-eu",
        "name": "Knowledge-base assistant (EU)",
        "team": "kb-team",
        "tier": "internal",
        "task_types": ["chat", "rag"],
        "tenants": ["support-bot"],
        "slo_ttft_p95_ms": 800,
        "slo_ttft_p99_ms": 1500,
        "slo_tpot_ms": 60,
        "slo_error_rate_pct": "1.0",
        "slo_min_output_tokens_per_s": 400,
        "slo_min_concurrency": 16,
    },
)
ASSET_EXAMPLE = _example(
    "A base model under Apache-2.0",
    {
        "name": "Qwen2.5-7B-Instruct",
        "revision": "a09a3545",
        "team": "kb-team",
        "family": "qwen2.5",
        "source_repository": "Qwen/Qwen2.5-7B-Instruct",
        "license": "Apache-2.0",
        "quantization": "bf16",
        "derivation": "base",
        **{
            name: _example_digest(f"Qwen2.5-7B-Instruct {name}")
            for name in (
                "weights_digest",
                "tokenizer_digest",
                "chat_template_digest",
                "generation_config_digest",
                "config_digest",
            )
        },
    },
)
RUNTIME_EXAMPLE = _example(
    "vLLM on one H100",
    {
        "name": "vllm-0-6-3-h100x1",
        "team": "kb-team",
        "engine": "vllm",
        "engine_version": "0.6.3",
        "image": "vllm/vllm-openai:v0.6.3@" + _example_digest("vllm-openai:v0.6.3"),
        "launch_parameters": {"max_model_len": 32768, "gpu_memory_utilization": 0.9},
        "gpu_model": "H100-80GB",
        "gpu_count": 1,
        "gpu_memory_gb": 80,
        "cuda_version": "12.4.1",
        "driver_version": "550.54.15",
    },
)
LICENSE_EXAMPLE = _example("A well-known license", {"spdx_id": "MIT", "name": "MIT License"})


# ---------------------------------------------------------------- permissions and errors


# What RegistryViewSet's subclasses serve, each belonging to a team.
RegistryObject: TypeAlias = Service | ModelAsset | Runtime | Revision | Capability


def _team_of(obj: RegistryObject) -> Team:
    if isinstance(obj, Revision):
        return obj.service.team
    if isinstance(obj, Capability):
        return obj.revision.service.team
    return obj.team


class RegistryWritePermission(BasePermission):
    """Everyone signed in reads; only model owners write, and only their team's objects.

    The domain enforces the same rule (it has the last word); checking it here
    first answers 403 before a refused caller's payload is even validated.
    """

    message = "Only model owners of the object's team can change the registry; you can read it."

    def has_permission(self, request: Request, view) -> bool:
        if not request.user or not request.user.is_authenticated:
            return False
        return request.method in SAFE_METHODS or permissions.can_create(request.user)

    def has_object_permission(self, request: Request, view, obj: RegistryObject) -> bool:
        return request.method in SAFE_METHODS or permissions.can_edit_team_objects(
            request.user, _team_of(obj)
        )


class LicenseApproverPermission(BasePermission):
    """Security & compliance (and administrators) create licenses and review them."""

    message = "Only security & compliance can do this."

    def has_permission(self, request: Request, view) -> bool:
        if not request.user or not request.user.is_authenticated:
            return False
        return request.method in SAFE_METHODS or permissions.can_approve_licenses(request.user)


class LicenseAcceptancePermission(BasePermission):
    """Security & compliance, or model owners of the asset's team, record acceptances."""

    message = (
        "Only security & compliance or model owners of the asset's team can record "
        "accepting its license terms."
    )

    def has_permission(self, request: Request, view) -> bool:
        return bool(request.user and request.user.is_authenticated)

    def has_object_permission(self, request: Request, view, obj: ModelAsset) -> bool:
        return request.method in SAFE_METHODS or permissions.can_record_license_acceptance(
            request.user, obj
        )


class RegistryViewSet(
    DomainVerbMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    viewsets.GenericViewSet,
):
    """List, detail, create and PATCH; nothing in the registry is deleted over the API."""

    http_method_names = ["get", "post", "patch", "head", "options"]
    permission_classes = [RegistryWritePermission]
    detail_serializer_class: type | None = None

    def get_serializer_class(self):
        if self.action == "retrieve" and self.detail_serializer_class is not None:
            return self.detail_serializer_class
        return self.serializer_class

    def paginate_queryset(self, queryset):
        """A page's lock reasons in one ask per rule (`locks.reasons_for_many`), not per row."""
        page = super().paginate_queryset(queryset)
        rows = page if page is not None else None
        if rows and hasattr(rows[0], "lock_reasons"):
            for obj, reasons in zip(rows, locks.reasons_for_many(rows).values(), strict=True):
                obj._api_lock_reasons = reasons
        return page


# ---------------------------------------------------------------- teams and licenses


@extend_schema_view(
    list=extend_schema(summary="Teams, with their members' usernames"),
    retrieve=extend_schema(summary="One team"),
)
class TeamViewSet(viewsets.ReadOnlyModelViewSet):
    """Teams are managed by administrators (Django admin); read-only here."""

    queryset = Team.objects.prefetch_related(
        Prefetch("members", queryset=get_user_model().objects.order_by("username"))
    )
    serializer_class = TeamSerializer
    filterset_class = TeamFilter
    lookup_field = "slug"


@extend_schema_view(
    list=extend_schema(summary="Licenses the ledger classifies"),
    retrieve=extend_schema(summary="One license, by SPDX id"),
    create=extend_schema(
        summary="Classify a license (security & compliance)", examples=LICENSE_EXAMPLE
    ),
)
class LicenseViewSet(
    DomainVerbMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    viewsets.GenericViewSet,
):
    """Licenses by SPDX id. No verb edits a license yet, so there is no PATCH."""

    queryset = License.objects.all()
    serializer_class = LicenseSerializer
    filterset_class = LicenseFilter
    permission_classes = [LicenseApproverPermission]
    lookup_field = "spdx_id"
    # SPDX ids contain dots (Apache-2.0, LicenseRef-Llama-3.1-Community).
    lookup_value_regex = "[^/]+"

    def perform_create(self, serializer):
        serializer.instance = self.call_verb(services.create_license, **serializer.validated_data)


# ---------------------------------------------------------------- services


@extend_schema_view(
    list=extend_schema(summary="Service catalog"),
    retrieve=extend_schema(summary="One service: live revision and its license findings"),
    create=extend_schema(summary="Register a service", examples=SERVICE_EXAMPLE),
    partial_update=extend_schema(summary="Change a service"),
)
class ServiceViewSet(RegistryViewSet):
    """Governed inference services, by slug. The live revision changes only through releases."""

    serializer_class = ServiceSerializer
    detail_serializer_class = ServiceDetailSerializer
    filterset_class = ServiceFilter
    lookup_field = "slug"

    def get_queryset(self):
        if self.action == "serving":
            # Read from the events: the service row is only its id and slug.
            return Service.objects.all()
        queryset = Service.objects.for_catalog()
        if self.action != "list":
            # Detail shows license findings of the live revision.
            queryset = queryset.select_related("live_revision__model_asset__license")
        return queryset

    def filter_queryset(self, queryset):
        # The catalog's filters narrow the list; `serving` reads one service by its slug
        # (and its `at` is no catalog filter).
        if self.action == "serving":
            return queryset
        return super().filter_queryset(queryset)

    def perform_create(self, serializer):
        serializer.instance = self.call_verb(services.create_service, **serializer.validated_data)

    def perform_update(self, serializer):
        self.call_verb(services.update_service, serializer.instance, **serializer.validated_data)

    @extend_schema(
        summary="What was serving at a moment: the live revision, since, until and what set "
        "it, and any rollout's candidate with its share",
        description="Read from the event chain (the `service.live_revision_changed` events), "
        "so it agrees with verify_ledger. Without `at`, what serves now.",
        parameters=[ServingQuerySerializer],
        responses={
            200: ServingSerializer,
            400: OpenApiResponse(description="`at` is not ISO 8601 or its offset is out of range."),
            404: OpenApiResponse(
                description="No such service, or nothing was live yet at that moment."
            ),
        },
    )
    @action(detail=True, methods=["get"], url_path="serving")
    def serving(self, request: Request, slug: str = "") -> Response:
        service = self.get_object()
        query = ServingQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        at = query.moment()
        interval = queries.serving_at(service, at)
        if interval is None:
            raise exceptions.NotFound(
                f"Nothing was live on {service.slug} at {at.isoformat()}: its first live "
                "revision was set later, or never."
            )
        shares = queries.shares_at(service, at)
        return Response(ServingSerializer(ServingSerializer.shape(interval, at, shares)).data)


# ---------------------------------------------------------------- model assets


@extend_schema_view(
    list=extend_schema(summary="Model assets"),
    retrieve=extend_schema(summary="One model asset, with its lineage and lock state"),
    create=extend_schema(summary="Register a model asset", examples=ASSET_EXAMPLE),
    partial_update=extend_schema(summary="Change a model asset that has not served"),
)
class ModelAssetViewSet(RegistryViewSet):
    """Model artifacts. Lifecycle and license approval change through their own actions."""

    queryset = ModelAsset.objects.select_related("team", "license")
    serializer_class = ModelAssetSerializer
    detail_serializer_class = ModelAssetDetailSerializer
    filterset_class = ModelAssetFilter
    # What each action reads from the request: the browsable API's form and the
    # schema show these fields only, not the whole asset.
    action_serializer_classes = {
        "license_review": LicenseReviewSerializer,
        "license_acceptance": LicenseAcceptanceCreateSerializer,
        "deprecate": LifecycleDateSerializer,
        "retire": LifecycleDateSerializer,
    }

    def get_queryset(self):
        queryset = super().get_queryset()
        if self.action == "retrieve":
            queryset = queryset.prefetch_related(
                Prefetch(
                    "license_acceptances",
                    queryset=LicenseAcceptance.objects.select_related("license", "recorded_by"),
                )
            )
        return queryset

    def get_serializer_class(self):
        return self.action_serializer_classes.get(self.action) or super().get_serializer_class()

    def perform_create(self, serializer):
        serializer.instance = self.call_verb(services.register_asset, **serializer.validated_data)

    def perform_update(self, serializer):
        self.call_verb(services.update_asset, serializer.instance, **serializer.validated_data)

    def _asset_response(self, asset: ModelAsset) -> Response:
        return Response(
            ModelAssetDetailSerializer(asset, context=self.get_serializer_context()).data
        )

    @extend_schema(
        summary="Approve or reject the license of an asset (security & compliance)",
        description="The decision and comment go into the event ledger "
        "(model_asset.license_reviewed). A rejection needs a comment. The same reviewer "
        "sending the same decision and comment again changes nothing.",
        request=LicenseReviewSerializer,
        responses={200: ModelAssetDetailSerializer},
    )
    @action(
        detail=True,
        methods=["post"],
        url_path="license-review",
        permission_classes=[LicenseApproverPermission],
    )
    def license_review(self, request: Request, pk: str | None = None) -> Response:
        asset = self.get_object()
        review = self.get_serializer(data=request.data)
        review.is_valid(raise_exception=True)
        self.call_verb(
            services.set_license_approval,
            asset,
            approval=review.validated_data["license_approval"],
            comment=review.validated_data["comment"],
        )
        return self._asset_response(asset)

    @extend_schema(
        summary="Record accepting the terms of the asset's gated license",
        description="Security & compliance, or a model owner of the asset's team, records "
        "who accepted which version of the terms and when (license.accepted in the event "
        "ledger). Refused for a license that is not gated, a time in the future, and an "
        "acceptance already recorded.",
        request=LicenseAcceptanceCreateSerializer,
        responses={201: LicenseAcceptanceSerializer},
    )
    @action(
        detail=True,
        methods=["post"],
        url_path="license-acceptances",
        permission_classes=[LicenseAcceptancePermission],
    )
    def license_acceptance(self, request: Request, pk: str | None = None) -> Response:
        asset = self.get_object()
        fields = self.get_serializer(data=request.data)
        fields.is_valid(raise_exception=True)
        acceptance = self.call_verb(
            services.record_license_acceptance, asset, **fields.validated_data
        )
        return Response(
            LicenseAcceptanceSerializer(acceptance, context=self.get_serializer_context()).data,
            status=status.HTTP_201_CREATED,
        )

    @extend_schema(
        summary="Mark an asset deprecated",
        request=LifecycleDateSerializer,
        responses=ModelAssetDetailSerializer,
    )
    @action(detail=True, methods=["post"])
    def deprecate(self, request: Request, pk: str | None = None) -> Response:
        asset = self.get_object()
        when = self.get_serializer(data=request.data)
        when.is_valid(raise_exception=True)
        self.call_verb(services.deprecate_asset, asset, on=when.validated_data.get("on"))
        return self._asset_response(asset)

    @extend_schema(
        summary="Retire an asset: no new revision may use it",
        request=LifecycleDateSerializer,
        responses=ModelAssetDetailSerializer,
    )
    @action(detail=True, methods=["post"])
    def retire(self, request: Request, pk: str | None = None) -> Response:
        asset = self.get_object()
        when = self.get_serializer(data=request.data)
        when.is_valid(raise_exception=True)
        self.call_verb(services.retire_asset, asset, on=when.validated_data.get("on"))
        return self._asset_response(asset)


# ---------------------------------------------------------------- runtimes


@extend_schema_view(
    list=extend_schema(summary="Runtimes: engine, image, launch parameters, hardware"),
    retrieve=extend_schema(summary="One runtime, by name, with its lock state"),
    create=extend_schema(summary="Register a runtime", examples=RUNTIME_EXAMPLE),
    partial_update=extend_schema(summary="Change a runtime that has not served"),
)
class RuntimeViewSet(RegistryViewSet):
    """Engine, container image and launch parameters, by name."""

    queryset = Runtime.objects.select_related("team")
    serializer_class = RuntimeSerializer
    detail_serializer_class = RuntimeDetailSerializer
    filterset_class = RuntimeFilter
    lookup_field = "name"

    def perform_create(self, serializer):
        serializer.instance = self.call_verb(services.create_runtime, **serializer.validated_data)

    def perform_update(self, serializer):
        self.call_verb(services.update_runtime, serializer.instance, **serializer.validated_data)


# ---------------------------------------------------------------- revisions


@extend_schema_view(
    list=extend_schema(summary="Revisions, with fingerprint and lock state"),
    retrieve=extend_schema(
        summary="One revision: fingerprint, lock state, same-fingerprint revisions, capabilities"
    ),
    create=extend_schema(summary="Make a revision of a service"),
    partial_update=extend_schema(
        summary="Change a revision that has not served (its notes may always change)"
    ),
)
class RevisionViewSet(RegistryViewSet):
    """What a service runs, exactly. Frozen once it has served: make a new revision instead."""

    serializer_class = RevisionSerializer
    detail_serializer_class = RevisionDetailSerializer
    filterset_class = RevisionFilter

    def get_queryset(self):
        queryset = Revision.objects.with_parts().select_related("service__team", "created_by")
        if self.action == "retrieve":
            queryset = queryset.prefetch_related(
                Prefetch("capabilities", queryset=Capability.objects.select_related("revision"))
            )
        return queryset

    def perform_create(self, serializer):
        fields = dict(serializer.validated_data)
        service = fields.pop("service")
        serializer.instance = self.call_verb(services.create_revision, service, **fields)

    def perform_update(self, serializer):
        self.call_verb(services.update_revision, serializer.instance, **serializer.validated_data)

    @extend_schema(
        summary="The revision as a CycloneDX 1.6 ML-BOM",
        description="The model asset as a machine-learning-model component (weights hash, "
        "license, derived-from lineage, tokenizer and chat template digests, a model card), "
        "the runtime image as a container pinned by digest, the engine as a framework.",
        responses={
            200: OpenApiResponse(
                response=OpenApiTypes.OBJECT, description="A CycloneDX 1.6 JSON document."
            ),
            404: OpenApiResponse(description="There is no such revision."),
        },
    )
    @action(detail=True, methods=["get"], url_path="cyclonedx")
    def cyclonedx(self, request: Request, pk: str | None = None) -> Response:
        revision = self.get_object()
        return Response(revision_bom(revision))

    @extend_schema(
        summary="New revision from this one, with the given parts replaced",
        request=NewRevisionSerializer,
        responses={201: RevisionSerializer},
    )
    @action(detail=True, methods=["post"], url_path="new-revision")
    def new_revision(self, request: Request, pk: str | None = None) -> Response:
        revision = self.get_object()
        overrides = NewRevisionSerializer(data=request.data)
        overrides.is_valid(raise_exception=True)
        successor = self.call_verb(services.new_revision_from, revision, **overrides.validated_data)
        data = RevisionSerializer(successor, context=self.get_serializer_context()).data
        return Response(data, status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="What changes going from this revision to another of the same service, "
        "breaking changes flagged and explained",
        description="Every field that differs (model asset, tokenizer, chat template, "
        "generation config, engine, image, each launch parameter, context limit, gateway "
        "policy, hardware, each declared capability), breaking changes first. The release "
        "page reads it candidate against live, the rollback target check live against the "
        "target.",
        parameters=[
            OpenApiParameter(
                "other_id",
                int,
                OpenApiParameter.PATH,
                description="The revision to compare with: the diff reads from {id} to {other_id}.",
            )
        ],
        responses={
            200: RevisionDiffSerializer,
            400: OpenApiResponse(
                description="The two revisions belong to different services: diffs compare "
                "revisions of one service (the error is keyed other_id)."
            ),
            404: OpenApiResponse(description="A revision does not exist; the detail names it."),
        },
    )
    @action(detail=True, methods=["get"], url_path=r"diff/(?P<other_id>[0-9]+)")
    def diff(self, request: Request, pk: str = "", other_id: str = "") -> Response:
        ids = [row_id(pk), row_id(other_id)]
        if None in ids:
            raise exceptions.NotFound(f"There is no revision {pk if ids[0] is None else other_id}.")
        found = {revision.pk: revision for revision in self.get_queryset().filter(pk__in=ids)}
        missing = [str(number) for number in dict.fromkeys(ids) if number not in found]
        if missing:
            raise exceptions.NotFound(
                f"There is no revision {missing[0]}."
                if len(missing) == 1
                else f"There are no revisions {' and '.join(missing)}."
            )
        revision, other = found[ids[0]], found[ids[1]]
        self.check_object_permissions(request, revision)
        if revision.service_id != other.service_id:
            raise exceptions.ValidationError(
                {
                    "other_id": [
                        f"Diffs compare revisions of one service: revision {revision.pk} "
                        f"is {revision}, revision {other.pk} is {other}."
                    ]
                }
            )
        changes = queries.revision_diff(revision, other)
        return Response(RevisionDiffSerializer({"changes": changes}).data)


# ---------------------------------------------------------------- capabilities


@extend_schema_view(
    list=extend_schema(summary="Capabilities revisions declare, and whether they were verified"),
    retrieve=extend_schema(summary="One capability"),
    create=extend_schema(
        summary="Declare a capability (declaring a kind again re-declares it and clears "
        "its verification)"
    ),
    partial_update=extend_schema(summary="Re-declare a capability's value"),
)
class CapabilityViewSet(RegistryViewSet):
    """What a revision declares it can do; verification is recorded by probes, not here."""

    queryset = Capability.objects.select_related("revision__service__team")
    serializer_class = CapabilitySerializer
    filterset_class = CapabilityFilter

    def perform_create(self, serializer):
        fields = serializer.validated_data
        serializer.instance = self.call_verb(
            services.declare_capability,
            fields["revision"],
            kind=fields["kind"],
            value=fields["value"],
        )

    def perform_update(self, serializer):
        capability = serializer.instance
        if "value" in serializer.validated_data:
            serializer.instance = self.call_verb(
                services.declare_capability,
                capability.revision,
                kind=capability.kind,
                value=serializer.validated_data["value"],
            )
