"""Releases over REST, for CI automation: file a draft, fill it in, submit, sign, withdraw.

Anyone signed in reads every release; writes call `releases.governance.services` with the
caller as actor (`lib.api.DomainVerbMixin`). Filing answers 403 before the body is
validated when the caller may not file for the service it names, or for any. A transition the release's state
does not allow answers 409 with the reason; a submit with failing gates answers
422 listing them. Every answer that shows a release shows its waivers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from ledger.models import Service
from lib.api import DomainVerbMixin
from releases import permissions
from releases.governance import gates, services
from releases.governance.filters import ReleaseFilter
from releases.governance.queries.rollout import rollout_of
from releases.governance.serializers.releases import (
    CommentRequestSerializer,
    CommentSerializer,
    GatesRefusalSerializer,
    ReleaseDetailSerializer,
    ReleaseSerializer,
    ReleaseWriteSerializer,
    SignOffRequestSerializer,
    SignOffSerializer,
    TransitionRefusalSerializer,
    WaiverRequestSerializer,
    WaiverSerializer,
    WithdrawRequestSerializer,
)
from releases.governance.serializers.rollout import (
    CloseSerializer,
    ObservationRequestSerializer,
    ObservationSerializer,
    PromoteSerializer,
    ReasonSerializer,
    RolloutSerializer,
    StartSerializer,
    rollout_shape,
)
from releases.governance.services import GatesNotPassed, TransitionRefused
from releases.models import Observation, Release

CONFLICT = OpenApiResponse(
    TransitionRefusalSerializer,
    description="The release's state does not allow it; the detail names the state.",
)
GATES_FAILING = OpenApiResponse(
    GatesRefusalSerializer, description="Gates neither passed nor waived, listed."
)
DRAFT_EXAMPLE = [
    OpenApiExample(
        "A draft from CI",
        value={
            "service": "kb-assistant",
            "to_revision": 42,
            "change_kind": "model_upgrade",
            "summary": "Qwen2.5-7B-Instruct to the March fine-tune",
        },
        request_only=True,
    )
]


@extend_schema_view(
    list=extend_schema(summary="Releases, newest first (filter by service, state, tier, …)"),
    create=extend_schema(
        summary="File a draft release",
        examples=DRAFT_EXAMPLE,
        responses={201: ReleaseDetailSerializer},
    ),
    retrieve=extend_schema(
        summary="One release: the form, its state, every gate, the snapshot hash, sign-offs "
        "and waivers"
    ),
    partial_update=extend_schema(
        summary="Change the form (a change after submission voids the sign-offs it touches)",
        responses={200: ReleaseDetailSerializer, 409: CONFLICT},
    ),
)
class ReleaseViewSet(
    DomainVerbMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    viewsets.GenericViewSet,
):
    http_method_names = ["get", "post", "patch", "head", "options"]
    permission_classes = [IsAuthenticated]
    filterset_class = ReleaseFilter

    def get_queryset(self):
        queryset = Release.objects.select_related("service", "filed_by")
        return queryset.order_by("-created_at", "-id")

    def get_serializer_class(self):
        if self.action in ("create", "partial_update"):
            return ReleaseWriteSerializer
        if self.action == "retrieve":
            return ReleaseDetailSerializer
        return ReleaseSerializer

    def _detail(self, release: Release, code: int = status.HTTP_200_OK) -> Response:
        assessment = gates.assess(release)
        context = {**self.get_serializer_context(), "assessment": assessment}
        return Response(
            ReleaseDetailSerializer(assessment.release, context=context).data, status=code
        )

    def _verb(self, verb, *args: Any, **kwargs: Any) -> Any:
        """Call a verb; its state and gate refusals become 409 and 422."""
        try:
            return self.call_verb(verb, *args, **kwargs)
        except TransitionRefused as exc:
            raise _Refusal(
                Response(
                    {"detail": exc.message, "state": exc.state}, status=status.HTTP_409_CONFLICT
                )
            ) from exc
        except GatesNotPassed as exc:
            body = GatesRefusalSerializer({"detail": exc.message, "gates": exc.gates}).data
            raise _Refusal(Response(body, status=422)) from exc

    def handle_exception(self, exc: Exception) -> Response:
        if isinstance(exc, _Refusal):
            return exc.response
        return super().handle_exception(exc)

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return self._detail(self.get_object())

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        # Who may, before the body is validated: a refused caller learns nothing of its
        # faults. The verb asks again with the service the serializer resolves.
        self.call_verb(permissions.ensure_can_file_some)
        service = _named_service(request.data)
        if service is not None:
            self.call_verb(permissions.ensure_can_file, service=service)
        serializer = ReleaseWriteSerializer(
            data=request.data, context=self.get_serializer_context()
        )
        serializer.is_valid(raise_exception=True)
        release = self._verb(services.create_release, **serializer.validated_data)
        return self._detail(release, status.HTTP_201_CREATED)

    def partial_update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        release = self.get_object()
        serializer = ReleaseWriteSerializer(
            release, data=request.data, partial=True, context=self.get_serializer_context()
        )
        serializer.is_valid(raise_exception=True)
        self._verb(services.update_release, release, **serializer.validated_data)
        return self._detail(release)

    @extend_schema(
        summary="Submit: every gate but sign-offs must pass or be waived",
        request=None,
        responses={200: ReleaseDetailSerializer, 409: CONFLICT, 422: GATES_FAILING},
    )
    @action(detail=True, methods=["post"])
    def submit(self, request: Request, pk: str | None = None) -> Response:
        release = self.get_object()
        self._verb(services.submit_release, release)
        return self._detail(release)

    @extend_schema(
        summary="Sign off for a role (approve or reject), with the caller's own token",
        request=SignOffRequestSerializer,
        responses={201: SignOffSerializer, 409: CONFLICT},
    )
    @action(detail=True, methods=["post"])
    def signoffs(self, request: Request, pk: str | None = None) -> Response:
        release = self.get_object()
        given = SignOffRequestSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        signoff = self._verb(services.sign_off, release, **given.validated_data)
        return Response(SignOffSerializer(signoff).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="Withdraw a draft, submitted or approved release",
        request=WithdrawRequestSerializer,
        responses={200: ReleaseDetailSerializer, 409: CONFLICT},
    )
    @action(detail=True, methods=["post"])
    def withdraw(self, request: Request, pk: str | None = None) -> Response:
        release = self.get_object()
        given = WithdrawRequestSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        self._verb(services.withdraw_release, release, reason=given.validated_data["reason"])
        return self._detail(release)

    @extend_schema(
        summary="Reopen a rejected or withdrawn release as a new draft copy",
        request=None,
        responses={201: ReleaseDetailSerializer, 409: CONFLICT},
    )
    @action(detail=True, methods=["post"])
    def reopen(self, request: Request, pk: str | None = None) -> Response:
        copy = self._verb(services.reopen_release, self.get_object())
        return self._detail(copy, status.HTTP_201_CREATED)

    @extend_schema(
        summary="Waive a gate (security & compliance or platform): a reason and an expiry",
        request=WaiverRequestSerializer,
        responses={201: WaiverSerializer, 409: CONFLICT},
    )
    @action(detail=True, methods=["post"])
    def waivers(self, request: Request, pk: str | None = None) -> Response:
        release = self.get_object()
        given = WaiverRequestSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        waiver = self._verb(services.grant_waiver, release, **given.validated_data)
        return Response(WaiverSerializer(waiver).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="Comment on a release",
        request=CommentRequestSerializer,
        responses={201: CommentSerializer},
    )
    @action(detail=True, methods=["post"])
    def comments(self, request: Request, pk: str | None = None) -> Response:
        release = self.get_object()
        given = CommentRequestSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        comment = self._verb(services.add_comment, release, body=given.validated_data["body"])
        return Response(CommentSerializer(comment).data, status=status.HTTP_201_CREATED)

    # -- the rollout (platform, or the gateway's token: the promote permission)

    def _rollout(self, release: Release) -> Response:
        release.refresh_from_db(fields=["state"])
        return Response(rollout_shape(release, rollout_of(release)))

    @extend_schema(
        summary="The rollout: stages as planned and carried out, the current one's verdict, "
        "the earliest time at 100 % and how long a rollback takes",
        responses={200: RolloutSerializer, 404: OpenApiResponse(description="No such release.")},
    )
    @action(detail=True, methods=["get"])
    def rollout(self, request: Request, pk: str | None = None) -> Response:
        return self._rollout(self.get_object())

    @extend_schema(
        summary="Start the rollout: stage 1 of the gray plan carries traffic (before the "
        "planned start only with an early_reason)",
        request=StartSerializer,
        responses={200: RolloutSerializer, 409: CONFLICT, 422: GATES_FAILING},
    )
    @action(detail=True, methods=["post"])
    def start(self, request: Request, pk: str | None = None) -> Response:
        release = self.get_object()
        self.call_verb(
            permissions.ensure_can_start_rollout, release=release
        )  # who may, before the body
        given = StartSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        self._verb(
            services.start_rollout, release, early_reason=given.validated_data["early_reason"]
        )
        return self._rollout(release)

    @extend_schema(
        summary="Promote: the stage carrying traffic ends and the next starts; into 100 % the "
        "release is released and its revision live",
        request=PromoteSerializer,
        responses={200: RolloutSerializer, 409: CONFLICT},
    )
    @action(detail=True, methods=["post"])
    def promote(self, request: Request, pk: str | None = None) -> Response:
        release = self.get_object()
        self.call_verb(permissions.ensure_can_promote, release=release)  # who may, before the body
        given = PromoteSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        self._verb(services.promote_release, release, note=given.validated_data["note"])
        return self._rollout(release)

    @extend_schema(
        summary="End the observation window of the stage carrying traffic now, and promote it "
        "(platform SREs only; the reason is kept in the ledger)",
        request=ReasonSerializer,
        responses={200: RolloutSerializer, 409: CONFLICT},
    )
    @action(detail=True, methods=["post"], url_path="end-window")
    def end_window(self, request: Request, pk: str | None = None) -> Response:
        release = self.get_object()
        self.call_verb(
            permissions.ensure_can_end_observation_window, release=release
        )  # who may, before the body
        given = ReasonSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        self._verb(services.end_observation_window, release, reason=given.validated_data["reason"])
        return self._rollout(release)

    @extend_schema(
        summary="Hold the stage carrying traffic until a person promotes it",
        request=ReasonSerializer,
        responses={200: RolloutSerializer, 409: CONFLICT},
    )
    @action(detail=True, methods=["post"])
    def hold(self, request: Request, pk: str | None = None) -> Response:
        release = self.get_object()
        self.call_verb(permissions.ensure_can_hold, release=release)  # who may, before the body
        given = ReasonSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        self._verb(services.hold_release, release, reason=given.validated_data["reason"])
        return self._rollout(release)

    @extend_schema(
        summary="Abort the rollout: the candidate's traffic goes back to the live revision",
        request=ReasonSerializer,
        responses={200: RolloutSerializer, 409: CONFLICT},
    )
    @action(detail=True, methods=["post"])
    def abort(self, request: Request, pk: str | None = None) -> Response:
        release = self.get_object()
        self.call_verb(permissions.ensure_can_promote, release=release)  # who may, before the body
        given = ReasonSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        self._verb(services.abort_release, release, reason=given.validated_data["reason"])
        return self._rollout(release)

    @extend_schema(
        summary="Correct how a finished release ended (close code) and link incidents",
        request=CloseSerializer,
        responses={200: ReleaseDetailSerializer, 409: CONFLICT},
    )
    @action(detail=True, methods=["post"])
    def close(self, request: Request, pk: str | None = None) -> Response:
        release = self.get_object()
        self.call_verb(permissions.ensure_can_close, release=release)  # who may, before the body
        given = CloseSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        self._verb(services.close_release, release, **given.validated_data)
        return self._detail(release)

    @extend_schema(
        methods=["POST"],
        summary="Post an observation of the stage carrying traffic (candidate beside the live "
        "baseline); it is judged against the stage's guards and stored",
        request=ObservationRequestSerializer,
        responses={201: ObservationSerializer, 409: CONFLICT},
    )
    @extend_schema(
        methods=["GET"],
        summary="The observations of one stage, newest first (paginated)",
        responses={200: ObservationSerializer(many=True)},
    )
    @action(
        detail=True,
        methods=["get", "post"],
        url_path=r"stages/(?P<number>[0-9]{1,3})/observations",
        url_name="stage-observations",
    )
    def observations(self, request: Request, pk: str | None = None, number: str = "") -> Response:
        release = self.get_object()
        if request.method == "GET":
            found = (
                Observation.objects.filter(stage__release=release, stage__number=int(number))
                .select_related("stage", "posted_by")
                .order_by("-created_at", "-pk")
            )
            page = self.paginate_queryset(found)
            return self.get_paginated_response(ObservationSerializer(page, many=True).data)
        self.call_verb(permissions.ensure_can_post_observation, release=release)
        given = ObservationRequestSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        observation = self._verb(
            services.record_observation, release, stage_number=int(number), **given.validated_data
        )
        return Response(ObservationSerializer(observation).data, status=status.HTTP_201_CREATED)


def _named_service(data: Any) -> Service | None:
    """The existing service a create body names by its slug, if it names one."""
    slug = data.get("service") if isinstance(data, Mapping) else None
    if not isinstance(slug, str) or not slug:
        return None
    return Service.objects.select_related("team").filter(slug=slug).first()


class _Refusal(Exception):
    """Carries a ready 409/422 answer out of a verb call to `handle_exception`."""

    def __init__(self, response: Response) -> None:
        super().__init__(response.data)
        self.response = response
