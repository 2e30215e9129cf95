"""The revision diff: which changes are listed, which break callers, and why."""

from __future__ import annotations

import pytest

from ledger import queries, services
from ledger.engines import CONTEXT_FLAG
from ledger.models import Revision
from ledger.queries.diff import RULES
from tests.ledger.factories import (
    ModelAssetFactory,
    RevisionFactory,
    RuntimeFactory,
    ServiceFactory,
    digest,
)

ASSET_FIELDS = [
    "family",
    "source_repository",
    "weights_digest",
    "quantization",
    "tokenizer_id",
    "tokenizer_digest",
    "chat_template_digest",
    "generation_config_digest",
    "config_digest",
]
RUNTIME_FIELDS = ["engine", "engine_version", "image", "gpu_model", "gpu_count", "gpu_memory_gb"]


@pytest.fixture
def r1(team):
    """kb-assistant r1: a vLLM runtime with max_model_len 32768, context limit 32768."""
    service = ServiceFactory(team=team, slug="kb-assistant")
    return RevisionFactory(service=service, model_asset__tokenizer_id="Qwen/Qwen2.5-7B-Instruct")


def asset_like(asset, **changes):
    """Another asset that differs from `asset` only in `changes`."""
    fields = {name: getattr(asset, name) for name in ASSET_FIELDS}
    fields.update({"revision": "v2", **changes})
    return ModelAssetFactory(team=asset.team, name=asset.name, **fields)


def runtime_like(runtime, *, launch_parameters=None, **changes):
    """Another runtime that differs from `runtime` only in `changes`; launch parameters
    are merged into the old ones (None drops a flag)."""
    fields = {name: getattr(runtime, name) for name in RUNTIME_FIELDS}
    fields.update(changes)
    parameters = {**runtime.launch_parameters, **(launch_parameters or {})}
    parameters = {key: value for key, value in parameters.items() if value is not None}
    return RuntimeFactory(team=runtime.team, launch_parameters=parameters, **fields)


def next_revision(revision, **overrides):
    return services.new_revision_from(revision, actor=None, **overrides)


def declare(revision, **capabilities):
    for kind, value in capabilities.items():
        services.declare_capability(revision, actor=None, kind=kind, value=value)


def diff(a, b):
    a, b = (Revision.objects.with_parts().get(pk=r.pk) for r in (a, b))
    return queries.revision_diff(a, b)


def only(changes):
    assert len(changes) == 1, changes
    return changes[0]


# ---------------------------------------------------------------- nothing changes


def test_revisions_that_run_the_same_thing_have_no_changes(r1):
    r2 = next_revision(r1)
    declare(r1, structured_output=["json_schema", "regex"], tool_calling=True)
    # The same modes in another order are the same declaration.
    declare(r2, structured_output=["regex", "json_schema"], tool_calling=True)

    assert diff(r1, r2) == []
    assert diff(r1, r1) == []


def test_the_diff_reads_both_revisions_capabilities_in_one_query(r1, django_assert_num_queries):
    r2 = next_revision(r1, gateway_policy_version="gw-2")
    declare(r1, tool_calling=True, streaming="sse")
    declare(r2, tool_calling=False)
    a, b = (Revision.objects.with_parts().get(pk=r.pk) for r in (r1, r2))

    # The capabilities of both revisions; the parts came with the revisions.
    with django_assert_num_queries(1):
        changes = queries.revision_diff(a, b)

    assert {c["field"] for c in changes} == {
        "capabilities.streaming",
        "capabilities.tool_calling",
        "gateway_policy_version",
    }


# ---------------------------------------------------------------- one test per breaking kind


def test_a_smaller_context_window_breaks_and_says_what_gets_refused(team):
    service = ServiceFactory(team=team)
    small_runtime = RuntimeFactory(team=team, launch_parameters={"max_model_len": 8192})
    r1 = RevisionFactory(service=service, runtime=small_runtime, context_limit=32768)
    r2 = next_revision(r1, context_limit=8192)

    assert diff(r1, r2) == [
        {
            "field": "context_limit",
            "from": 32768,
            "to": 8192,
            "breaking": True,
            "why": "context window shrinks from 32768 to 8192 tokens: requests longer than "
            "8192 tokens will be refused",
        }
    ]
    grown = only(diff(r2, r1))
    assert not grown["breaking"]
    assert grown["why"] == "context window grows from 8192 to 32768 tokens"


