"""Price sheets over REST: anyone signed in reads the versions (filter by `gpu_model`);
platform SREs and administrators record one through `services.record_price_sheet`,
whose refusals come back as 400 keyed by field or 403."""

from __future__ import annotations

import django_filters
from drf_spectacular.utils import OpenApiExample, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request
from rest_framework.response import Response

from ledger import permissions, services
from ledger.models import PriceSheet
from ledger.serializers.price_sheets import PriceSheetCreateSerializer, PriceSheetSerializer
from lib.api import ApiFilterSet, DomainVerbMixin, api_text


class PriceSheetFilter(ApiFilterSet):
    gpu_model = django_filters.CharFilter(
        help_text=api_text("GPU model, exactly as runtimes name it.")
    )

    class Meta:
        model = PriceSheet
        fields = ["gpu_model", "currency"]


class PriceSheetWritePermission(BasePermission):
    """Everyone signed in reads; platform SREs and administrators record (the verb
    checks the same rule; asking here answers 403 before the body is read)."""

    message = "Only platform SREs and administrators can record price sheets; you can read them."

    def has_permission(self, request: Request, view) -> bool:
        if not request.user or not request.user.is_authenticated:
            return False
        return request.method in SAFE_METHODS or permissions.can_record_price_sheet(request.user)


@extend_schema_view(
    list=extend_schema(summary="Price sheet versions, by GPU model, newest first"),
    retrieve=extend_schema(summary="One price sheet version"),
    create=extend_schema(
        summary="Record a price sheet version (platform SREs)",
        request=PriceSheetCreateSerializer,
        responses={201: PriceSheetSerializer},
        examples=[
            OpenApiExample(
                "An H100 at its list price",
                value={
                    "gpu_model": "H100-80GB",
                    "price_per_gpu_hour": "2.4500",
                    "currency": "USD",
                    "effective_from": "2027-01-01",
                    "note": "Cloud list price, on-demand.",
                },
                request_only=True,
            )
        ],
    ),
)
class PriceSheetViewSet(
    DomainVerbMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    viewsets.GenericViewSet,
):
    """A version is never changed or deleted: a new price is a new version."""

    queryset = PriceSheet.objects.select_related("recorded_by").order_by(
        "gpu_model", "-effective_from"
    )
    serializer_class = PriceSheetSerializer
    filterset_class = PriceSheetFilter
    permission_classes = [PriceSheetWritePermission]

    def create(self, request: Request, *args, **kwargs) -> Response:
        incoming = PriceSheetCreateSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        sheet = self.call_verb(services.record_price_sheet, **incoming.validated_data)
        return Response(PriceSheetSerializer(sheet).data, status=status.HTTP_201_CREATED)
