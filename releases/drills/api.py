"""Peak drills over REST.

- `GET /api/drills/` and `GET /api/drills/{id}/`: the plan and, once it ran, the results
  (`achieved_rate`, `late_starts`, `dropped_starts`, `by_task_type`): everyone signed in.
- `POST /api/drills/`: plan one (`releases.drills.plan` says what is checked); 400 names
  each field that cannot run as written; platform or the services' model owners.
- `POST /api/drills/{id}/conclusion/`: conclude it; the roles it names as signers; 409
  before it ran or once concluded.
"""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response

from lib.api import DomainVerbMixin
from releases import permissions
from releases.drills import services as verbs
from releases.drills.plan import PlanRefused
from releases.drills.queries import drill_queryset
from releases.governance.services import TransitionRefused
from releases.models import Drill

REFUSED = OpenApiResponse(description="Each field that cannot run as written, and why.")
WRONG_STATE = OpenApiResponse(description="The drill is not in a state the verb applies to.")


class DrillSerializer(serializers.ModelSerializer):
    services: serializers.Field = serializers.SlugRelatedField(
        many=True, read_only=True, slug_field="slug"
    )
    window = serializers.SerializerMethodField()
    created_by: serializers.Field = serializers.SlugRelatedField(
        read_only=True, slug_field="username", allow_null=True
    )
    concluded_by: serializers.Field = serializers.SlugRelatedField(
        read_only=True, slug_field="username", allow_null=True
    )

    class Meta:
        model = Drill
        fields = [
            "id",
            "name",
            "business_event",
            "window",
            "services",
            "revision",
            "mix",
            "arrival",
            "bounds",
            "capacity",
            "seed",
            "in_flight_ceiling",
            "signers",
            "state",
            "results",
            "ran_at",
            "conclusion",
            "concluded_at",
            "concluded_by",
            "created_by",
            "created_at",
        ]
        read_only_fields = fields

    def get_window(self, drill: Drill) -> dict[str, Any]:
        return {"starts_at": drill.window_starts_at, "ends_at": drill.window_ends_at}


@extend_schema_view(
    list=extend_schema(summary="Drills, newest first"),
    retrieve=extend_schema(summary="One drill: its plan, its results and its conclusion"),
)
class DrillViewSet(
    DomainVerbMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet
):
    serializer_class = DrillSerializer

    def get_queryset(self):
        return drill_queryset()

    def _refused(self, refused: PlanRefused) -> Response:
        return Response(refused.errors, status=status.HTTP_400_BAD_REQUEST)

    def _state(self, refused: TransitionRefused) -> Response:
        return Response(
            {"detail": refused.message, "state": refused.state}, status=status.HTTP_409_CONFLICT
        )

    def _answer(self, drill: Drill, code: int = status.HTTP_200_OK) -> Response:
        return Response(DrillSerializer(self.get_queryset().get(pk=drill.pk)).data, status=code)

    @extend_schema(
        summary="Plan a drill: name, services, mix [{task_type, sample_set, weight}], arrival "
        "{type: constant | poisson | ramp, rate, duration_s, stages}, bounds per task type, "
        "capacity, seed, in_flight_ceiling, signers",
        request=OpenApiTypes.OBJECT,
        responses={201: DrillSerializer, 400: REFUSED},
    )
    def create(self, request: Request) -> Response:
        # Before the body is read: only platform and model owners plan drills (the verb
        # then checks a model owner's services).
        if not permissions.can_plan_some_drill(request.user):
            raise PermissionDenied(
                _("Only platform, or model owners of every service in scope, can plan a drill.")
            )
        try:
            drill = self.call_verb(verbs.plan_drill, request.data)
        except PlanRefused as refused:
            return self._refused(refused)
        return self._answer(drill, status.HTTP_201_CREATED)

    @extend_schema(
        summary="Conclude: protected and degraded task types, failure_message_seen, the "
        "scale-up reclaimed (reclaimed_at, reclaimed_by) or an open action (action_owner, "
        "action_due_on), prewarm_pools, throttles, blackout",
        request=OpenApiTypes.OBJECT,
        responses={200: DrillSerializer, 400: REFUSED, 409: WRONG_STATE},
    )
    @action(detail=True, methods=["post"])
    def conclusion(self, request: Request, pk: str | None = None) -> Response:
        drill = self.get_object()
        if not permissions.can_conclude_drill(request.user, drill.signers):
            raise PermissionDenied(
                _("Only %(roles)s can conclude this drill.") % {"roles": ", ".join(drill.signers)}
            )
        if not isinstance(request.data, dict):
            return self._refused(PlanRefused({"": "expected a JSON object."}))
        try:
            self.call_verb(verbs.conclude_drill, drill, request.data)
        except PlanRefused as refused:
            return self._refused(refused)
        except TransitionRefused as refused:
            return self._state(refused)
        return self._answer(drill)