def test_lowering_the_engines_context_flag_breaks(r1):
    r2 = next_revision(
        r1,
        runtime=runtime_like(r1.runtime, launch_parameters={"max_model_len": 8192}),
        context_limit=8192,
    )

    changes = diff(r1, r2)

    assert [(c["field"], c["breaking"]) for c in changes] == [
        ("context_limit", True),
        ("launch_parameters.max_model_len", True),
    ]
    assert changes[1]["why"] == (
        "max_model_len drops from 32768 to 8192 tokens: the engine refuses requests longer "
        "than 8192 tokens"
    )


def test_a_declared_context_length_lowered_breaks(r1):
    r2 = next_revision(r1)
    declare(r1, context_length=32768)
    declare(r2, context_length=16384)

    change = only(diff(r1, r2))

    assert change["field"] == "capabilities.context_length"
    assert change["breaking"]
    assert "requests longer than 16384 tokens will be refused" in change["why"]


def test_losing_a_structured_output_mode_breaks_and_names_the_mode(r1):
    r2 = next_revision(r1)
    r3 = next_revision(r1)
    declare(r1, structured_output=["json_schema", "regex"])
    declare(r2, structured_output=["regex"])

    lost = only(diff(r1, r2))
    withdrawn = only(diff(r1, r3))
    gained = only(diff(r2, r1))

    assert lost == {
        "field": "capabilities.structured_output",
        "from": ["json_schema", "regex"],
        "to": ["regex"],
        "breaking": True,
        "why": "structured output no longer offers json_schema: requests asking for it will fail",
    }
    assert withdrawn["breaking"]
    assert withdrawn["to"] is None
    assert "no longer offers json_schema, regex" in withdrawn["why"]
    assert not gained["breaking"]
    assert gained["why"] == "structured output now also offers json_schema"


def test_losing_tool_calling_breaks(r1):
    off, undeclared = next_revision(r1), next_revision(r1)
    declare(r1, tool_calling=True)
    declare(off, tool_calling=False)

    turned_off = only(diff(r1, off))
    withdrawn = only(diff(r1, undeclared))
    turned_on = only(diff(off, r1))
    false_withdrawn = only(diff(off, undeclared))

    assert turned_off["breaking"]
    assert "agents that call tools break" in turned_off["why"]
    assert withdrawn["breaking"]
    assert not turned_on["breaking"]
    assert not false_withdrawn["breaking"]
    assert false_withdrawn["why"] == "no longer declared"


def test_a_changed_tool_call_parser_breaks_and_a_new_one_does_not(r1):
    hermes = next_revision(
        r1,
        runtime=runtime_like(
            r1.runtime,
            launch_parameters={"tool_call_parser": "hermes", "enable_auto_tool_choice": True},
        ),
    )
    llama = next_revision(
        hermes,
        runtime=runtime_like(hermes.runtime, launch_parameters={"tool_call_parser": "llama3_json"}),
    )

    changed = only(diff(hermes, llama))
    added = diff(r1, hermes)
    removed = diff(hermes, r1)

    assert changed["field"] == "launch_parameters.tool_call_parser"
    assert changed["breaking"]
    assert changed["why"].startswith("tool calls were parsed by hermes, now llama3_json")
    assert [(c["field"], c["breaking"]) for c in added] == [
        ("launch_parameters.enable_auto_tool_choice", False),
        ("launch_parameters.tool_call_parser", False),
    ]
    assert added[1]["why"] == "tool calls are now parsed by hermes"
    assert [(c["field"], c["breaking"]) for c in removed] == [
        ("launch_parameters.enable_auto_tool_choice", True),
        ("launch_parameters.tool_call_parser", True),
    ]


