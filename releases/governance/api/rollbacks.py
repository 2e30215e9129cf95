"""Rollbacks over REST: what a pager integration or an SRE's script records during an
incident, and reads after."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import exceptions, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from ledger.models import Service
from lib.api import DomainVerbMixin
from releases import permissions
from releases.governance import services
from releases.governance.api.releases import CONFLICT
from releases.governance.serializers.rollout import (
    ConfirmRollbackSerializer,
    RollbackCachesSerializer,
    RollbackEventSerializer,
    RollbackRequestSerializer,
    VerificationQueuedSerializer,
)
from releases.models import Release, RollbackEvent

LISTED = 50


def _service(slug: str) -> Service:
    found = Service.objects.select_related("team").filter(slug=slug).first()
    if found is None:
        raise exceptions.NotFound(f"There is no service {slug!r}.")
    return found


def _refused(exc: services.TransitionRefused) -> Response:
    return Response({"detail": exc.message, "state": exc.state}, status=status.HTTP_409_CONFLICT)


def _rollback(pk: int) -> RollbackEvent:
    """The rollback with its service's team (what the permission reads), or 404."""
    rollback = RollbackEvent.objects.select_related("service__team").filter(pk=pk).first()
    if rollback is None:
        raise exceptions.NotFound(f"There is no rollback #{pk}.")
    return rollback


class ServiceRollbacksView(DomainVerbMixin, APIView):
    @extend_schema(
        summary="A service's rollbacks, newest first (the last 50)",
        responses={200: RollbackEventSerializer(many=True)},
    )
    def get(self, request: Request, slug: str) -> Response:
        service = _service(slug)
        rollbacks = (
            RollbackEvent.objects.filter(service=service)
            .select_related("service", "from_revision", "to_revision", "recorded_by")
            .order_by("-started_at", "-pk")[:LISTED]
        )
        return Response(RollbackEventSerializer(rollbacks, many=True).data)

    @extend_schema(
        summary="Record a rollback: the target (by default the plan's, or the revision that "
        "served before) becomes live, the release it undoes is closed, and the target's "
        "verification replay is queued",
        request=RollbackRequestSerializer,
        responses={
            201: RollbackEventSerializer,
            409: CONFLICT,
            404: OpenApiResponse(description="There is no such service."),
        },
    )
    def post(self, request: Request, slug: str) -> Response:
        service = _service(slug)
        self.call_verb(permissions.ensure_can_record_rollback, service=service)
        given = RollbackRequestSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        try:
            rollback = self.call_verb(services.record_rollback, service, **given.validated_data)
        except services.TransitionRefused as exc:
            return _refused(exc)
        return Response(RollbackEventSerializer(rollback).data, status=status.HTTP_201_CREATED)


class RollbackConfirmView(DomainVerbMixin, APIView):
    @extend_schema(
        summary="Say how a rollback went that no replay could verify",
        request=ConfirmRollbackSerializer,
        responses={200: RollbackEventSerializer},
    )
    def post(self, request: Request, pk: int) -> Response:
        rollback = _rollback(pk)
        self.call_verb(permissions.ensure_can_record_rollback, service=rollback.service)
        given = ConfirmRollbackSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        rollback = self.call_verb(services.confirm_rollback, rollback, **given.validated_data)
        return Response(RollbackEventSerializer(rollback).data)


class RollbackCachesView(DomainVerbMixin, APIView):
    @extend_schema(
        summary="Say whether the prefix and response caches were flushed after a rollback "
        "(a blank answer keeps the one recorded)",
        request=RollbackCachesSerializer,
        responses={200: RollbackEventSerializer},
    )
    def post(self, request: Request, pk: int) -> Response:
        rollback = _rollback(pk)
        self.call_verb(permissions.ensure_can_record_rollback, service=rollback.service)
        given = RollbackCachesSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        rollback = self.call_verb(services.answer_rollback_caches, rollback, **given.validated_data)
        return Response(RollbackEventSerializer(rollback).data)


def _verification_queued(run) -> Response:
    return Response(VerificationQueuedSerializer(run).data, status=status.HTTP_202_ACCEPTED)


VERIFY_RESPONSES = {
    202: VerificationQueuedSerializer,
    400: OpenApiResponse(description="Nothing can verify the target; the detail says why."),
    403: OpenApiResponse(description="Only platform SREs and the service's model owners."),
    409: CONFLICT,
}


class ServiceVerifyTargetView(DomainVerbMixin, APIView):
    @extend_schema(
        summary="Verify now: queue the verification replay of the service's rollback target",
        request=None,
        responses=VERIFY_RESPONSES,
    )
    def post(self, request: Request, slug: str) -> Response:
        service = _service(slug)
        self.call_verb(permissions.ensure_can_verify_rollback_target, service=service)
        try:
            run = self.call_verb(services.verify_rollback_target, service)
        except services.TransitionRefused as exc:
            return _refused(exc)
        return _verification_queued(run)


class ReleaseVerifyTargetView(DomainVerbMixin, APIView):
    @extend_schema(
        summary="Verify now, from the rollback_plan gate: queue the verification replay of "
        "the release's rollback target",
        request=None,
        responses=VERIFY_RESPONSES,
    )
    def post(self, request: Request, pk: int) -> Response:
        release = Release.objects.select_related("service__team").filter(pk=pk).first()
        if release is None:
            raise exceptions.NotFound(f"There is no release #{pk}.")
        self.call_verb(permissions.ensure_can_verify_rollback_target, service=release.service)
        try:
            run = self.call_verb(services.verify_release_rollback_target, release)
        except services.TransitionRefused as exc:
            return _refused(exc)
        return _verification_queued(run)


class RollbackReverifyView(DomainVerbMixin, APIView):
    @extend_schema(
        summary="Verify again a rollback awaiting confirmation (its verification reached no "
        "backend, or nothing could run it)",
        request=None,
        responses={200: RollbackEventSerializer},
    )
    def post(self, request: Request, pk: int) -> Response:
        rollback = _rollback(pk)
        self.call_verb(permissions.ensure_can_verify_rollback_target, service=rollback.service)
        rollback = self.call_verb(services.reverify_rollback, rollback)
        return Response(RollbackEventSerializer(rollback).data)
