import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from ledger import queries, services
from ledger.fingerprint import compute_fingerprint
from ledger.models import Event, License, ModelAsset
from ledger.queries import license_findings
from tests.ledger.factories import (
    LicenseFactory,
    ModelAssetFactory,
    RevisionFactory,
    RuntimeFactory,
    ServiceFactory,
    digest,
)


def test_the_fingerprint_covers_every_component_of_the_inference_config(team):
    asset = ModelAssetFactory(team=team)
    runtime = RuntimeFactory(team=team)
    base = compute_fingerprint(asset, runtime, 32768)

    assert base.startswith("sha256:") and len(base) == 71
    for field in (
        "weights_digest",
        "tokenizer_digest",
        "chat_template_digest",
        "generation_config_digest",
    ):
        changed = ModelAsset(
            **{
                **{
                    f: getattr(asset, f)
                    for f in (
                        "weights_digest",
                        "tokenizer_digest",
                        "chat_template_digest",
                        "generation_config_digest",
                    )
                },
                field: digest(f"changed {field}"),
            }
        )
        assert compute_fingerprint(changed, runtime, 32768) != base, field
    assert compute_fingerprint(asset, runtime, 16384) != base
    runtime.launch_parameters = {**runtime.launch_parameters, "enable_prefix_caching": True}
    assert compute_fingerprint(asset, runtime, 32768) != base


def test_the_fingerprint_does_not_depend_on_key_order(team):
    asset = ModelAssetFactory(team=team)
    one = RuntimeFactory(
        team=team, launch_parameters={"max_model_len": 4096, "tensor_parallel_size": 2}
    )
    two = RuntimeFactory(
        team=team, launch_parameters={"tensor_parallel_size": 2, "max_model_len": 4096}
    )
    two.image = one.image

    assert compute_fingerprint(asset, one, 4096) == compute_fingerprint(asset, two, 4096)


def test_two_revisions_with_the_same_fingerprint_are_flagged_as_the_same(team):
    first = RevisionFactory(service__team=team)
    other_service = ServiceFactory(team=team)
    twin = services.create_revision(
        other_service,
        actor=None,
        model_asset=first.model_asset,
        runtime=first.runtime,
        context_limit=first.context_limit,
        gateway_policy_version="gw-9",
    )
    different = RevisionFactory(
        service=first.service,
        context_limit=16384,
        runtime__launch_parameters={"max_model_len": 16384},
    )

    assert list(queries.same_fingerprint(twin)) == [first]
    assert list(queries.same_fingerprint(different)) == []


@pytest.fixture
def non_commercial():
    return LicenseFactory(
        spdx_id="CC-BY-NC-4.0", name="CC BY-NC 4.0", kind=License.Kind.NON_COMMERCIAL
    )


def _codes(findings):
    return {finding.code: finding.severity for finding in findings}


def test_a_non_commercial_license_is_flagged_on_an_external_service(team, non_commercial):
    revision = RevisionFactory(
        service__team=team, service__exposure="external", model_asset__license=non_commercial
    )

    findings = license_findings(revision.service, revision)

    assert _codes(findings)["license_exposure"] == "breach"
    assert (
        "may not be served on a service whose exposure is 'External users'" in findings[0].message
    )


def test_a_non_commercial_license_is_allowed_internally(team, non_commercial):
    revision = RevisionFactory(
        service__team=team, service__exposure="internal", model_asset__license=non_commercial
    )

    assert "license_exposure" not in _codes(license_findings(revision.service, revision))


def test_a_gated_license_needs_a_recorded_acceptance(team, owner):
    gated = LicenseFactory(
        spdx_id="LicenseRef-Llama-3.1-Community",
        name="Llama 3.1 Community",
        kind=License.Kind.ACCEPTABLE_USE,
        gated=True,
    )
    revision = RevisionFactory(service__team=team, model_asset__license=gated)
    assert _codes(license_findings(revision.service, revision))["license_unaccepted"] == "breach"

    services.record_license_acceptance(
        revision.model_asset, actor=owner, terms_version="2024-07-23", accepted_by="Olivia Owner"
    )

    assert "license_unaccepted" not in _codes(license_findings(revision.service, revision))


