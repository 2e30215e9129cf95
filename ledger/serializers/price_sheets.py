"""Price sheets over REST: what a caller sends to record a version, and what readers get."""

from __future__ import annotations

from rest_framework import serializers

from ledger.models import PriceSheet


class PriceSheetCreateSerializer(serializers.Serializer):
    """Only types are read here; `services.record_price_sheet` checks the rest (capital
    ISO 4217 code, price ≥ 0 with at most 4 decimals, no second version on a day) and
    names the field it refuses."""

    gpu_model = serializers.CharField(
        allow_blank=True, help_text="As runtimes name it (`gpu_model`), e.g. H100-80GB."
    )
    price_per_gpu_hour = serializers.DecimalField(
        max_digits=None,
        decimal_places=None,
        help_text="What one GPU of this model costs for an hour; ≥ 0, at most 4 decimals.",
    )
    currency = serializers.CharField(
        allow_blank=True, help_text="ISO 4217 code in capitals, e.g. USD, EUR, CNY."
    )
    effective_from = serializers.DateField(
        help_text="The first day (UTC) the price holds, until a later version; may be ahead."
    )
    note = serializers.CharField(
        required=False, allow_blank=True, default="", help_text="Where the price comes from."
    )


class PriceSheetSerializer(serializers.ModelSerializer):
    recorded_by: serializers.SlugRelatedField = serializers.SlugRelatedField(
        read_only=True,
        allow_null=True,
        slug_field="username",
        help_text="Who recorded it; null when the system did (seed_demo, a command).",
    )

    class Meta:
        model = PriceSheet
        fields = [
            "id",
            "gpu_model",
            "price_per_gpu_hour",
            "currency",
            "effective_from",
            "note",
            "recorded_by",
            "recorded_at",
        ]
        read_only_fields = fields