def test_a_changed_reasoning_parser_or_grammar_backend_breaks(team):
    service = ServiceFactory(team=team)
    sglang = RuntimeFactory(
        team=team,
        engine="sglang",
        launch_parameters={
            "context_length": 32768,
            "reasoning_parser": "deepseek-r1",
            "grammar_backend": "xgrammar",
        },
    )
    r1 = RevisionFactory(service=service, runtime=sglang)
    r2 = next_revision(
        r1,
        runtime=runtime_like(
            sglang, launch_parameters={"reasoning_parser": "qwen3", "grammar_backend": "outlines"}
        ),
    )

    changes = diff(r1, r2)

    assert [(c["field"], c["breaking"]) for c in changes] == [
        ("launch_parameters.grammar_backend", True),
        ("launch_parameters.reasoning_parser", True),
    ]
    assert "xgrammar to outlines" in changes[0]["why"]
    assert "reasoning_content" in changes[1]["why"]


def test_vllms_guided_decoding_backend_set_where_it_was_default_breaks(r1):
    r2 = next_revision(
        r1,
        runtime=runtime_like(r1.runtime, launch_parameters={"guided_decoding_backend": "outlines"}),
    )

    change = only(diff(r1, r2))

    assert change["breaking"]
    assert change["why"].startswith(
        "the structured-output backend (guided_decoding_backend) changes from unset to outlines"
    )


def test_a_changed_tokenizer_breaks(r1):
    new_files = next_revision(
        r1, model_asset=asset_like(r1.model_asset, tokenizer_digest=digest("tokenizer v2"))
    )
    new_id = next_revision(
        r1, model_asset=asset_like(r1.model_asset, tokenizer_id="Qwen/Qwen3-8B", revision="v3")
    )

    files = diff(r1, new_files)
    ids = diff(r1, new_id)

    assert [(c["field"], c["breaking"]) for c in files] == [
        ("tokenizer_digest", True),
        ("model_asset", False),
    ]
    assert "token counts change" in files[0]["why"]
    assert files[1]["from"] == f"{r1.model_asset.name}@main"
    assert files[1]["to"] == f"{r1.model_asset.name}@v2"
    assert ids[0]["field"] == "tokenizer_id"
    assert ids[0]["why"].startswith(
        "the tokenizer changes from Qwen/Qwen2.5-7B-Instruct to Qwen/Qwen3-8B"
    )


def test_a_changed_chat_template_breaks(r1):
    r2 = next_revision(
        r1, model_asset=asset_like(r1.model_asset, chat_template_digest=digest("template v2"))
    )

    change = diff(r1, r2)[0]

    assert change["field"] == "chat_template_digest"
    assert change["breaking"]
    assert change["from"] == r1.model_asset.chat_template_digest
    assert "prompts are rendered differently" in change["why"]


def test_a_changed_generation_config_breaks_as_default_sampling(r1):
    r2 = next_revision(
        r1, model_asset=asset_like(r1.model_asset, generation_config_digest=digest("gen v2"))
    )

    change = diff(r1, r2)[0]

    assert change["field"] == "generation_config_digest"
    assert change["breaking"]
    assert change["why"].startswith("default sampling may have changed")


def test_lowered_max_concurrency_breaks(r1):
    r2 = next_revision(
        r1, runtime=runtime_like(r1.runtime, launch_parameters={"max_num_seqs": 128})
    )
    r3 = next_revision(r2, runtime=runtime_like(r2.runtime, launch_parameters={"max_num_seqs": 64}))
    declare(r2, max_concurrency=128)
    declare(r3, max_concurrency=64)

    lowered = diff(r2, r3)
    raised = diff(r3, r2)

    assert [(c["field"], c["breaking"]) for c in lowered] == [
        ("capabilities.max_concurrency", True),
        ("launch_parameters.max_num_seqs", True),
    ]
    assert lowered[0]["why"].startswith(
        "the declared max concurrency drops from 128 to 64: tenants sized for 128"
    )
    assert lowered[1]["why"].startswith("max_num_seqs drops from 128 to 64: at most 64 requests")
    assert not any(c["breaking"] for c in raised)
    # Newly capped where the engine's default applied: listed, not judged against a default.
    first_caps = diff(r1, r2)
    assert [(c["field"], c["from"], c["to"], c["breaking"]) for c in first_caps] == [
        ("capabilities.max_concurrency", None, 128, False),
        ("launch_parameters.max_num_seqs", None, 128, False),
    ]


def test_a_changed_streaming_protocol_breaks_unless_it_did_not_stream(r1):
    websocket, none = next_revision(r1), next_revision(r1)
    declare(r1, streaming="sse")
    declare(websocket, streaming="websocket")
    declare(none, streaming="none")

    assert only(diff(r1, websocket))["breaking"]
    assert only(diff(r1, none))["breaking"]
    assert only(diff(none, r1))["breaking"] is False


