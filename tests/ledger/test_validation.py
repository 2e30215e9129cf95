"""Each refusal names the field and says what would be accepted."""

import pytest
from django.core.exceptions import ValidationError

from ledger import services
from ledger.engines import check_launch_parameters
from ledger.validators import validate_digest, validate_spdx_id
from tests.ledger.factories import (
    ModelAssetFactory,
    RevisionFactory,
    RuntimeFactory,
    ServiceFactory,
    digest,
)


def _messages(excinfo) -> dict[str, list[str]]:
    return excinfo.value.message_dict


@pytest.mark.parametrize(
    ("value", "hint"),
    [
        ("abc", "It has 3 hexadecimal characters; a sha256 digest has 64."),
        ("sha256:" + "A" * 64, "Use lowercase hexadecimal."),
        ("f" * 64, "Add the 'sha256:' prefix."),
        ("md5:d41d8cd98f00b204e9800998ecf8427e", ""),
    ],
)
def test_a_malformed_digest_is_refused_with_what_would_be_accepted(value, hint):
    with pytest.raises(ValidationError) as excinfo:
        validate_digest(value)

    message = excinfo.value.messages[0]
    assert "Expected 'sha256:' followed by 64 lowercase hexadecimal characters" in message
    assert repr(value) in message
    assert hint in message


def test_a_wellformed_digest_passes():
    validate_digest(digest("anything"))


def test_an_unknown_license_id_is_refused_with_the_closest_suggestion():
    with pytest.raises(ValidationError) as excinfo:
        validate_spdx_id("Apache2.0")

    message = excinfo.value.messages[0]
    assert "'Apache2.0' is not an SPDX license identifier" in message
    assert "Did you mean 'Apache-2.0'?" in message
    assert "LicenseRef-" in message


def test_custom_licenses_are_written_as_license_refs():
    validate_spdx_id("LicenseRef-Llama-3.1-Community")
    validate_spdx_id("MIT")


def test_a_deprecated_spdx_id_is_refused():
    with pytest.raises(ValidationError, match="deprecated SPDX identifier"):
        validate_spdx_id("GPL-3.0")


def test_asset_registration_names_the_bad_digest_field(team):
    with pytest.raises(ValidationError) as excinfo:
        ModelAssetFactory(team=team, tokenizer_digest="sha256:1234")

    assert list(_messages(excinfo)) == ["tokenizer_digest"]


def test_production_refuses_a_tag_only_image_and_says_why(team):
    service = ServiceFactory(team=team, tier="production")
    runtime = RuntimeFactory(team=team, image="vllm/vllm-openai:v0.6.3")

    with pytest.raises(ValidationError) as excinfo:
        RevisionFactory(service=service, runtime=runtime, model_asset__team=team)

    message = _messages(excinfo)["runtime"][0]
    assert "Production services need an image pinned by digest" in message
    assert "A tag can be pushed again with different content" in message
    assert "@sha256:<64 hex>" in message


def test_a_tag_only_image_is_only_warned_about_outside_production(team):
    service = ServiceFactory(team=team, tier="internal")
    runtime = RuntimeFactory(team=team, image="vllm/vllm-openai:v0.6.3")

    revision = RevisionFactory(service=service, runtime=runtime, model_asset__team=team)

    assert revision.pk
    warnings = services.runtime_warnings(runtime)
    assert any(
        "is not pinned by digest" in w and "Production services refuse it" in w for w in warnings
    )


def test_vllm_max_model_len_cannot_exceed_the_revision_context_limit(team):
    runtime = RuntimeFactory(team=team, launch_parameters={"max_model_len": 65536})

    with pytest.raises(ValidationError) as excinfo:
        RevisionFactory(service__team=team, runtime=runtime, context_limit=32768)

    message = _messages(excinfo)["context_limit"][0]
    assert (
        "max_model_len 65536 exceeds the revision's declared context limit of 32768 tokens"
        in message
    )


def test_launch_parameters_must_be_a_json_object(team):
    with pytest.raises(ValidationError) as excinfo:
        RuntimeFactory(team=team, launch_parameters=["--max-model-len", "4096"])

    assert "must be a JSON object" in _messages(excinfo)["launch_parameters"][0]


def test_a_misspelt_engine_flag_is_refused_with_a_suggestion():
    check = check_launch_parameters("vllm", {"max_model_length": 4096})

    assert check.errors == {
        "max_model_length": "is not a vllm flag the ledger knows; did you mean 'max_model_len'?"
    }


def test_a_cli_spelt_flag_is_refused_with_its_json_spelling():
    check = check_launch_parameters("vllm", {"--gpu-memory-utilization": 0.9})

    assert "write it as 'gpu_memory_utilization'" in check.errors["--gpu-memory-utilization"]


def test_flag_types_and_ranges_are_checked():
    check = check_launch_parameters(
        "vllm",
        {"gpu_memory_utilization": 1.5, "tensor_parallel_size": True, "quantization": "int3"},
    )

    assert check.errors["gpu_memory_utilization"] == "must be at most 1.0, got 1.5"
    assert check.errors["tensor_parallel_size"] == "expected a whole number, got a boolean"
    assert "must be one of awq, gptq" in check.errors["quantization"]


def test_an_unknown_flag_is_kept_with_a_warning():
    check = check_launch_parameters("sglang", {"enable_torch_compile": True})

    assert check.errors == {}
    assert check.warnings == [
        "'enable_torch_compile' is not a sglang flag the ledger knows; it is kept unchecked."
    ]


def test_a_retired_asset_cannot_go_into_a_new_revision(team):
    asset = ModelAssetFactory(team=team)
    services.retire_asset(asset, actor=None)

    with pytest.raises(ValidationError) as excinfo:
        RevisionFactory(service__team=team, model_asset=asset)

    assert "a retired asset cannot go into a new revision" in _messages(excinfo)["model_asset"][0]


def test_capability_values_are_checked_against_their_kind(team):
    revision = RevisionFactory(
        service__team=team, context_limit=8192, runtime__launch_parameters={"max_model_len": 8192}
    )

    with pytest.raises(ValidationError) as excinfo:
        services.declare_capability(revision, actor=None, kind="structured_output", value=["xml"])
    assert 'Example: ["json_schema", "regex"]' in _messages(excinfo)["value"][0]

    with pytest.raises(ValidationError) as excinfo:
        services.declare_capability(revision, actor=None, kind="context_length", value=16384)
    assert "exceeds the revision's context limit of 8192" in _messages(excinfo)["value"][0]
