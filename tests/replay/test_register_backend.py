"""`manage.py register_backend`: one backend without a registry document."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from ledger.engines import Engine
from ledger.models import Event
from replay.models import Backend
from tests.ledger.factories import RevisionFactory
from tests.replay.helpers import go_live

pytestmark = pytest.mark.django_db


def _call(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("register_backend", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.fixture
def live():
    revision = RevisionFactory(service__slug="kb-assistant")
    go_live(revision)
    return revision


def _register(*extra: str) -> tuple[str, str]:
    return _call(
        "kb-vllm",
        "--service=kb-assistant",
        "--base-url=http://127.0.0.1:8000",
        "--model=kb-qwen",
        *extra,
    )


def test_registers_a_backend_on_the_live_revision_with_its_runtime_engine(live):
    out, err = _register(
        "--credential-env=LEDGER_BACKEND_KEY_KB",
        "--concurrency-limit=16",
        "--first-token-timeout=90",
        "--total-timeout=900",
    )

    backend = Backend.objects.get(name="kb-vllm")
    assert backend.revision == live
    assert (backend.engine, backend.model_name, backend.base_url) == (
        "vllm",
        "kb-qwen",
        "http://127.0.0.1:8000",
    )
    assert (backend.concurrency_limit, backend.first_token_timeout_s) == (16, 90)
    assert backend.total_timeout_s == 900
    assert out.startswith("Registered backend kb-vllm")
    # The key is not in this process's environment: said, not refused.
    assert "LEDGER_BACKEND_KEY_KB is not set here" in err
    event = Event.objects.get(action="replay.backend_created")
    assert event.payload_data["after"]["credential_env"] == "LEDGER_BACKEND_KEY_KB"


def test_a_runtime_of_a_generic_openai_compatible_server(db):
    revision = RevisionFactory(
        service__slug="kb-assistant", runtime__engine="openai-compatible", runtime__name="gen"
    )

    _register(f"--revision={revision.number}")

    assert revision.runtime.engine == "openai-compatible"
    assert Backend.objects.get(name="kb-vllm").engine == Engine.OPENAI_COMPATIBLE


def test_the_backend_takes_the_engine_values_a_runtime_takes(live, capsys):
    _register("--engine=openai-compatible")

    assert Backend.objects.get(name="kb-vllm").engine == Engine.OPENAI_COMPATIBLE
    with pytest.raises(CommandError, match="invalid choice: 'other'"):
        _register("--engine=other", "--update")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--base-url=http://169.254.169.254/latest"], "--base-url: "),
        (
            ["--credential-env=SECRET_KEY"],
            "--credential-env: SECRET_KEY is not a backend credential",
        ),
        (["--concurrency-limit=0"], "--concurrency-limit: "),
        (["--first-token-timeout=0"], "--first-token-timeout: "),
    ],
)
def test_refusals_name_the_option_and_write_nothing(live, extra, message):
    args = ["kb-vllm", "--service=kb-assistant", "--model=kb-qwen"]
    if not any(a.startswith("--base-url") for a in extra):
        args.append("--base-url=http://127.0.0.1:8000")

    with pytest.raises(CommandError) as refused:
        _call(*args, *extra)

    assert message in str(refused.value)
    assert not Backend.objects.exists()
    assert not Event.objects.filter(action="replay.backend_created").exists()


def test_missing_options_are_named(live):
    with pytest.raises(CommandError, match="--base-url, --model: required"):
        _call("kb-vllm", "--service=kb-assistant")


def test_unknown_service_and_revision_are_named(live):
    with pytest.raises(CommandError, match="--service: no service 'kb-asistant'"):
        _call("x", "--service=kb-asistant", "--base-url=http://127.0.0.1:8000", "--model=m")
    with pytest.raises(CommandError, match=r"has no revision 7 \(it has r1\)"):
        _register("--revision=7")


def test_a_service_without_live_revision_needs_a_revision_number(db):
    RevisionFactory(service__slug="kb-assistant")

    with pytest.raises(CommandError, match="--revision: kb-assistant has no live revision"):
        _register()


def test_an_existing_name_is_refused_unless_updating(live):
    _register()

    with pytest.raises(CommandError, match=r"already exists .* pass --update"):
        _register()

    out, _ = _call("kb-vllm", "--update", "--concurrency-limit=4", "--disabled")
    backend = Backend.objects.get(name="kb-vllm")
    assert (backend.concurrency_limit, backend.enabled, backend.model_name) == (4, False, "kb-qwen")
    assert out.startswith("Updated backend kb-vllm (disabled)")
    assert _call("kb-vllm", "--update", "--concurrency-limit=4")[0].startswith("No changes")


def test_update_of_an_unknown_backend_is_refused(live):
    with pytest.raises(CommandError, match="no backend named 'nope' to update"):
        _call("nope", "--update", "--concurrency-limit=4")


def test_dry_run_writes_nothing(live):
    out, _ = _register("--dry-run")

    assert out.startswith("Dry run: backend kb-vllm")
    assert out.rstrip().endswith("Nothing was written.")
    assert not Backend.objects.exists()
    assert not Event.objects.filter(action="replay.backend_created").exists()


def test_actor_without_the_right_is_refused(live, outsider):
    with pytest.raises(CommandError, match="--actor: "):
        _register(f"--actor={outsider.username}")

    assert not Backend.objects.exists()
