"""`manage.py apply` and `manage.py export_registry`: the declarative registry."""

from __future__ import annotations

import copy
import json
import re
from io import StringIO
from pathlib import Path

import pytest
import yaml
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import transaction

from ledger import services
from ledger.chain import verify_chain
from ledger.gateway_policy import EXAMPLE, SECTIONS, document_sha256
from ledger.models import Capability, Event, GatewayPolicy, ModelAsset, Revision, Service, Team
from tests.factories import UserFactory
from tests.ledger.factories import digest

PINNED_VLLM = f"registry.example.com/inference/vllm-openai:v0.6.3@{digest('vllm-0.6.3')}"


def _asset(name: str, **extra) -> dict:
    return {
        "name": name,
        "revision": "main",
        "team": "kb-team",
        "family": "qwen2.5",
        "source_repository": f"Qwen/{name}",
        "license": "Apache-2.0",
        "weights_digest": digest(f"weights:{name}"),
        "tokenizer_digest": digest("tokenizer:qwen2.5"),
        "chat_template_digest": digest("template:qwen2.5"),
        "generation_config_digest": digest(f"generation:{name}"),
        "config_digest": digest(f"config:{name}"),
        **extra,
    }


def registry() -> dict:
    """A small registry: one production service, its two revisions, their parts."""
    return {
        "version": 1,
        "teams": [{"slug": "kb-team", "name": "Knowledge base team", "members": ["olivia"]}],
        "licenses": [{"spdx_id": "Apache-2.0", "name": "Apache License 2.0", "kind": "permissive"}],
        "model_assets": [
            _asset("Qwen2.5-7B-Instruct"),
            _asset(
                "Qwen2.5-7B-Instruct-AWQ",
                quantization="int4-awq",
                derived_from="Qwen2.5-7B-Instruct@main",
                derivation="quantized",
            ),
        ],
        "runtimes": [
            {
                "name": "vllm-h100",
                "team": "kb-team",
                "engine": "vllm",
                "engine_version": "0.6.3",
                "image": PINNED_VLLM,
                "launch_parameters": {"max_model_len": 32768, "enable_prefix_caching": True},
                "gpu_model": "H100-80GB",
            },
            {
                "name": "ollama-dev",
                "team": "kb-team",
                "engine": "ollama",
                "engine_version": "0.3.14",
                "image": "docker.io/ollama/ollama:0.3.14",
                "launch_parameters": {"num_ctx": 8192},
            },
        ],
        "services": [
            {
                "slug": "kb-assistant",
                "name": "Knowledge-base assistant",
                "team": "kb-team",
                "tier": "production",
                "exposure": "internal",
                "task_types": ["chat", "rag"],
                "tenants": ["support", "sales"],
                "slos": {"ttft_p95_ms": 800, "error_rate_pct": 0.5},
                "live_revision": 1,
                "revisions": [
                    {
                        "number": 1,
                        "model_asset": "Qwen2.5-7B-Instruct@main",
                        "runtime": "vllm-h100",
                        "context_limit": 32768,
                        "gateway_policy_version": "gw-1",
                        "capabilities": {"context_length": 32768, "streaming": "sse"},
                    },
                    {
                        "number": 2,
                        "model_asset": "Qwen2.5-7B-Instruct-AWQ@main",
                        "runtime": "vllm-h100",
                        "context_limit": 32768,
                        "gateway_policy_version": "gw-2",
                        "based_on": 1,
                        "capabilities": {"context_length": 32768, "tool_calling": True},
                    },
                ],
            }
        ],
    }


@pytest.fixture
def write(tmp_path):
    def write(document: dict | str, name: str = "registry.yaml"):
        path = tmp_path / name
        text = document if isinstance(document, str) else yaml.safe_dump(document, sort_keys=False)
        path.write_text(text)
        return path

    return write


