"""A gateway day recorded from two scrapes of its /metrics: through record_run_summary
with its breakdown (source gateway), the backends named as the ledger names them, the
same scrapes again recording nothing; and `manage.py import_gateway_metrics`, its dry
run and its refusals naming the file and line."""

from __future__ import annotations

import datetime as dt
import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from ledger import services as ledger_services
from ledger.metrics_import import parse_exposition
from ledger.models import Event, RunBreakdown, RunSummary
from ledger.models.run_evidence import UNATTRIBUTED
from releases.gateway.litellm import deployment_id
from releases.gateway.queries import service_names
from releases.gateway.services.gateway_day import record_gateway_day
from tests.releases.gateway.metrics_world import (
    as_ledger_names,
    metrics_backends,
    metrics_service,
)
from tests.releases.gateway.test_gateway_metrics import AFTER, BEFORE
from tests.replay.factories import BackendFactory

pytestmark = pytest.mark.django_db

YESTERDAY = timezone.now().astimezone(dt.UTC).date() - dt.timedelta(days=1)


@pytest.fixture
def service(team):
    return metrics_service(team)


@pytest.fixture
def backends(service):
    return metrics_backends(service)


def _scrapes(backends):
    return (
        parse_exposition(as_ledger_names(BEFORE, backends), source="before.txt"),
        parse_exposition(as_ledger_names(AFTER, backends), source="after.txt"),
    )


def test_the_service_names_are_its_tenants_task_types_and_backends_by_deployment(service, backends):
    live, canary = backends
    BackendFactory(name="elsewhere")  # another service's backend is not named

    names = service_names(service)

    assert (names.tenants, names.task_types) == ({"support", "sales"}, {"chat", "rag"})
    assert names.backends == {
        deployment_id("kb-assistant", live.pk): "kb-assistant-live",
        deployment_id("kb-assistant", canary.pk): "kb-assistant-canary",
    }


def test_the_day_is_recorded_with_its_rows_and_the_same_scrapes_again_record_nothing(
    service, backends
):
    before, after = _scrapes(backends)

    summary, outcome = record_gateway_day(
        service, actor=None, date=YESTERDAY, before=before, after=after
    )
    again = record_gateway_day(service, actor=None, date=YESTERDAY, before=before, after=after)

    assert (outcome, again[1]) == ("recorded", "unchanged")
    assert summary.source == RunSummary.Source.GATEWAY
    rows = RunBreakdown.objects.filter(summary=summary)
    assert {(r.tenant, r.task_type, r.backend): r.requests for r in rows} == {
        ("sales", UNATTRIBUTED, ""): 2,
        ("sales", "chat", "kb-assistant-canary"): 4,
        ("support", "rag", "kb-assistant-canary"): 8,
        ("support", "rag", "kb-assistant-live"): 15,
        (UNATTRIBUTED, UNATTRIBUTED, "kb-assistant-live"): 7,
    }
    assert summary.requests == sum(r.requests for r in rows) == 36
    assert summary.output_tokens == sum(r.output_tokens for r in rows) == 720
    assert (summary.rate_limit_hits, summary.timeouts) == (2, 1)
    assert summary.details["from"] == "gateway_metrics"
    assert summary.details["window"] == {"before": "before.txt", "after": "after.txt"}
    event = Event.objects.get(action="run_summary.recorded")
    assert json.loads(event.payload)["breakdown_rows"] == 5


def test_the_metrics_replace_a_day_the_gateway_pushed_and_the_event_says_so(service, backends):
    """One observer, two ways of reading it: the later reading is the day."""
    ledger_services.record_run_summary(service, actor=None, date=YESTERDAY, requests=40)
    before, after = _scrapes(backends)

    summary, outcome = record_gateway_day(
        service, actor=None, date=YESTERDAY, before=before, after=after
    )

    assert outcome == "replaced"
    assert summary.requests == 36
    assert RunSummary.objects.filter(service=service).count() == 1


def _files(tmp_path, backends, after: str = AFTER) -> list[str]:
    paths = []
    for name, text in (("before.txt", BEFORE), ("after.txt", after)):
        path = tmp_path / name
        path.write_text(as_ledger_names(text, backends))
        paths.append(str(path))
    return paths


def _run(*args: str) -> dict:
    out = io.StringIO()
    call_command("import_gateway_metrics", *args, stdout=out)
    return json.loads(out.getvalue())


def test_the_command_records_the_day_and_prints_it(service, backends, tmp_path):
    data = _run(
        "--service", "kb-assistant", "--date", YESTERDAY.isoformat(), *_files(tmp_path, backends)
    )

    assert data["outcome"] == "recorded"
    assert (data["source"], data["requests"], data["breakdown_rows"]) == ("gateway", 36, 5)
    assert RunBreakdown.objects.count() == 5


def test_a_dry_run_prints_the_rows_and_records_nothing(service, backends, tmp_path):
    data = _run(
        "--service", "kb-assistant", "--date", YESTERDAY.isoformat(), "--dry-run",
        *_files(tmp_path, backends),
    )  # fmt: skip

    assert data["dry_run"] is True
    assert data["requests"] == 36
    assert len(data["breakdown"]) == 5
    assert RunSummary.objects.count() == 0
    assert not Event.objects.filter(action__startswith="run_summary.").exists()


def test_malformed_exposition_text_is_refused_naming_the_file_and_line(service, backends, tmp_path):
    broken = AFTER.replace('status_code="408"', 'status_code="408', 1)
    line = next(n for n, text in enumerate(broken.splitlines(), 1) if 'status_code="408' in text)
    before, after = _files(tmp_path, backends, after=broken)

    with pytest.raises(CommandError) as caught:
        _run("--service", "kb-assistant", "--date", YESTERDAY.isoformat(), before, after)

    assert str(caught.value).startswith(f"{after}, line {line}: ")
    assert RunSummary.objects.count() == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--service", "nope", "--date", "2026-01-02"], "There is no service 'nope'."),
        (
            ["--service", "kb-assistant", "--date", "02/01/2026"],
            "--date '02/01/2026' is not a day in the form YYYY-MM-DD.",
        ),
    ],
)
def test_the_command_refuses_an_unknown_service_or_day(service, backends, tmp_path, args, message):
    with pytest.raises(CommandError, match="^" + message.replace(".", r"\.") + "$"):
        _run(*args, *_files(tmp_path, backends))


def test_a_future_day_is_refused_by_the_verbs_own_check(service, backends, tmp_path):
    tomorrow = (YESTERDAY + dt.timedelta(days=2)).isoformat()

    with pytest.raises(CommandError, match=r"^date: "):
        _run("--service", "kb-assistant", "--date", tomorrow, *_files(tmp_path, backends))
    assert RunSummary.objects.count() == 0
