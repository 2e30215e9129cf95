"""Structural rules live in the database: writes that skip validation still fail."""

import pytest
from django.db import IntegrityError, transaction

from ledger.models import ModelAsset, Revision, Service
from tests.ledger.factories import ModelAssetFactory, RevisionFactory, ServiceFactory


def _refused(queryset, **values):
    with pytest.raises(IntegrityError), transaction.atomic():
        queryset.update(**values)


def test_service_slugs_are_unique(team):
    ServiceFactory(team=team, slug="kb-assistant")

    with pytest.raises(IntegrityError), transaction.atomic():
        Service.objects.create(team=team, slug="kb-assistant", name="again")


def test_asset_name_and_revision_are_unique_together(team):
    asset = ModelAssetFactory(team=team, name="Qwen2.5-7B", revision="abc123")

    copy = {f.attname: getattr(asset, f.attname) for f in ModelAsset._meta.concrete_fields}
    del copy["id"]

    with pytest.raises(IntegrityError), transaction.atomic():
        ModelAsset.objects.create(**copy)


def test_enum_and_range_checks_hold_in_the_database(team):
    service = ServiceFactory(team=team)
    services = Service.objects.filter(pk=service.pk)

    _refused(services, tier="galactic")
    _refused(services, exposure="public")
    _refused(services, slo_error_rate_pct=150)
    _refused(services, slo_ttft_p95_ms=900, slo_ttft_p99_ms=500)
    _refused(services, review_cadence_days=0)


def test_asset_derivation_and_lifecycle_checks_hold_in_the_database(team):
    base = ModelAssetFactory(team=team)
    assets = ModelAsset.objects.filter(pk=base.pk)

    _refused(assets, derivation="quantized")  # derived, but from nothing
    _refused(assets, derived_from=base, derivation="quantized")  # from itself
    _refused(assets, lifecycle="deprecated")  # without a date
    _refused(assets, lifecycle="retired")
    _refused(assets, weights_digest="sha256:XYZ")


def test_revision_numbers_are_unique_per_service(team):
    first = RevisionFactory(service__team=team)
    second = RevisionFactory(service=first.service)

    assert (first.number, second.number) == (1, 2)
    _refused(Revision.objects.filter(pk=second.pk), number=1)
    _refused(Revision.objects.filter(pk=second.pk), context_limit=0)
