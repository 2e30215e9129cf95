"""The event ledger over REST: read-only, and the chain's verification."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from ledger.checkpoints import verify_ledger
from ledger.filters import EventFilter
from ledger.models import Event
from ledger.serializers import ChainReportSerializer, EventSerializer


@extend_schema_view(
    list=extend_schema(summary="The event ledger, newest first"),
    retrieve=extend_schema(summary="One event, by sequence number"),
)
class EventViewSet(viewsets.ReadOnlyModelViewSet):
    """Read-only: events are appended by the domain verbs and never change."""

    queryset = Event.objects.all()
    serializer_class = EventSerializer
    filterset_class = EventFilter
    lookup_field = "sequence"
    lookup_value_regex = r"\d+"

    @extend_schema(
        summary="Recompute the whole chain and check its signatures, check it against the "
        "newest signed checkpoint, and report the first event that does not match or is missing",
        filters=False,
        responses={200: OpenApiResponse(ChainReportSerializer)},
    )
    @action(detail=False, methods=["get"], pagination_class=None, filterset_class=None)
    def verify(self, request: Request) -> Response:
        ledger = verify_ledger()
        chain, check = ledger.chain, ledger.checkpoint
        cp = check.checkpoint
        return Response(
            {
                "ok": ledger.ok,
                "count": chain.count,
                "head_hash": chain.head_hash,
                "first_bad_sequence": chain.first_bad_sequence,
                "problem": chain.problem or check.problem,
                "signatures_from": chain.signatures_from,
                "checkpoint": None
                if cp is None and check.ok
                else {
                    "ok": check.ok,
                    "sequence": cp.sequence if cp else None,
                    "hash": cp.hash if cp else None,
                    "taken_at": cp.taken_at if cp else None,
                    "key_id": cp.key_id if cp else None,
                    "problem": check.problem,
                },
            }
        )
