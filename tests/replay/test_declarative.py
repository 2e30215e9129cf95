"""Backends and sample sets in the registry YAML: `manage.py apply` and `export_registry`."""

from __future__ import annotations

import json
from io import StringIO

import pytest
import yaml
from django.core.management import call_command
from django.core.management.base import CommandError
from django_celery_beat.models import PeriodicTask

from ledger.models import Event
from replay.models import Backend, SampleSet, Schedule
from replay.services.schedules import crontab_text
from tests.ledger.factories import digest

pytestmark = pytest.mark.django_db

SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}


def registry() -> dict:
    """One service with two revisions, a smoke set inline, two backends, two schedules."""
    asset = {
        "name": "Qwen2.5-7B-Instruct",
        "revision": "main",
        "team": "kb-team",
        "family": "qwen2.5",
        "source_repository": "Qwen/Qwen2.5-7B-Instruct",
        "license": "Apache-2.0",
        "weights_digest": digest("weights"),
        "tokenizer_digest": digest("tokenizer"),
        "chat_template_digest": digest("template"),
        "generation_config_digest": digest("generation"),
        "config_digest": digest("config"),
    }
    return {
        "version": 1,
        "teams": [{"slug": "kb-team", "name": "Knowledge base team"}],
        "licenses": [{"spdx_id": "Apache-2.0", "name": "Apache License 2.0", "kind": "permissive"}],
        "model_assets": [asset],
        "runtimes": [
            {
                "name": "vllm-h100",
                "team": "kb-team",
                "engine": "vllm",
                "engine_version": "0.6.3",
                "image": f"registry.example.com/vllm-openai:v0.6.3@{digest('vllm')}",
                "launch_parameters": {"max_model_len": 32768},
            }
        ],
        "services": [
            {
                "slug": "kb-assistant",
                "name": "Knowledge-base assistant",
                "team": "kb-team",
                "tier": "production",
                "live_revision": 1,
                "revisions": [
                    {
                        "number": number,
                        "model_asset": "Qwen2.5-7B-Instruct@main",
                        "runtime": "vllm-h100",
                        "context_limit": 32768,
                        "gateway_policy_version": f"gw-{number}",
                    }
                    for number in (1, 2)
                ],
            }
        ],
        "sample_sets": [
            {
                "name": "kb-smoke",
                "description": "What the assistant must keep doing.",
                "samples": [
                    {
                        "key": "capital",
                        "category": "short_qa",
                        "messages": [{"role": "user", "content": "Capital of France?"}],
                        "checks": [{"type": "contains", "value": "Paris"}],
                        "repeat": 3,
                        "min_pass_rate": 0.67,
                    },
                    {
                        "key": "answer-json",
                        "category": "structured_json",
                        "messages": [{"role": "user", "content": "Answer as JSON."}],
                        "checks": [{"type": "json_schema", "schema": SCHEMA}],
                        "sensitive": True,
                    },
                ],
            }
        ],
        "backends": [
            {
                "name": "kb-assistant-canary",
                "service": "kb-assistant",
                "revision": 2,
                "base_url": "http://10.0.0.6:8000",
                "model_name": "qwen2.5-7b-instruct",
                "engine": "vllm",
                "schedules": [{"sample_set": "kb-smoke", "crontab": "15 * * * *"}],
            },
            {
                "name": "kb-assistant-live",
                "service": "kb-assistant",
                "revision": 1,
                "base_url": "http://10.0.0.5:8000",
                "model_name": "qwen2.5-7b-instruct",
                "engine": "vllm",
                "credential_env": "LEDGER_BACKEND_KEY_KB_ASSISTANT",
                "concurrency_limit": 16,
                "first_token_timeout_s": 12.5,
                "schedules": [
                    {"sample_set": "kb-smoke", "crontab": "0 */6 * * *"},
                    {
                        "sample_set": "kb-smoke",
                        "crontab": "30 3 * * *",
                        "purpose": "rollback_verification",
                        "enabled": False,
                    },
                ],
            },
        ],
    }


@pytest.fixture
def write(tmp_path):
    def write(document, name: str = "registry.yaml"):
        path = tmp_path / name
        text = document if isinstance(document, str) else yaml.safe_dump(document, sort_keys=False)
        path.write_text(text)
        return path

    return write


