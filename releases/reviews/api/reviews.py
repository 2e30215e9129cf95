"""Periodic reviews over REST.

- `GET /api/reviews/` (filters `service`, `state`, `trigger`) and `GET /api/reviews/{id}/`
  with its triggers and their numbers, its checklist and actions: everyone signed in.
- `POST /api/reviews/{id}/checklist/` answers items, `POST /api/reviews/{id}/conclusion/`
  concludes: the review's assignee, platform, or security & compliance (403 otherwise,
  before the body is read); 409 once the review is concluded.
"""

from __future__ import annotations

import django_filters
from django.db.models import Prefetch, QuerySet
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response

from lib.api import ApiFilterSet, DomainVerbMixin
from releases import permissions
from releases.governance.services import TransitionRefused
from releases.models import Review, ReviewAction, ReviewChecklistItem, ReviewTrigger
from releases.reviews.queries import reviews as review_queries
from releases.reviews.serializers.reviews import (
    ChecklistAnswersRequestSerializer,
    ConclusionRequestSerializer,
    ReviewDetailSerializer,
    ReviewSerializer,
)
from releases.reviews.services import periodic_reviews as verbs

CONCLUDED = OpenApiResponse(description="The review is concluded: it is read-only.")


class ReviewFilter(ApiFilterSet):
    service = django_filters.CharFilter(field_name="service__slug", help_text="A service slug.")
    state = django_filters.ChoiceFilter(choices=Review.State.choices)
    trigger = django_filters.ChoiceFilter(
        choices=ReviewTrigger.Kind.choices, method="by_trigger", help_text="Raised for this."
    )

    class Meta:
        model = Review
        fields = ["service", "state", "trigger"]

    def by_trigger(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.filter(pk__in=ReviewTrigger.objects.filter(kind=value).values("review_id"))


@extend_schema_view(
    list=extend_schema(summary="Reviews: those still to do first, by due date"),
    retrieve=extend_schema(
        summary="One review: why it was raised (each trigger with its numbers), its "
        "checklist and its conclusion"
    ),
)
class ReviewViewSet(
    DomainVerbMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet
):
    serializer_class = ReviewSerializer
    filterset_class = ReviewFilter

    def get_queryset(self):
        reviews = review_queries.review_list_queryset()
        if self.action == "list":
            return reviews
        return reviews.prefetch_related(
            Prefetch(
                "items",
                queryset=ReviewChecklistItem.objects.select_related("answered_by").order_by(
                    "position"
                ),
            ),
            Prefetch(
                "actions",
                queryset=ReviewAction.objects.select_related("service", "owner", "done_by"),
            ),
        )

    def get_serializer_class(self):
        return ReviewSerializer if self.action == "list" else ReviewDetailSerializer

    def _conducted(self) -> Review:
        review = self.get_object()
        if not permissions.can_conduct_review(self.request.user, review):
            raise PermissionDenied(
                f"Only review #{review.pk}'s assignee, platform or security & compliance can "
                "answer its checklist or conclude it."
            )
        return review

    def _answer(self, review: Review) -> Response:
        fresh = self.get_queryset().get(pk=review.pk)
        return Response(ReviewDetailSerializer(fresh).data)

    @extend_schema(
        summary="Answer checklist items: ok, action_needed or not_applicable, with a note "
        "(required unless ok); the first answers start the review",
        request=ChecklistAnswersRequestSerializer,
        responses={200: ReviewDetailSerializer, 409: CONCLUDED},
    )
    @action(detail=True, methods=["post"])
    def checklist(self, request: Request, pk: str | None = None) -> Response:
        review = self._conducted()
        given = ChecklistAnswersRequestSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        try:
            self.call_verb(
                verbs.answer_checklist,
                review,
                answers=[dict(answer) for answer in given.validated_data["answers"]],
            )
        except TransitionRefused as refused:
            return Response(
                {"detail": refused.message, "state": refused.state},
                status=status.HTTP_409_CONFLICT,
            )
        return self._answer(review)

    @extend_schema(
        summary="Conclude: pass, pass_with_actions or fail, with actions (owner, due_on) and "
        "the next due date; the conclusion and the whole checklist go into the ledger and the "
        "review becomes read-only",
        request=ConclusionRequestSerializer,
        responses={200: ReviewDetailSerializer, 409: CONCLUDED},
    )
    @action(detail=True, methods=["post"])
    def conclusion(self, request: Request, pk: str | None = None) -> Response:
        review = self._conducted()
        given = ConclusionRequestSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        try:
            self.call_verb(verbs.conclude_review, review, **given.verb_arguments())
        except TransitionRefused as refused:
            return Response(
                {"detail": refused.message, "state": refused.state},
                status=status.HTTP_409_CONFLICT,
            )
        return self._answer(review)
