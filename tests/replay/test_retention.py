"""Raw replay outputs past retention are redacted, recorded, and the chain is untouched."""

from __future__ import annotations

import datetime as dt
import hashlib

import pytest
from django.utils import timezone

from ledger.chain import verify_chain
from ledger.models import Event
from replay.models import Result, Run
from replay.services.retention import purge_expired_outputs
from tests.replay.factories import ResultFactory, RunFactory

pytestmark = pytest.mark.django_db

NOW = timezone.now()


def _result(days_ago: int, output: str = "The answer is 4.") -> Result:
    run = RunFactory(state=Run.State.FINISHED, finished_at=NOW - dt.timedelta(days=days_ago))
    return ResultFactory(
        run=run,
        output=output,
        output_sha256=hashlib.sha256(output.encode()).hexdigest(),
        output_length=len(output),
    )


def test_outputs_past_retention_are_redacted_keeping_digest_and_length(settings):
    settings.RETENTION_RAW_DAYS = 183
    old, recent = _result(200), _result(30)
    events_before = Event.objects.count()

    assert purge_expired_outputs(actor=None, now=NOW) == 1

    old.refresh_from_db()
    recent.refresh_from_db()
    assert (old.output, old.redacted, old.output_length) == ("", True, len("The answer is 4."))
    assert old.output_sha256 == hashlib.sha256(b"The answer is 4.").hexdigest()
    assert (recent.output, recent.redacted) == ("The answer is 4.", False)
    event = Event.objects.order_by("-sequence").first()
    assert Event.objects.count() == events_before + 1
    assert event.action == "retention.replay_outputs_purged"
    assert event.payload_data["results"] == 1
    assert event.payload_data["retention_days"] == 183
    assert verify_chain().ok


def test_nothing_expired_records_nothing():
    _result(10)
    before = Event.objects.count()
    assert purge_expired_outputs(actor=None, now=NOW) == 0
    assert Event.objects.count() == before


def test_a_second_sweep_finds_nothing_more():
    _result(400)
    assert purge_expired_outputs(actor=None, now=NOW) == 1
    assert purge_expired_outputs(actor=None, now=NOW) == 0


def test_settings_refuse_a_retention_shorter_than_the_minimum(monkeypatch):
    import subprocess
    import sys

    for name, value, message in (
        ("RETENTION_RAW_DAYS", "30", "kept at least 183 days"),
        ("RETENTION_RECORDS_YEARS", "1", "kept at least 3 years"),
    ):
        result = subprocess.run(
            [
                sys.executable,
                "-c",
                "import django, os; os.environ['DJANGO_SETTINGS_MODULE']='config.settings'; django.setup()",
            ],
            env={**__import__("os").environ, name: value, "DEBUG": "true", "LEDGER_LOCAL_ENV": ""},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode != 0
        assert message in result.stderr
