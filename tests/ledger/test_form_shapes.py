"""Refusals on the registry's forms and API name what was sent and what is expected:
a tampered choice lists the allowed ones, identifier fields have a shape (no spaces,
no markup), and a runtime has at least one GPU."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from ledger.models import Event, ModelAsset, Runtime
from ledger.validators import validate_name_token, validate_repository, validate_version
from lib.forms import invalid_choice_message
from tests.ledger.factories import LicenseFactory, RevisionFactory, RuntimeFactory
from tests.ledger.test_views_assets import asset_data
from tests.ledger.test_views_runtimes import runtime_data, validate

# ---------------------------------------------------------------- the validators


@pytest.mark.parametrize(
    "value",
    [
        "Qwen/Qwen2.5-7B-Instruct",
        "https://huggingface.co/Qwen/Qwen2.5-7B-Instruct",
        "s3://models/qwen2.5/7b@a09a3545",
        "hf.co/org/model:Q4_K_M",
    ],
)
def test_a_repository_id_or_url_passes(value):
    validate_repository(value)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("Qwen/Qwen 2.5", "it contains a space"),
        ("Qwen/Qwen2.5\t7B", "it contains whitespace"),
        ("<script>alert(1)</script>", "it contains '<'"),
        ('Qwen/"x"', "it contains '\"'"),
        ("-Qwen/x", "it does not start with a letter or digit"),
        ("Qwen/x*", "it contains '*'"),
    ],
)
def test_a_repository_with_spaces_or_markup_is_refused_saying_what_is_expected(value, problem):
    with pytest.raises(ValidationError) as caught:
        validate_repository(value)

    message = caught.value.messages[0]
    assert message.startswith(
        "Expected a hub repository id or URL such as Qwen/Qwen2.5-7B-Instruct"
    )
    assert "no spaces or markup" in message
    assert message.endswith(f"{problem}.")


@pytest.mark.parametrize("value", ["0.6.3", "v0.6.3.post1", "b4567", "2.4.0-rocm", "0.6.3+cu124"])
def test_engine_versions_pass(value):
    validate_version(value)


@pytest.mark.parametrize("value", ["0.6.3 latest", "<b>0.6</b>", "0.6/3", "~0.6"])
def test_a_version_with_spaces_markup_or_paths_is_refused(value):
    with pytest.raises(ValidationError, match=r"Expected a version such as 0\.6\.3"):
        validate_version(value)


def test_a_name_token_refuses_markup():
    validate_name_token("gw-12")
    with pytest.raises(ValidationError, match="it contains '>'"):
        validate_name_token("gw>12")


def test_an_invalid_choice_message_names_the_value_and_the_choices():
    from django import forms

    field = forms.ChoiceField(label="Engine", choices=[("vllm", "vLLM"), ("tgi", "tgi")])

    assert invalid_choice_message(field, "gpu9") == (
        "'gpu9' is not one of the choices of Engine; choose one of: vllm (vLLM), tgi."
    )
    long = forms.ChoiceField(label="N", choices=[(str(i), str(i)) for i in range(20)])
    assert invalid_choice_message(long, "x" * 100).endswith("10, 11, and 8 more.")
    assert "x" * 61 not in invalid_choice_message(long, "x" * 100)


# ---------------------------------------------------------------- pages


def test_a_tampered_engine_choice_names_the_value_and_the_allowed_ones(client, owner, team):
    client.force_login(owner)

    response = client.post("/runtimes/new", runtime_data(team, engine="<b>gpu9</b>"))

    assert response.status_code == 200
    page = response.content.decode()
    assert "&#x27;&lt;b&gt;gpu9&lt;/b&gt;&#x27; is not one of the choices of Engine" in page
    assert "choose one of: vllm (vLLM), sglang (SGLang)" in page
    assert "<b>gpu9</b>" not in page
    assert not Runtime.objects.exists()


def test_a_tampered_runtime_on_the_revision_form_lists_the_runtimes(client, owner, team):
    revision = RevisionFactory(service__team=team, service__slug="kb-assistant")
    client.force_login(owner)

    response = client.post(
        "/services/kb-assistant/revisions/new",
        {
            "model_asset": revision.model_asset_id,
            "runtime": "999999",
            "context_limit": "32768",
            "gateway_policy_version": "gw-2",
        },
    )

    errors = response.context["form"].errors["runtime"]
    assert errors == [
        "'999999' is not one of the choices of Runtime; choose one of: "
        f"{revision.runtime_id} ({revision.runtime.name} (vLLM 0.6.3, 1 x H100-80GB; "
        f"team {team.slug}))."
    ]


def test_a_tampered_workload_class_on_the_upload_names_the_classes(client, owner, team):
    revision = RevisionFactory(service__team=team, service__slug="kb-assistant")
    client.force_login(owner)

    response = client.post(
        f"/services/kb-assistant/r{revision.number}/loadtests/new", {"workload": "huge"}
    )

    assert "&#x27;huge&#x27; is not one of the choices of Workload class" in (
        response.content.decode()
    )
    assert "short (Short prompts)" in response.content.decode()


def test_a_runtime_with_spaces_in_its_engine_version_and_zero_gpus_is_refused(client, owner, team):
    client.force_login(owner)

    response = client.post(
        "/runtimes/new", runtime_data(team, engine_version="0.6.3 latest", gpu_count="0")
    )

    errors = response.context["form"].errors
    assert "Expected a version such as 0.6.3" in errors["engine_version"][0]
    assert "it contains a space" in errors["engine_version"][0]
    assert errors["gpu_count"] == ["A runtime runs on at least 1 GPU per replica; got 0."]
    assert not Runtime.objects.exists()
    assert not Event.objects.exists()


def test_inline_validation_says_a_gpu_count_of_zero_is_refused(client, owner, team):
    client.force_login(owner)

    response = validate(client, runtime_data(team, gpu_count="0"), "gpu_count")

    assert "at least 1 GPU per replica" in response.content.decode()


def test_an_asset_with_markup_in_its_source_repository_is_refused(client, owner, team):
    apache = LicenseFactory()
    client.force_login(owner)

    response = client.post(
        "/assets/new",
        asset_data(team, apache, source_repository="<img>x", tokenizer_id="a b"),
    )

    errors = response.context["form"].errors
    assert "it contains '<'" in errors["source_repository"][0]
    assert "it contains a space" in errors["tokenizer_id"][0]
    assert "&lt;img&gt;x" in response.content.decode()
    assert not ModelAsset.objects.exists()


def test_a_revision_gateway_policy_with_spaces_is_refused_on_the_form(client, owner, team):
    revision = RevisionFactory(service__team=team, service__slug="kb-assistant")
    client.force_login(owner)

    response = client.post(
        "/services/kb-assistant/revisions/new",
        {
            "model_asset": revision.model_asset_id,
            "runtime": revision.runtime_id,
            "context_limit": "32768",
            "gateway_policy_version": "gw 2",
        },
    )

    assert "Expected a name such as" in response.context["form"].errors["gateway_policy_version"][0]


# ---------------------------------------------------------------- the API


@pytest.fixture
def api(client, owner, team):
    client.force_login(owner)
    return client


def test_the_api_refuses_a_tampered_choice_naming_the_allowed_ones(api, team):
    body = {k: v for k, v in runtime_data(team).items() if k != "team"}
    body |= {"team": team.slug, "engine": "gpu9", "launch_parameters": {}}

    response = api.post("/api/runtimes/", body, content_type="application/json")

    assert response.status_code == 400
    message = response.json()["engine"][0]
    assert message.startswith('"gpu9" is not one of the choices; expected one of: vllm, sglang')


def test_the_api_applies_the_same_shapes_and_gpu_count(api, team):
    body = {k: v for k, v in runtime_data(team).items() if k != "team"}
    body |= {
        "team": team.slug,
        "launch_parameters": {},
        "engine_version": "<b>1</b>",
        "gpu_count": 0,
    }

    response = api.post("/api/runtimes/", body, content_type="application/json")

    assert response.status_code == 400
    errors = response.json()
    assert "Expected a version such as 0.6.3" in errors["engine_version"][0]
    assert "at least 1 GPU per replica" in errors["gpu_count"][0]
    assert not Runtime.objects.exists()


def test_the_api_refuses_a_gateway_policy_with_spaces_on_a_new_revision(api, team):
    revision = RevisionFactory(service__team=team)

    response = api.post(
        f"/api/revisions/{revision.pk}/new-revision/",
        {"gateway_policy_version": "gw 2"},
        content_type="application/json",
    )

    assert response.status_code == 400
    assert "it contains a space" in response.json()["gateway_policy_version"][0]


def test_the_api_upload_names_the_workload_classes(api, team):
    revision = RevisionFactory(service__team=team)

    response = api.post(f"/api/revisions/{revision.pk}/loadtests/", {"workload": "huge"})

    assert response.status_code == 400
    assert "expected one of: short, high_concurrency" in response.json()["workload"][0]


def test_the_database_refuses_a_runtime_without_gpus(team):
    runtime = RuntimeFactory(team=team)

    with pytest.raises(IntegrityError), transaction.atomic():
        Runtime.objects.filter(pk=runtime.pk).update(gpu_count=0)