def apply(path, *args) -> str:
    out = StringIO()
    call_command("apply", str(path), *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def refused(path) -> list[str]:
    err = StringIO()
    with pytest.raises(CommandError, match="nothing was written"):
        call_command("apply", str(path), stdout=StringIO(), stderr=err)
    return err.getvalue().splitlines()


def export() -> str:
    out = StringIO()
    call_command("export_registry", stdout=out)
    return out.getvalue()


def test_apply_creates_backends_sample_sets_and_schedules_through_the_domain(write):
    output = apply(write(registry()))

    assert "+ create sample set kb-smoke@1  (sample_sets[0])" in output
    assert "+ create backend kb-assistant-live  (backends[1])" in output
    assert "+ create schedule kb-smoke on kb-assistant-live (rollback_verification)" in output
    live = Backend.objects.get(name="kb-assistant-live")
    assert (live.revision.number, live.concurrency_limit, live.first_token_timeout_s) == (
        1,
        16,
        12.5,
    )
    assert live.credential_env == "LEDGER_BACKEND_KEY_KB_ASSISTANT"
    smoke = SampleSet.objects.get()
    assert (smoke.version, smoke.description) == (1, "What the assistant must keep doing.")
    assert smoke.samples.get(key="answer-json").sensitive is True
    schedules = {
        (s.backend.name, s.purpose): (crontab_text(s), s.periodic_task.enabled)
        for s in Schedule.objects.select_related("backend", "periodic_task__crontab")
    }
    assert schedules == {
        ("kb-assistant-canary", "regular"): ("15 * * * *", True),
        ("kb-assistant-live", "regular"): ("0 */6 * * *", True),
        ("kb-assistant-live", "rollback_verification"): ("30 3 * * *", False),
    }
    actions = set(Event.objects.values_list("action", flat=True))
    assert {
        "replay.sample_set_imported",
        "replay.backend_created",
        "replay.schedule_created",
    } <= actions


def test_applying_the_same_document_twice_changes_nothing(write):
    path = write(registry())
    apply(path)
    events = Event.objects.count()

    output = apply(path)

    assert "No changes" in output
    assert Event.objects.count() == events


def test_changes_are_applied_as_updates_and_a_changed_set_becomes_version_two(write):
    apply(write(registry()))
    document = registry()
    document["backends"][1]["concurrency_limit"] = 32
    document["backends"][1]["revision"] = 2
    document["backends"][1]["schedules"][0]["crontab"] = "0 */4 * * *"
    document["sample_sets"][0]["samples"][0]["repeat"] = 5

    output = apply(write(document))

    assert "~ update sample set kb-smoke" in output and "    version: 1 → 2" in output
    assert "    concurrency_limit: 16 → 32" in output
    assert "    revision: 1 → 2" in output
    assert "    crontab: 0 */6 * * * → 0 */4 * * *" in output
    live = Backend.objects.get(name="kb-assistant-live")
    assert (live.concurrency_limit, live.revision.number) == (32, 2)
    assert SampleSet.objects.filter(name="kb-smoke").count() == 2


def test_a_dry_run_writes_nothing(write):
    output = apply(write(registry()), "--dry-run")

    assert "Nothing was written." in output
    assert not Backend.objects.exists() and not SampleSet.objects.exists()
    assert not Schedule.objects.exists()


def test_samples_can_live_in_a_jsonl_file_beside_the_document(write, tmp_path):
    document = registry()
    samples = document["sample_sets"][0].pop("samples")
    (tmp_path / "sets").mkdir()
    (tmp_path / "sets" / "kb-smoke.jsonl").write_text(
        "".join(json.dumps(sample) + "\n" for sample in samples)
    )
    document["sample_sets"][0]["file"] = "sets/kb-smoke.jsonl"

    apply(write(document))

    assert sorted(SampleSet.objects.get().samples.values_list("key", flat=True)) == [
        "answer-json",
        "capital",
    ]


def test_export_writes_backends_and_sample_sets_back_and_round_trips(write):
    apply(write(registry()))

    text = export()
    document = yaml.safe_load(text)

    assert [b["name"] for b in document["backends"]] == ["kb-assistant-canary", "kb-assistant-live"]
    live = document["backends"][1]
    assert live["first_token_timeout_s"] == 12.5 and "idle_timeout_s" not in live
    assert live["schedules"] == [
        {"sample_set": "kb-smoke", "crontab": "0 */6 * * *"},
        {
            "sample_set": "kb-smoke",
            "crontab": "30 3 * * *",
            "purpose": "rollback_verification",
            "enabled": False,
        },
    ]
    assert document["sample_sets"][0]["samples"][0]["key"] == "answer-json"
    assert "No changes" in apply(write(text, "export.yaml"))


def test_export_then_apply_to_empty_replay_tables_gives_the_same_bytes(write):
    apply(write(registry()))
    first = export()
    # The registry rows stay; the replay sections are rebuilt from the exported text.
    PeriodicTask.objects.filter(task="replay_scheduled").delete()  # cascades to Schedule
    Backend.objects.all().delete()
    SampleSet.objects.all().delete()

    apply(write(first, "export.yaml"))

    assert export() == first


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (
            lambda d: d["backends"][0].update(revision=9),
            "backends[0].revision: service kb-assistant has no revision 9 in this document or the registry",
        ),
        (
            lambda d: d["backends"][0].update(base_url="http://user:pw@10.0.0.6"),
            "backends[0].base_url: The URL must not carry a user or password",
        ),
        (
            lambda d: d["backends"][0].update(credential="sk-123"),
            "backends[0].credential: unknown key for a backend; did you mean 'credential_env'?",
        ),
        (
            lambda d: d["backends"][0]["schedules"][0].update(crontab="0 25 * * *"),
            "backends[0].schedules[0].crontab: Field 2 (hour) '25' is not valid",
        ),
        (
            lambda d: d["sample_sets"][0]["samples"][1]["checks"][0].update(schema={"type": 7}),
            "sample_sets[0].samples[1].checks[0].schema.type: 7 is not valid under any of the given schemas",
        ),
        (
            lambda d: d.update(backend=[]),
            "backend: unknown key for a registry document; did you mean 'backends'?",
        ),
    ],
)
def test_a_bad_entry_is_refused_naming_its_path_and_line(write, change, problem):
    document = registry()
    change(document)

    lines = refused(write(document))

    assert any(problem in line for line in lines), lines
    assert all(line.split(":")[1].strip().isdigit() for line in lines)  # registry.yaml:LINE: …
    assert not Backend.objects.exists() and not SampleSet.objects.exists()
