"""Exports and webhook subscriptions over REST.

- `POST /api/exports/` queues an export and answers 202 at once; `GET
  /api/exports/{id}/` reports its state and progress; `POST
  /api/exports/{id}/download/` records the download and answers a short-lived link.
  Exports are `releases.permissions.can_request_exports`' (auditors, security &
  compliance, superusers): everyone else is refused, the list included.
- `/api/webhooks/`: platform creates (the answer carries the secret, once), reads,
  pauses, resumes and deletes subscriptions, reads their delivery log and sends a
  delivery again.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied
from rest_framework.pagination import PageNumberPagination
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from lib.api import DomainVerbMixin
from releases import permissions
from releases.audit.serializers.exports import (
    DeliverySerializer,
    DownloadLinkSerializer,
    ExportRequestSerializer,
    ExportSerializer,
    ResendRequestSerializer,
    WebhookSubscriptionCreatedSerializer,
    WebhookSubscriptionRequestSerializer,
    WebhookSubscriptionSerializer,
)
from releases.audit.services import exports as export_services
from releases.audit.services import webhooks as webhook_services
from releases.models import Delivery, Export, WebhookSubscription

NOT_READY = OpenApiResponse(description="The export is not ready (queued, building or failed).")


@extend_schema_view(
    list=extend_schema(summary="Exports, newest first"),
    retrieve=extend_schema(summary="One export: its state, progress, digest and chain head"),
    create=extend_schema(
        summary="Request an export; a worker builds it (answers 202 at once)",
        request=ExportRequestSerializer,
        responses={202: ExportSerializer},
    ),
)
class ExportViewSet(
    DomainVerbMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    viewsets.GenericViewSet,
):
    serializer_class = ExportSerializer
    permission_classes = [IsAuthenticated]
    reads_need_a_role = True  # the schema documents the 403 of reads (lib/schema.py)

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        if not permissions.can_request_exports(request.user):
            raise PermissionDenied(
                "Only auditors and security & compliance can request or download exports."
            )

    def get_queryset(self):
        return Export.objects.for_page().order_by("-created_at", "-id")

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        given = ExportRequestSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        export = self.call_verb(
            export_services.request_export,
            format=given.validated_data["format"],
            filters=given.filters(),
        )
        return Response(ExportSerializer(export).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(
        summary="Record a download and answer a link to the file that expires soon",
        request=None,
        responses={200: DownloadLinkSerializer, 409: NOT_READY},
    )
    @action(detail=True, methods=["post"])
    def download(self, request: Request, pk: str | None = None) -> Response:
        export = self.get_object()
        try:
            link = self.call_verb(export_services.download_link, export)
        except export_services.ExportNotReady as refused:
            return Response({"detail": str(refused)}, status=status.HTTP_409_CONFLICT)
        url = link.url if link.url.startswith("http") else request.build_absolute_uri(link.url)
        body = {"url": url, "expires_at": link.expires_at, "sha256": export.sha256}
        return Response(DownloadLinkSerializer(body).data)


@extend_schema_view(
    list=extend_schema(summary="Webhook subscriptions (platform)"),
    retrieve=extend_schema(summary="One subscription (never its secret)"),
    create=extend_schema(
        summary="Subscribe a URL to event types; the answer shows the secret, once",
        request=WebhookSubscriptionRequestSerializer,
        responses={201: WebhookSubscriptionCreatedSerializer},
    ),
    destroy=extend_schema(summary="Delete a subscription and its delivery log"),
)
class WebhookSubscriptionViewSet(
    DomainVerbMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    serializer_class = WebhookSubscriptionSerializer
    permission_classes = [IsAuthenticated]
    reads_need_a_role = True  # the schema documents the 403 of reads (lib/schema.py)

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        if not permissions.can_manage_webhooks(request.user):
            raise PermissionDenied("Only platform can manage webhook subscriptions.")

    def get_queryset(self):
        return WebhookSubscription.objects.order_by("name", "id")

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        given = WebhookSubscriptionRequestSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        subscription = self.call_verb(webhook_services.create_subscription, **given.validated_data)
        return Response(
            WebhookSubscriptionCreatedSerializer(subscription).data, status=status.HTTP_201_CREATED
        )

    def perform_destroy(self, instance: WebhookSubscription) -> None:
        self.call_verb(webhook_services.delete_subscription, instance)

    @extend_schema(summary="Pause: nothing is sent until resumed", request=None)
    @action(detail=True, methods=["post"])
    def pause(self, request: Request, pk: str | None = None) -> Response:
        subscription = self.call_verb(webhook_services.pause_subscription, self.get_object())
        return Response(WebhookSubscriptionSerializer(subscription).data)

    @extend_schema(
        summary="Resume: what happened while paused is sent next; the failure flag clears",
        request=None,
    )
    @action(detail=True, methods=["post"])
    def resume(self, request: Request, pk: str | None = None) -> Response:
        subscription = self.call_verb(webhook_services.resume_subscription, self.get_object())
        return Response(WebhookSubscriptionSerializer(subscription).data)

    @extend_schema(
        summary="The delivery log, newest first", responses={200: DeliverySerializer(many=True)}
    )
    @action(detail=True, methods=["get"], pagination_class=PageNumberPagination)
    def deliveries(self, request: Request, pk: str | None = None) -> Response:
        subscription = self.get_object()
        deliveries = (
            Delivery.objects.filter(subscription=subscription)
            .select_related("event")
            .order_by("-created_at", "-id")
        )
        page = self.paginate_queryset(deliveries)
        return self.get_paginated_response(DeliverySerializer(page, many=True).data)

    @extend_schema(
        summary="Send a delivery again (same webhook-id), even while paused",
        request=ResendRequestSerializer,
        responses={202: DeliverySerializer},
    )
    @action(detail=True, methods=["post"])
    def resend(self, request: Request, pk: str | None = None) -> Response:
        subscription = self.get_object()
        given = ResendRequestSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        delivery = (
            Delivery.objects.filter(pk=given.validated_data["delivery"], subscription=subscription)
            .select_related("event")
            .first()
        )
        if delivery is None:
            return Response(
                {
                    "delivery": [
                        f"No delivery #{given.validated_data['delivery']} of this subscription."
                    ]
                },
                status=status.HTTP_400_BAD_REQUEST,
            )
        delivery = self.call_verb(webhook_services.resend_delivery, delivery)
        return Response(DeliverySerializer(delivery).data, status=status.HTTP_202_ACCEPTED)