def apply(path, *args) -> str:
    out = StringIO()
    call_command("apply", str(path), *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def refused(path, *args) -> str:
    """Apply a document that must be refused; return what the command wrote to stderr."""
    err = StringIO()
    with pytest.raises(CommandError, match="nothing was written"):
        call_command("apply", str(path), *args, stdout=StringIO(), stderr=err)
    return err.getvalue()


# ---------------------------------------------------------------- applying


def test_apply_creates_what_the_document_says_and_appends_events(owner, write):
    output = apply(write(registry()))

    service = Service.objects.get(slug="kb-assistant")
    assert service.tier == "production"
    assert sorted(service.task_types.values_list("slug", flat=True)) == ["chat", "rag"]
    assert service.tenants == ["support", "sales"]
    assert service.slo_ttft_p95_ms == 800
    assert str(service.slo_error_rate_pct) == "0.50"
    assert service.live_revision.number == 1
    assert list(Team.objects.get(slug="kb-team").members.all()) == [owner]
    awq = ModelAsset.objects.get(name="Qwen2.5-7B-Instruct-AWQ")
    assert [str(a) for a in awq.lineage()] == [
        "Qwen2.5-7B-Instruct@main",
        "Qwen2.5-7B-Instruct-AWQ@main",
    ]
    second = Revision.objects.get(service=service, number=2)
    assert second.model_asset == awq
    assert second.based_on.number == 1
    assert dict(second.capabilities.values_list("kind", "value")) == {
        "context_length": 32768,
        "tool_calling": True,
    }
    actions = set(Event.objects.values_list("action", flat=True))
    assert {
        "team.created",
        "license.created",
        "model_asset.registered",
        "runtime.created",
        "service.created",
        "revision.created",
        "capability.declared",
        "service.live_revision_changed",
    } <= actions
    events = Event.objects.count()
    assert f"{events} events appended" in output
    assert "+ create service kb-assistant" in output
    assert verify_chain().ok


def test_applying_the_same_document_twice_changes_nothing_the_second_time(owner, write):
    path = write(registry())
    apply(path)
    events = Event.objects.count()

    output = apply(path)

    assert Event.objects.count() == events
    assert "No changes" in output


def test_apply_updates_only_what_differs_with_before_and_after(owner, write):
    document = registry()
    apply(write(document))
    document["services"][0]["slos"]["ttft_p95_ms"] = 700
    document["services"][0]["revisions"][1]["notes"] = "Candidate: INT4 AWQ."
    events = Event.objects.count()

    output = apply(write(document))

    assert "slos.ttft_p95_ms: 800 → 700" in output
    assert "0 created, 2 updated" in output
    assert Event.objects.count() == events + 2
    update = Event.objects.filter(action="service.updated").get()
    assert json.loads(update.payload) == {
        "before": {"slo_ttft_p95_ms": 800},
        "after": {"slo_ttft_p95_ms": 700},
    }


def test_a_new_revision_in_the_document_is_created_with_the_next_number(owner, write):
    document = registry()
    apply(write(document))
    revisions = document["services"][0]["revisions"]
    revisions.append({**revisions[1], "number": 3, "based_on": 2, "gateway_policy_version": "gw-3"})
    document["services"][0]["live_revision"] = 3

    output = apply(write(document))

    service = Service.objects.get(slug="kb-assistant")
    assert service.live_revision.number == 3
    assert "+ create revision kb-assistant r3" in output
    assert "live_revision: 1 → 3" in output


def test_dry_run_prints_the_plan_and_writes_nothing(owner, write):
    output = apply(write(registry()), "--dry-run")

    assert "+ create service kb-assistant" in output
    assert "+ create revision kb-assistant r2" in output
    assert "+ create capability kb-assistant r2 tool_calling: true" in output
    assert "Nothing was written" in output
    assert Service.objects.count() == 0
    assert Event.objects.count() == 0


def test_dry_run_of_an_update_shows_each_field_before_and_after(owner, write):
    document = registry()
    apply(write(document))
    document["services"][0]["tier"] = "internal"
    events = Event.objects.count()

    output = apply(write(document), "--dry-run")

    assert "~ update service kb-assistant" in output
    assert "tier: production → internal" in output
    assert Service.objects.get(slug="kb-assistant").tier == "production"
    assert Event.objects.count() == events


def test_apply_as_a_user_is_held_to_their_permissions(owner, outsider, write):
    stderr = refused(write(registry()), "--actor", outsider.username)

    assert "teams[0]: permission denied: Only an administrator can create a team." in stderr
    assert Event.objects.count() == 0


# ---------------------------------------------------------------- errors name the path


def test_a_bad_digest_is_refused_with_its_path_and_nothing_is_written(owner, write):
    document = registry()
    document["model_assets"][1]["weights_digest"] = "sha256:ABC123"

    stderr = refused(write(document))

    assert (
        "model_assets[1].weights_digest: Expected 'sha256:' followed by 64 lowercase "
        "hexadecimal characters" in stderr
    )
    assert "registry.yaml:" in stderr  # the line of the entry, as an editor can jump to it
    assert Event.objects.count() == 0
    assert ModelAsset.objects.count() == 0


def test_an_unknown_key_is_refused_with_the_closest_known_key(owner, write):
    document = registry()
    document["services"][0]["teir"] = document["services"][0].pop("tier")

    stderr = refused(write(document))

    assert "services[0].teir: unknown key for a service; did you mean 'tier'?" in stderr


def test_a_value_of_the_wrong_type_is_refused_with_its_path(owner, write):
    document = registry()
    document["services"][0]["revisions"][0]["context_limit"] = "32k"
    document["runtimes"][0]["engine_version"] = 0.6

    stderr = refused(write(document))

    assert (
        "services[0].revisions[0].context_limit: expected a whole number, got text '32k'" in stderr
    )
    assert "runtimes[0].engine_version: expected text, got a number; quote it" in stderr


def test_a_yaml_syntax_error_names_its_line_and_column(owner, write):
    path = write("teams:\n  - slug: kb-team\n    name: KB\n   members: [olivia]\n")

    stderr = refused(path)

    assert f"{path}:4:4: YAML syntax error" in stderr


def test_a_duplicate_key_is_refused_with_both_lines(owner, write):
    stderr = refused(write("teams:\n  - slug: kb-team\n    name: KB\n    name: KB team\n"))

    assert "teams[0].name: duplicate key 'name'; it is already given on line 3" in stderr


def test_an_unknown_reference_is_refused_with_a_suggestion(owner, write):
    document = registry()
    document["services"][0]["revisions"][1]["runtime"] = "vllm-h10"

    stderr = refused(write(document))

    assert (
        "services[0].revisions[1].runtime: no runtime 'vllm-h10' in this document or the "
        "registry; did you mean 'vllm-h100'?" in stderr
    )


def test_a_production_revision_with_a_tag_only_image_is_refused(owner, write):
    document = registry()
    document["services"][0]["revisions"][1].update(runtime="ollama-dev", context_limit=8192)
    document["services"][0]["revisions"][1]["capabilities"] = {"context_length": 8192}

    stderr = refused(write(document))

    assert (
        "services[0].revisions[1].runtime: Production services need an image pinned by digest."
        in stderr
    )
    assert "rolling back to a revision that names only a tag" in stderr
    assert Service.objects.count() == 0


def test_a_retired_asset_cannot_go_into_a_new_revision(owner, write):
    document = registry()
    apply(write(document))
    services.retire_asset(ModelAsset.objects.get(name="Qwen2.5-7B-Instruct"), actor=None)
    revisions = document["services"][0]["revisions"]
    revisions.append({**revisions[0], "number": 3, "gateway_policy_version": "gw-3"})
    events = Event.objects.count()

    stderr = refused(write(document))

    assert "services[0].revisions[2].model_asset: Qwen2.5-7B-Instruct@main was retired on" in stderr
    assert "a retired asset cannot go into a new revision" in stderr
    assert Event.objects.count() == events


def test_changing_a_revision_that_has_served_says_to_add_a_new_revision(owner, write):
    document = registry()
    apply(write(document))  # r1 goes live, so it is locked
    first = document["services"][0]["revisions"][0]
    first["gateway_policy_version"] = "gw-1b"
    first["capabilities"]["streaming"] = "websocket"

    stderr = refused(write(document))

    assert (
        "services[0].revisions[0].gateway_policy_version: kb-assistant r1 is locked "
        "(r1 has served live traffic): its gateway_policy_version cannot change from gw-1 to "
        "gw-1b. Add a new revision (number: 3) with the change instead." in stderr
    )
    assert "services[0].revisions[0].capabilities.streaming: kb-assistant r1 is locked" in stderr
    assert Revision.objects.get(number=1).gateway_policy_version == "gw-1"


def test_changing_an_asset_that_has_served_says_to_register_a_new_one(owner, write):
    document = registry()
    apply(write(document))
    document["model_assets"][0]["weights_digest"] = digest("other weights")

    stderr = refused(write(document))

    assert "model_assets[0].weights_digest: Qwen2.5-7B-Instruct@main is locked" in stderr
    assert "Register the new content as a new asset (same name, a new `revision`)" in stderr


def test_one_bad_entry_leaves_every_other_entry_unwritten(owner, write):
    document = registry()
    document["services"][0]["revisions"][1]["capabilities"]["streaming"] = "carrier-pigeon"

    stderr = refused(write(document))

    assert "services[0].revisions[1].capabilities.streaming: streaming:" in stderr
    assert Team.objects.count() == 0
    assert Service.objects.count() == 0
    assert Capability.objects.count() == 0
    assert Event.objects.count() == 0


def test_a_gap_in_revision_numbers_is_refused(owner, write):
    document = registry()
    document["services"][0]["revisions"][1]["number"] = 3

    stderr = refused(write(document))

    assert (
        "services[0].revisions[1].number: revisions of kb-assistant are numbered in order: "
        "the next after r1 is 2, not 3" in stderr
    )


# ---------------------------------------------------------------- export and the round trip


def export() -> str:
    out = StringIO()
    call_command("export_registry", stdout=out)
    return out.getvalue()


def test_export_then_apply_on_an_empty_database_then_export_is_byte_identical(db, tmp_path):
    # The people the demo teams name exist in both databases; everything else does not.
    UserFactory(username="owner")
    UserFactory(username="owner2")
    UserFactory(username="sre")
    UserFactory(username="admin")
    first = tmp_path / "first.yaml"
    with transaction.atomic():
        call_command("seed_demo", "--quiet-logins", stdout=StringIO())
        call_command("export_registry", "--output", str(first), stdout=StringIO())
        transaction.set_rollback(True)  # back to an empty registry
    assert Service.objects.count() == 0
    assert Event.objects.count() == 0

    apply(first)

    assert export() == first.read_text()
    assert verify_chain().ok


def test_applying_an_export_to_its_own_database_changes_nothing(db, tmp_path):
    call_command("seed_demo", "--quiet-logins", stdout=StringIO())
    path = tmp_path / "registry.yaml"
    path.write_text(export())
    events = Event.objects.count()

    output = apply(path)

    assert "No changes" in output
    assert Event.objects.count() == events


def test_export_leaves_out_defaults_and_keeps_what_a_reader_needs(owner, write):
    apply(write(registry()))

    exported = yaml.safe_load(export())

    license_ = exported["licenses"][0]
    assert license_ == {"spdx_id": "Apache-2.0", "name": "Apache License 2.0", "kind": "permissive"}
    service = exported["services"][0]
    assert service["tier"] == "production" and service["exposure"] == "internal"
    assert "description" not in service and "review_cadence_days" not in service
    assert exported["model_assets"][0]["quantization"] == "bf16"
    assert "lifecycle" not in exported["model_assets"][0]


def test_the_example_in_the_format_documentation_applies_and_round_trips(owner, write):
    docs = Path(__file__).resolve().parents[2] / "docs" / "registry-format.md"
    example = re.search(r"## A complete example\n\n```yaml\n(.*?)```", docs.read_text(), re.S)
    path = write(example.group(1))

    output = apply(path)

    assert "Applied" in output
    live = Service.objects.get(slug="kb-assistant").live_revision
    assert live.number == 2
    assert (live.gateway_policy_version, live.gateway_policy.known) == ("v2", True)
    assert "No changes" in apply(path)


def test_the_example_in_the_readme_applies(owner, write):
    readme = Path(__file__).resolve().parents[2] / "README.md"
    section = readme.read_text().split("## The declarative registry", 1)[1]
    example = re.search(r"```yaml\n(.*?)```", section, re.S)
    path = write(example.group(1))

    assert "Applied" in apply(path)
    assert Service.objects.get(slug="kb-assistant").live_revision.number == 1
    assert "No changes" in apply(path)


# ---------------------------------------------------------------- gateway policy versions


def with_policies(document: dict) -> dict:
    """kb-assistant also serves sql, support-faq takes what it cannot answer, and its
    policy has two versions: gw-1, known by name only (r1 names it), and v2 with every
    section of the documented example (r2 names it)."""
    kb = document["services"][0]
    kb["task_types"] = ["chat", "rag", "sql"]
    kb["gateway_policies"] = [
        {
            "version": 1,
            "label": "gw-1",
            "note": "From before policies were versioned.",
            "document": None,
        },
        {"version": 2, "note": "Quotas for support.", "document": copy.deepcopy(EXAMPLE)},
    ]
    kb["revisions"][1]["gateway_policy_version"] = "v2"
    document["services"].append(
        {"slug": "support-faq", "name": "Support FAQ", "team": "kb-team", "tier": "internal"}
    )
    return document


def test_gateway_policies_round_trip_byte_identical(owner, write, tmp_path):
    first = tmp_path / "first.yaml"
    with transaction.atomic():
        apply(write(with_policies(registry())))
        call_command("export_registry", "--output", str(first), stdout=StringIO())
        transaction.set_rollback(True)
    assert GatewayPolicy.objects.count() == 0

    apply(first)

    assert export() == first.read_text()
    exported = yaml.safe_load(first.read_text())
    policies = exported["services"][0]["gateway_policies"]
    assert policies == [
        {
            "version": 1,
            "label": "gw-1",
            "note": "From before policies were versioned.",
            "document": None,
        },
        {"version": 2, "note": "Quotas for support.", "document": EXAMPLE},
    ]
    # Sections in the order the schema declares them, not jsonb's; `on` quoted for YAML.
    assert list(policies[1]["document"]) == list(SECTIONS)
    assert "'on': error" in first.read_text()
    assert "No changes" in apply(first)


def test_apply_records_the_versions_a_document_lists_before_the_revisions_naming_them(owner, write):
    output = apply(write(with_policies(registry())))

    service = Service.objects.get(slug="kb-assistant")
    unknown, known = GatewayPolicy.objects.filter(service=service).order_by("version")
    assert (unknown.version, unknown.label, unknown.known) == (1, "gw-1", False)
    assert unknown.note == "From before policies were versioned."
    assert (known.version, known.label, known.document) == (2, "v2", EXAMPLE)
    assert known.sha256 == document_sha256(EXAMPLE)
    revisions = Revision.objects.filter(service=service).order_by("number")
    assert [r.gateway_policy for r in revisions] == [unknown, known]
    payloads = [
        json.loads(event.payload)
        for event in Event.objects.filter(action="gateway_policy.created").order_by("sequence")
    ]
    assert [(p["label"], p["known"], p["sha256"]) for p in payloads] == [
        ("gw-1", False, unknown.sha256),
        ("v2", True, known.sha256),
    ]
    assert "+ create gateway policy kb-assistant v2  (services[0].gateway_policies[1])" in output
    assert verify_chain().ok


def test_reapplying_recorded_policy_versions_changes_nothing(owner, write):
    document = with_policies(registry())
    apply(write(document))
    events = Event.objects.count()
    # The same document with its keys in another order is the same version.
    document["services"][0]["gateway_policies"][1]["document"] = dict(
        reversed(list(EXAMPLE.items()))
    )

    output = apply(write(document))

    assert "No changes" in output
    assert Event.objects.count() == events
    assert GatewayPolicy.objects.count() == 2


def test_a_new_version_in_the_document_is_recorded_and_the_old_ones_stay(owner, write):
    document = with_policies(registry())
    apply(write(document))
    changed = copy.deepcopy(EXAMPLE)
    changed["limits"]["max_output_tokens"] = 2048
    document["services"][0]["gateway_policies"].append({"version": 3, "document": changed})

    output = apply(write(document))

    assert "+ create gateway policy kb-assistant v3" in output
    assert "1 created, 0 updated" in output
    assert GatewayPolicy.objects.get(label="v3").document["limits"]["max_output_tokens"] == 2048


def test_a_changed_document_of_a_recorded_version_is_refused(owner, write):
    document = with_policies(registry())
    apply(write(document))
    events = Event.objects.count()
    policy = document["services"][0]["gateway_policies"][1]
    policy["document"]["limits"]["max_output_tokens"] = 4096
    policy["document"]["tenants"][0]["rpm"] = 1200

    stderr = refused(write(document))

    assert (
        "services[0].gateway_policies[1].document: kb-assistant gateway policy version 2 (v2) "
        "is recorded with another document (it differs at limits.max_output_tokens, "
        "tenants[0].rpm). A recorded version never changes: record the change as a new "
        "version (version: 3) and name it in the revisions that use it." in stderr
    )
    assert GatewayPolicy.objects.get(label="v2").document == EXAMPLE
    assert Event.objects.count() == events


def test_a_document_given_to_a_version_known_by_name_only_is_refused(owner, write):
    document = with_policies(registry())
    apply(write(document))
    document["services"][0]["gateway_policies"][0]["document"] = EXAMPLE

    stderr = refused(write(document))

    assert (
        "services[0].gateway_policies[0].document: kb-assistant gateway policy version 1 "
        "(gw-1) is recorded with no document." in stderr
    )


def test_a_bad_policy_document_is_refused_at_its_place_and_nothing_is_written(owner, write):
    document = with_policies(registry())
    policy = document["services"][0]["gateway_policies"][1]["document"]
    policy["limits"]["max_output_tokens"] = -5
    policy["tenants"].append({"name": "legal", "rpm": 60})

    path = write(document)
    stderr = refused(path)

    line = next(
        number
        for number, text in enumerate(path.read_text().splitlines(), start=1)
        if "max_output_tokens: -5" in text
    )
    assert (
        f"{path}:{line}: services[0].gateway_policies[1].document.limits.max_output_tokens: "
        "-5 is less than the minimum of 1" in stderr
    )
    # r2 names the refused v2: skipped, not reported a second time.
    assert "revisions[1]" not in stderr
    # The registry's own check, once the schema's pass: a tenant the service does not list.
    document["services"][0]["gateway_policies"][1]["document"]["limits"]["max_output_tokens"] = 8
    stderr = refused(write(document))
    assert (
        "services[0].gateway_policies[1].document.tenants[1].name: legal is not a tenant of "
        "kb-assistant (its tenants: support, sales); add it to the service first." in stderr
    )
    assert Team.objects.count() == 0
    assert Service.objects.count() == 0
    assert GatewayPolicy.objects.count() == 0
    assert Event.objects.count() == 0


def test_a_refusal_after_the_policies_leaves_no_policy_written(owner, write):
    document = with_policies(registry())
    document["services"][0]["revisions"][1]["capabilities"]["streaming"] = "carrier-pigeon"

    stderr = refused(write(document))

    assert "services[0].revisions[1].capabilities.streaming" in stderr
    assert GatewayPolicy.objects.count() == 0
    assert Revision.objects.count() == 0
    assert Event.objects.count() == 0


def test_a_dry_run_shows_the_versions_it_would_record_and_writes_none(owner, write):
    output = apply(write(with_policies(registry())), "--dry-run")

    assert "+ create gateway policy kb-assistant gw-1" in output
    assert "+ create gateway policy kb-assistant v2" in output
    assert GatewayPolicy.objects.count() == 0


def test_a_revision_naming_a_version_nobody_declared_is_refused(owner, write):
    document = with_policies(registry())
    document["services"][0]["revisions"][1]["gateway_policy_version"] = "v3"

    stderr = refused(write(document))

    assert (
        "services[0].revisions[1].gateway_policy_version: no gateway policy v3 of kb-assistant "
        "in this document or the registry (it has gw-1, v2). Declare it under "
        "services[0].gateway_policies with its document, or name one that exists." in stderr
    )


def test_policy_versions_count_up_without_a_gap(owner, write):
    document = with_policies(registry())
    document["services"][0]["gateway_policies"][1]["version"] = 3
    document["services"][0]["revisions"][1]["gateway_policy_version"] = "v3"

    stderr = refused(write(document))

    assert (
        "services[0].gateway_policies[1].version: gateway policy versions of kb-assistant are "
        "numbered in order: the next after v1 is 2, not 3" in stderr
    )


def test_a_version_known_by_name_only_needs_its_name(owner, write):
    document = with_policies(registry())
    del document["services"][0]["gateway_policies"][0]["label"]

    stderr = refused(write(document))

    assert "services[0].gateway_policies[0].document: a version without a document" in stderr


def test_an_unquoted_on_in_a_policy_is_refused_with_a_hint(owner, write):
    text = yaml.safe_dump(with_policies(registry()), sort_keys=False).replace("'on':", "on:")
    assert "on: error" in text

    stderr = refused(write(text))

    assert (
        "services[0].gateway_policies[1].document.fallbacks[0]: a key YAML reads as true: "
        "unquoted on, off, yes and no are true or false in YAML; quote the key, e.g. "
        "'on': error" in stderr
    )


def test_a_tenant_added_by_the_same_document_may_be_in_its_new_policy(owner, write):
    document = with_policies(registry())
    apply(write(document))
    document["services"][0]["tenants"].append("legal")
    legal = copy.deepcopy(EXAMPLE)
    legal["tenants"].append({"name": "legal", "rpm": 60, "tpm": 20000})
    document["services"][0]["gateway_policies"].append({"version": 3, "document": legal})

    output = apply(write(document))

    assert 'tenants: ["support","sales"] → ["support","sales","legal"]' in output
    assert "+ create gateway policy kb-assistant v3" in output