def test_a_renamed_served_model_breaks(r1):
    r2 = next_revision(
        r1, runtime=runtime_like(r1.runtime, launch_parameters={"served_model_name": "kb-v2"})
    )
    r3 = next_revision(
        r2, runtime=runtime_like(r2.runtime, launch_parameters={"served_model_name": "kb-v3"})
    )

    change = only(diff(r2, r3))

    assert change["breaking"]
    assert "callers asking for model kb-v2 get 404" in change["why"]


# ---------------------------------------------------------------- listed, not breaking


def test_gateway_policy_and_memory_utilization_are_listed_but_do_not_break(r1):
    r2 = next_revision(
        r1,
        runtime=runtime_like(r1.runtime, launch_parameters={"gpu_memory_utilization": 0.85}),
        gateway_policy_version="gw-2",
    )

    changes = diff(r1, r2)

    assert changes == [
        {
            "field": "gateway_policy_version",
            "from": "gw-1",
            "to": "gw-2",
            "breaking": False,
            "why": "the gateway policy changes from gw-1 to gw-2",
        },
        {
            "field": "launch_parameters.gpu_memory_utilization",
            "from": None,
            "to": 0.85,
            "breaking": False,
            "why": "",
        },
    ]
    assert not queries.has_breaking(changes)


def test_quantization_engine_image_and_hardware_changes_are_listed_without_breaking(r1):
    asset = asset_like(
        r1.model_asset, quantization="int4-awq", weights_digest=digest("awq weights")
    )
    runtime = runtime_like(
        r1.runtime,
        engine_version="0.8.5",
        image=f"registry.example.com/vllm-openai:v0.8.5@{digest('0.8.5')}",
        gpu_model="L40S-48GB",
        gpu_count=2,
        gpu_memory_gb=48,
        launch_parameters={"tensor_parallel_size": 2},
    )
    r2 = next_revision(r1, model_asset=asset, runtime=runtime)

    changes = {c["field"]: c for c in diff(r1, r2)}

    assert set(changes) == {
        "model_asset",
        "quantization",
        "weights_digest",
        "engine_version",
        "image",
        "image_digest",
        "gpu_model",
        "gpu_count",
        "gpu_memory_gb",
        "launch_parameters.tensor_parallel_size",
    }
    assert not any(c["breaking"] for c in changes.values())
    assert changes["image"] == {
        "field": "image",
        "from": "registry.example.com/vllm-openai:v0.6.3",
        "to": "registry.example.com/vllm-openai:v0.8.5",
        "breaking": False,
        "why": "another container image",
    }
    assert changes["quantization"]["to"] == "int4-awq"


def test_an_image_that_loses_its_digest_pin_is_said(r1):
    r2 = next_revision(
        r1, runtime=runtime_like(r1.runtime, image="registry.example.com/vllm-openai:v0.6.3")
    )

    change = only(diff(r1, r2))

    assert change["field"] == "image_digest"
    assert change["to"] is None
    assert "no longer pinned by digest" in change["why"]


def test_breaking_changes_come_first_then_by_field(r1):
    asset = asset_like(r1.model_asset, chat_template_digest=digest("t2"))
    runtime = runtime_like(
        r1.runtime, launch_parameters={"enable_prefix_caching": True, "max_num_seqs": 8}
    )
    r2 = next_revision(r1, model_asset=asset, runtime=runtime, gateway_policy_version="gw-2")
    r3 = next_revision(r2, runtime=runtime_like(runtime, launch_parameters={"max_num_seqs": 4}))
    declare(r2, tool_calling=True)
    declare(r3, tool_calling=False)

    changes = diff(r1, r2) + diff(r2, r3)

    assert [(c["field"], c["breaking"]) for c in diff(r1, r2)] == [
        ("chat_template_digest", True),
        ("capabilities.tool_calling", False),
        ("gateway_policy_version", False),
        ("launch_parameters.enable_prefix_caching", False),
        ("launch_parameters.max_num_seqs", False),
        ("model_asset", False),
    ]
    assert [(c["field"], c["breaking"]) for c in diff(r2, r3)] == [
        ("capabilities.tool_calling", True),
        ("launch_parameters.max_num_seqs", True),
    ]
    assert len(queries.breaking_changes(changes)) == 3


