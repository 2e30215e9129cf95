"""`manage.py import_metrics`: the day computed from two saved scrapes, recorded, printed as JSON."""

from __future__ import annotations

import datetime as dt
import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from ledger.models import Event, RunSummary
from tests.ledger.run_evidence.conftest import PROMETHEUS

pytestmark = pytest.mark.django_db

YESTERDAY = (timezone.now().astimezone(dt.UTC).date() - dt.timedelta(days=1)).isoformat()


def _run(*args: str) -> dict:
    out = io.StringIO()
    call_command("import_metrics", *args, stdout=out)
    return json.loads(out.getvalue())


def _files(before: str, after: str) -> list[str]:
    return [str(PROMETHEUS / before), str(PROMETHEUS / after)]


def test_import_records_the_scraped_day_and_prints_it(service, live):
    data = _run(
        "--service", "kb-assistant", "--date", YESTERDAY, "--engine", "vllm",
        *_files("vllm_before.txt", "vllm_after.txt"),
    )  # fmt: skip

    summary = RunSummary.objects.get()
    assert (summary.source, summary.date.isoformat()) == ("scrape", YESTERDAY)
    assert data["outcome"] == "recorded"
    assert data["requests"] == 1010
    assert data["ttft_p99_ms"] == 750.0
    assert data["error_rate"] == pytest.approx(10 / 1010)
    assert data["details"]["window"] == {"before": "vllm_before.txt", "after": "vllm_after.txt"}
    assert data["revision"] == live.label
    assert Event.objects.filter(action="run_summary.recorded").count() == 1


def test_importing_the_day_again_from_other_scrapes_replaces_it(service, live):
    common = ["--service", "kb-assistant", "--date", YESTERDAY]
    _run(*common, "--engine", "vllm", *_files("vllm_before.txt", "vllm_after.txt"))

    data = _run(
        *common,
        "--engine",
        "llama_cpp",
        *_files("llamacpp_before.txt", "llamacpp_after_restart.txt"),
    )

    assert data["outcome"] == "replaced"
    assert data["details"]["counter_resets"]
    assert RunSummary.objects.count() == 1
    assert Event.objects.get(action="run_summary.replaced").payload_data["replaced"] is True


def test_dry_run_records_nothing(service):
    data = _run(
        "--service", "kb-assistant", "--date", YESTERDAY, "--engine", "llama_cpp", "--dry-run",
        *_files("llamacpp_before.txt", "llamacpp_after_restart.txt"),
    )  # fmt: skip

    assert data["dry_run"] is True
    assert data["details"]["tpot_mean_ms"] == 25.0
    assert not RunSummary.objects.exists()


def test_malformed_text_is_refused_naming_the_file_and_line(service, tmp_path):
    broken = tmp_path / "after.txt"
    broken.write_text(
        '# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{x="1"} one\n'
    )

    with pytest.raises(CommandError, match=r"after\.txt, line 2: "):
        call_command(
            "import_metrics", "--service", "kb-assistant", "--date", YESTERDAY,
            "--engine", "vllm", str(PROMETHEUS / "vllm_before.txt"), str(broken),
        )  # fmt: skip
    assert not RunSummary.objects.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--service", "nope", "--date", YESTERDAY], "There is no service 'nope'"),
        (["--service", "kb-assistant", "--date", "2026-13-01"], "is not a day"),
        (["--service", "kb-assistant", "--date", "2999-01-01"], "is in the future"),
    ],
)
def test_bad_arguments_are_refused_clearly(service, args, message):
    with pytest.raises(CommandError, match=message):
        call_command(
            "import_metrics", *args, "--engine", "vllm",
            *_files("vllm_before.txt", "vllm_after.txt"),
        )  # fmt: skip


def test_a_missing_file_is_named(service, tmp_path):
    with pytest.raises(CommandError, match=r"missing\.txt: cannot be read"):
        call_command(
            "import_metrics", "--service", "kb-assistant", "--date", YESTERDAY,
            "--engine", "vllm", str(tmp_path / "missing.txt"), str(tmp_path / "missing.txt"),
        )  # fmt: skip