def test_pending_approval_blocks_production_and_warns_elsewhere(team, security):
    production = RevisionFactory(service__team=team, service__tier="production")
    internal = RevisionFactory(service__team=team, service__tier="internal")

    assert _codes(license_findings(production.service, production))["license_pending"] == "breach"
    assert _codes(license_findings(internal.service, internal))["license_pending"] == "warning"

    services.set_license_approval(production.model_asset, actor=security, approval="approved")
    production.model_asset.refresh_from_db()
    assert "license_pending" not in _codes(license_findings(production.service, production))


def test_only_security_and_compliance_approve_licenses(team, owner):
    asset = ModelAssetFactory(team=team)

    with pytest.raises(PermissionDenied, match="Only security & compliance"):
        services.set_license_approval(asset, actor=owner, approval="approved")


def test_asset_lifecycle_moves_from_active_to_deprecated_to_retired(team):
    asset = ModelAssetFactory(team=team)

    services.deprecate_asset(asset, actor=None)
    assert asset.lifecycle == "deprecated" and asset.deprecated_on
    services.retire_asset(asset, actor=None)
    assert asset.lifecycle == "retired" and asset.retired_on
    assert not ModelAsset.objects.usable().filter(pk=asset.pk).exists()


def test_a_retired_asset_cannot_be_deprecated_again(team):
    asset = ModelAssetFactory(team=team)
    services.retire_asset(asset, actor=None)
    before = Event.objects.count()

    with pytest.raises(ValidationError, match="cannot change lifecycle again") as refused:
        services.deprecate_asset(asset, actor=None)

    assert set(refused.value.message_dict) == {"lifecycle"}
    asset.refresh_from_db()
    assert asset.lifecycle == "retired"
    assert Event.objects.count() == before


def test_deprecating_reads_the_lifecycle_as_stored_not_as_the_caller_saw_it(team):
    asset = ModelAssetFactory(team=team)
    stale = ModelAsset.objects.get(pk=asset.pk)
    services.retire_asset(asset, actor=None)

    with pytest.raises(ValidationError, match="cannot change lifecycle again"):
        services.deprecate_asset(stale, actor=None)

    assert ModelAsset.objects.get(pk=asset.pk).lifecycle == "retired"


def test_lineage_runs_from_the_base_to_the_asset(team):
    base = ModelAssetFactory(team=team, name="Llama-3.1-8B")
    tuned = ModelAssetFactory(
        team=team, name="Llama-3.1-8B-support", derived_from=base, derivation="fine_tuned"
    )
    awq = ModelAssetFactory(
        team=team,
        name="Llama-3.1-8B-support-AWQ",
        derived_from=tuned,
        derivation="quantized",
        quantization="int4-awq",
    )

    assert awq.lineage() == [base, tuned, awq]


def test_editing_an_unlocked_asset_recomputes_the_fingerprints_built_on_it(team):
    revision = RevisionFactory(service__team=team)
    before = revision.fingerprint

    services.update_asset(
        revision.model_asset, actor=None, chat_template_digest=digest("new template")
    )

    revision.refresh_from_db()
    assert revision.fingerprint != before
    event = Event.objects.filter(action="revision.fingerprint_changed").get()
    assert event.payload_data == {
        "before": {"fingerprint": before},
        "after": {"fingerprint": revision.fingerprint},
    }


def test_a_license_review_comment_is_kept_in_the_ledger(team, security):
    asset = ModelAssetFactory(team=team)

    services.set_license_approval(asset, actor=security, approval="rejected", comment="NC terms")

    event = Event.objects.filter(action="model_asset.license_reviewed").get()
    assert event.payload_data["comment"] == "NC terms"
    assert event.actor_label == security.username


def test_a_new_task_type_is_recorded_in_the_ledger(team):
    ServiceFactory(team=team, task_types=["sql-generation"])

    event = Event.objects.filter(action="task_type.created").get()
    assert event.payload_data["after"]["slug"] == "sql-generation"