def test_every_engines_context_flag_breaks_when_lowered():
    for engine, flag in CONTEXT_FLAG.items():
        rule = RULES[f"launch_parameters.{flag}"]
        assert rule.breaks(32768, 8192), engine
        assert not rule.breaks(8192, 32768), engine


def test_the_overview_in_the_module_docstring_names_only_breaking_rules():
    import re

    from ledger.queries import diff as module
    from ledger.queries.diff import never

    table = module.__doc__.split("What breaks callers", 1)[1].split("Everything else", 1)[0]
    named = re.findall(r"`([a-z_.]+)`", table)

    assert len(named) >= 17
    for field in named:
        assert RULES[field].breaks is not never, field


# ---------------------------------------------------------------- table 6-3's risky flags


def test_prefix_caching_kv_cache_type_and_engine_quantization_changes_say_their_risk(r1):
    runtime = runtime_like(
        r1.runtime,
        launch_parameters={
            "enable_prefix_caching": True,
            "kv_cache_dtype": "fp8",
            "quantization": "awq_marlin",
        },
    )
    r2 = next_revision(r1, runtime=runtime)
    r3 = next_revision(
        r2,
        runtime=runtime_like(runtime, launch_parameters={"enable_prefix_caching": False}),
    )

    changes = {c["field"]: c["why"] for c in diff(r1, r2)}
    assert changes["launch_parameters.kv_cache_dtype"] == (
        "the KV cache is now stored as fp8: a smaller type holds more tokens and can shift "
        "answers; replay the quality sets and load-test again"
    )
    assert changes["launch_parameters.quantization"].startswith(
        "the engine now quantizes the weights as awq_marlin: answer quality and structured "
        "output may shift"
    )
    assert (
        "time to first token on repeated prefixes changes"
        in (changes["launch_parameters.enable_prefix_caching"])
    )
    turned_off = only(diff(r2, r3))
    assert turned_off["why"] == (
        "prefix caching (enable_prefix_caching) goes from true to false: time to first "
        "token on repeated prefixes changes, and a prefix cache outlives a rollback unless "
        "flushed"
    )
    assert not turned_off["breaking"]


def test_speculative_decoding_turned_on_or_off_is_said_for_each_engines_flag(r1):
    config = {
        "method": "eagle",
        "model": "yuhuili/EAGLE-LLaMA3-Instruct-8B",
        "num_speculative_tokens": 5,
    }
    r2 = next_revision(
        r1, runtime=runtime_like(r1.runtime, launch_parameters={"speculative_config": config})
    )
    on = only(diff(r1, r2))
    assert on["field"] == "launch_parameters.speculative_config"
    assert on["why"].startswith("speculative decoding is turned on (speculative_config: ")
    assert "load-test again" in on["why"]
    off = only(diff(r2, r1))
    assert off["why"].startswith("speculative decoding is turned off (speculative_config was ")
    for flag in ("speculative_algorithm", "speculate", "draft_model"):
        assert RULES[f"launch_parameters.{flag}"] is RULES["launch_parameters.speculative_config"]


def test_the_engines_speculative_flags_are_checked_like_any_known_flag():
    from ledger.engines import check_launch_parameters

    assert check_launch_parameters("vllm", {"speculative_config": "eagle"}).errors == {
        "speculative_config": "expected an object, got str"
    }
    sglang = check_launch_parameters("sglang", {"speculative_num_draft_tokens": 0})
    assert sglang.errors == {"speculative_num_draft_tokens": "must be at least 1, got 0"}
    tgi = check_launch_parameters("tgi", {"speculate": 3})
    assert tgi.errors == {} and tgi.warnings == []


def test_a_first_revision_lists_what_it_sets_as_changes_from_unset(r1):
    r1 = Revision.objects.with_parts().get(pk=r1.pk)
    changes = {c["field"]: c for c in queries.revision_diff(None, r1)}
    assert changes["model_asset"]["from"] is None
    assert changes["launch_parameters.max_model_len"]["to"] == 32768
    assert not any(c["breaking"] for c in changes.values())
