"""Load-test evidence pages through the client: upload (preview, save), the report
page with its charts, the raw file, and the evidence sections of the revision and
service pages."""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal
from html import unescape
from html.parser import HTMLParser
from pathlib import Path

import httpx
import pytest
import time_machine
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

from ledger import queries, services
from ledger.models import Event, LoadTestReport, Service
from tests.factories import UserFactory
from tests.ledger.evidence.conftest import fixture_path, import_file, sample_asset, sample_runtime
from tests.ledger.factories import (
    RevisionFactory,
    ServiceFactory,
    TeamFactory,
)
from tests.support.charts import chart_specs

SWEEP = ("guidellm", "rate-sweep", "benchmarks.json")
VLLM = ("vllm", "vllm_c2_n20_detailed.json")


# ---------------------------------------------------------------- the cast and the service


@pytest.fixture
def kb(team):
    """kb-assistant (production, with SLOs): r1 live on 2 x H100."""
    service = ServiceFactory(
        slug="kb-assistant",
        team=team,
        tier="production",
        slo_ttft_p95_ms=800,
        slo_ttft_p99_ms=1500,
        slo_tpot_ms=30,
        slo_error_rate_pct=Decimal("1.00"),
    )
    # What the sample files measured: gemma-3-270m on llama.cpp.
    runtime = sample_runtime(team)
    revision = RevisionFactory(service=service, runtime=runtime, model_asset=sample_asset(team))
    services.set_live_revision(service, revision, actor=None)
    return Service.objects.select_related("live_revision").get(pk=service.pk)


@pytest.fixture
def r1(kb):
    return kb.live_revision


@pytest.fixture
def other_owner(db):
    """A model owner, but of another team."""
    person = UserFactory(username="oscar", roles=["model_owner"])
    TeamFactory(slug="sql-team", members=[person])
    return person


def _file(*parts: str, content: bytes | None = None, name: str | None = None):
    path = fixture_path(*parts)
    return SimpleUploadedFile(name or path.name, path.read_bytes() if content is None else content)


def _preview_url(number: int = 1) -> str:
    return f"/services/kb-assistant/r{number}/loadtests/preview"


def _save_url(number: int = 1) -> str:
    return f"/services/kb-assistant/r{number}/loadtests/new"


def _report_url(report) -> str:
    return (
        f"/services/{report.revision.service.slug}/r{report.revision.number}/loadtests/{report.pk}/"
    )


HTMX = {"HTTP_HX_REQUEST": "true"}


def _stored_files() -> list[Path]:
    return [p for p in Path(settings.MEDIA_ROOT).rglob("*") if p.is_file()]


class _Tables(HTMLParser):
    """Every table's body rows as lists of cell texts, by the table's classes."""

    def __init__(self):
        super().__init__()
        self.tables: list[tuple[str, list[list[str]]]] = []
        self._in_body = False
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append((dict(attrs).get("class", ""), []))
        elif tag == "tbody":
            self._in_body = True
        elif tag == "tr" and self._in_body:
            self.tables[-1][1].append([])
        elif tag in ("td", "th") and self._in_body:
            self._cell = []

    def handle_endtag(self, tag):
        if tag == "tbody":
            self._in_body = False
        elif tag in ("td", "th") and self._cell is not None:
            self.tables[-1][1][-1].append(" ".join("".join(self._cell).split()))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def tables(page: str, css_class: str) -> list[list[list[str]]]:
    parser = _Tables()
    parser.feed(page)
    return [rows for classes, rows in parser.tables if css_class in classes.split()]


def one_decimal(value: float) -> str:
    return f"{value:,.1f}"


# ---------------------------------------------------------------- preview


def test_preview_shows_what_the_file_says_and_writes_nothing(client, owner, r1):
    client.force_login(owner)
    events = Event.objects.count()

    response = client.post(_preview_url(), {"file": _file(*SWEEP)}, **HTMX)

    page = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in page
    assert page.lstrip().startswith('<form id="loadtest-form"')
    assert "What benchmarks.json says" in page
    assert "not saved yet" in page
    assert "guidellm 0.8.1" in page
    for level in ("constant@0.20", "constant@0.50", "constant@1.00"):
        assert level in page
    assert "GuideLLM warned about constant@0.20" in page
    assert "computed here from the per-request data" in page
    # The chosen file stays in the swapped form; the class is asked for at save, not yet.
    assert 'hx-preserve="true"' in page
    assert "Pick the workload class this file measured." not in page
    assert "error-summary" not in page
    assert "HX-Request" in response["Vary"]
    assert LoadTestReport.objects.count() == 0
    assert Event.objects.count() == events
    assert _stored_files() == []


def test_preview_levels_show_conditions_and_percentiles_of_the_file(client, owner, r1):
    client.force_login(owner)

    page = client.post(_preview_url(), {"file": _file(*VLLM)}, **HTMX).content.decode()

    preview = services.preview_loadtest_report(
        fixture_path(*VLLM).open("rb"), filename="vllm_c2_n20_detailed.json"
    )
    level = preview["levels"][0]
    [conditions] = tables(page, "levels-conditions")
    assert conditions[0][0] == level["name"]
    assert conditions[0][2] == str(level["conditions"]["requests"])
    [latency] = tables(page, "levels-latency")
    ttft = next(row for row in latency if row[1] == "TTFT")
    assert ttft[5] == one_decimal(level["latency_ms"]["ttft"]["p95"])
    assert preview["sha256"] in page


def test_preview_of_a_file_already_attached_says_saving_changes_nothing(client, owner, r1):
    report, _ = import_file(r1, *VLLM, actor=owner)
    client.force_login(owner)

    page = client.post(_preview_url(), {"file": _file(*VLLM)}, **HTMX).content.decode()

    assert "already attached to r1" in page
    assert _report_url(report) in page


def test_preview_without_htmx_renders_the_upload_page(client, owner, r1):
    client.force_login(owner)

    response = client.post(_preview_url(), {"file": _file(*VLLM)})

    page = response.content.decode()
    assert response.status_code == 200
    assert "<html" in page
    assert "What vllm_c2_n20_detailed.json says" in page
    assert LoadTestReport.objects.count() == 0


# ---------------------------------------------------------------- save


def test_save_attaches_the_report_records_an_event_and_redirects(client, owner, r1):
    client.force_login(owner)

    response = client.post(_save_url(), {"workload": "batch", "file": _file(*SWEEP), "format": ""})

    report = LoadTestReport.objects.get()
    assert response.status_code == 302
    assert response["Location"] == _report_url(report)
    assert (report.revision, report.workload, report.tool) == (r1, "batch", "guidellm")
    assert report.uploaded_by == owner
    event = Event.objects.get(action="loadtest_report.imported")
    assert event.actor == owner
    assert len(_stored_files()) == 1
    page = client.get(response["Location"]).content.decode()
    assert "Saved benchmarks.json as batch evidence." in page


def test_htmx_save_answers_the_evidence_section_with_the_new_report(client, owner, r1):
    client.force_login(owner)

    response = client.post(_save_url(), {"workload": "short", "file": _file(*VLLM)}, **HTMX)

    page = response.content.decode()
    report = LoadTestReport.objects.get()
    assert response.status_code == 200
    assert "<html" not in page
    assert page.lstrip().startswith('<section id="evidence"')
    assert "Saved vllm_c2_n20_detailed.json as short prompts evidence." in page
    assert f'id="report-{report.pk}"' in page
    assert _report_url(report) in page
    # A fresh form: the next file starts from an empty input.
    assert 'hx-preserve="true"' not in page
    assert "HX-Request" in response["Vary"]


def test_saving_the_same_file_again_returns_the_existing_report(client, owner, r1):
    client.force_login(owner)
    client.post(_save_url(), {"workload": "short", "file": _file(*VLLM)})
    events = Event.objects.count()

    response = client.post(_save_url(), {"workload": "short", "file": _file(*VLLM)}, **HTMX)

    report = LoadTestReport.objects.get()
    assert "was already attached to r1" in response.content.decode()
    assert f'id="report-{report.pk}"' in response.content.decode()
    assert Event.objects.count() == events
    assert len(_stored_files()) == 1


@pytest.mark.parametrize(
    ("parts", "expected"),
    [
        (("broken", "vllm_truncated.json"), "vllm_truncated.json: line 1, column 5001"),
        (
            ("broken", "aiperf_records_missing_latency.jsonl"),
            "aiperf_records_missing_latency.jsonl: line 5: metrics.request_latency",
        ),
        (
            ("broken", "generic_negative_ttft.csv"),
            "generic_negative_ttft.csv: line 4, column ttft_ms",
        ),
        (("broken", "empty.json"), "empty.json: the file is empty"),
    ],
)
@pytest.mark.parametrize("url", [_preview_url(), _save_url()])
def test_a_bad_file_is_named_with_its_place_and_nothing_is_written(
    client, owner, r1, parts, expected, url
):
    client.force_login(owner)
    events = Event.objects.count()

    response = client.post(url, {"workload": "short", "file": _file(*parts)}, **HTMX)

    page = unescape(response.content.decode())
    assert response.status_code == 200
    # Beside the file input, and in the summary at the top of the form.
    field = re.search(r'id="field-file".*?</div>', page, re.S).group(0)
    assert expected in field
    summary = re.search(r'id="error-summary".*?</div>', page, re.S).group(0)
    assert expected in summary
    assert LoadTestReport.objects.count() == 0
    assert Event.objects.count() == events
    assert _stored_files() == []


@pytest.mark.parametrize("url", [_preview_url(), _save_url()])
def test_a_report_saved_as_utf16_is_told_to_be_saved_as_utf8(client, owner, r1, url):
    client.force_login(owner)
    utf16 = fixture_path(*VLLM).read_text("utf-8").encode("utf-16")  # what PowerShell's > writes

    response = client.post(url, {"workload": "short", "file": _file(*VLLM, content=utf16)}, **HTMX)

    page = unescape(response.content.decode())
    field = re.search(r'id="field-file".*?</div>', page, re.S).group(0)
    assert "vllm_c2_n20_detailed.json: the file is UTF-16; save it as UTF-8" in field
    assert "not a text file" not in page
    assert LoadTestReport.objects.count() == 0
    assert _stored_files() == []


def test_a_file_over_the_size_limit_is_refused_with_its_size(client, owner, r1, settings):
    settings.LOADTEST_MAX_UPLOAD_BYTES = 1000
    client.force_login(owner)
    size = fixture_path(*VLLM).stat().st_size

    response = client.post(_save_url(), {"workload": "short", "file": _file(*VLLM)}, **HTMX)

    page = unescape(response.content.decode())
    assert (
        f"vllm_c2_n20_detailed.json: the file is {size:,} bytes; the limit is 1,000 bytes" in page
    )
    assert LoadTestReport.objects.count() == 0
    assert _stored_files() == []


def test_a_refused_htmx_save_replaces_only_the_form(client, owner, r1):
    client.force_login(owner)

    response = client.post(
        _save_url(), {"workload": "short", "file": _file("broken", "unknown.json")}, **HTMX
    )

    assert response["HX-Retarget"] == "#loadtest-form"
    assert response["HX-Reswap"] == "outerHTML"
    assert response.content.decode().lstrip().startswith('<form id="loadtest-form"')
    assert 'hx-preserve="true"' in response.content.decode()


def test_a_plain_save_with_an_error_shows_the_form_page_with_the_error(client, owner, r1):
    client.force_login(owner)

    response = client.post(_save_url(), {"workload": "", "file": _file(*VLLM)})

    page = response.content.decode()
    assert response.status_code == 200
    assert "Attach a load-test report to kb-assistant r1" in page
    field = re.search(r'id="field-workload".*?</div>', page, re.S).group(0)
    assert "Pick the workload class this file measured." in field
    assert "Nothing was saved" in page
    assert LoadTestReport.objects.count() == 0


def test_a_forced_format_that_does_not_fit_names_the_file(client, owner, r1):
    client.force_login(owner)

    response = client.post(
        _save_url(), {"workload": "short", "file": _file(*VLLM), "format": "guidellm"}, **HTMX
    )

    assert "vllm_c2_n20_detailed.json" in unescape(response.content.decode())
    assert LoadTestReport.objects.count() == 0


def test_the_upload_page_shows_the_form_to_owners(client, owner, r1):
    client.force_login(owner)

    page = client.get(_save_url()).content.decode()

    assert 'enctype="multipart/form-data"' in page
    assert 'type="file"' in page
    assert "hx-post" not in page  # its own page is the plain form


# ---------------------------------------------------------------- who may


@pytest.mark.parametrize("who", ["auditor", "outsider", "other_owner", "sre"])
@pytest.mark.parametrize("url", [_preview_url(), _save_url()])
def test_only_owners_of_the_services_team_may_preview_or_save(request, client, r1, who, url):
    client.force_login(request.getfixturevalue(who))

    response = client.post(url, {"workload": "short", "file": _file(*VLLM)}, **HTMX)

    assert response.status_code == 403
    assert LoadTestReport.objects.count() == 0
    assert _stored_files() == []


@pytest.mark.parametrize("url", [_preview_url(), "/services/kb-assistant/r1/loadtests/1/raw"])
def test_anonymous_people_are_sent_to_log_in(client, r1, url):
    response = client.get(url) if url.endswith("raw") else client.post(url)

    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_post_only_and_get_only_urls_refuse_the_other_method(client, owner, r1):
    report, _ = import_file(r1, *VLLM)
    client.force_login(owner)

    assert client.get(_preview_url()).status_code == 405
    assert client.post(_report_url(report)).status_code == 405
    assert client.post(_report_url(report) + "raw").status_code == 405


def test_a_revision_that_does_not_exist_is_404(client, owner, r1):
    client.force_login(owner)

    assert client.post(_preview_url(9), {"file": _file(*VLLM)}).status_code == 404
    assert client.post(_save_url(9), {"file": _file(*VLLM)}).status_code == 404


# ---------------------------------------------------------------- the raw file


def test_the_raw_file_is_streamed_as_written_to_anyone_signed_in(client, auditor, r1):
    report, _ = import_file(r1, *SWEEP, workload="batch")
    client.force_login(auditor)

    response = client.get(_report_url(report) + "raw")

    assert response.status_code == 200
    assert b"".join(response.streaming_content) == fixture_path(*SWEEP).read_bytes()
    assert response["Content-Disposition"] == 'attachment; filename="benchmarks.json"'


def test_a_report_under_another_revisions_address_is_404(client, owner, kb, r1):
    report, _ = import_file(r1, *VLLM)
    RevisionFactory(service=kb, runtime=r1.runtime, model_asset=r1.model_asset)
    client.force_login(owner)

    assert client.get(f"/services/kb-assistant/r2/loadtests/{report.pk}/raw").status_code == 404
    assert client.get(f"/services/kb-assistant/r2/loadtests/{report.pk}/").status_code == 404
    assert client.get(f"/services/other/r1/loadtests/{report.pk}/").status_code == 404


def test_the_raw_file_in_s3_is_a_presigned_link(client, auditor, r1, s3_storage):
    report, _ = import_file(r1, *VLLM)
    client.force_login(auditor)

    response = client.get(_report_url(report) + "raw")

    assert response.status_code == 302
    location = response["Location"]
    assert s3_storage in location
    assert "X-Amz-Signature=" in location
    assert "response-content-disposition=attachment" in location
    fetched = httpx.get(location)
    assert fetched.status_code == 200
    assert fetched.content == fixture_path(*VLLM).read_bytes()
    assert "vllm_c2_n20_detailed.json" in fetched.headers["content-disposition"]


# ---------------------------------------------------------------- the report page


def test_report_page_of_a_sweep_shows_its_charts_and_their_numbers(client, sre, r1):
    report, _ = import_file(r1, *SWEEP, workload="batch")
    client.force_login(sre)

    response = client.get(_report_url(report))

    page = response.content.decode()
    assert response.status_code == 200
    assert "vendor/plotly-basic-" in page
    for chart in ("chart-latency", "chart-throughput-latency", "chart-ttft-cdf"):
        figure = re.search(rf'<figure [^>]*id="{chart}".*?</figure>', page, re.S).group(0)
        # The figure as data for static/js/charts.js, no inline script.
        [spec] = chart_specs(figure)
        assert spec["data"] and spec["layout"]["height"] in (460, 620)
        assert spec["config"]["showSendToCloud"] is False
    assert "Plotly.newPlot" not in page
    assert '<span class="badge ok">current</span>' in page

    # The throughput-latency table holds the report's own numbers, level by level.
    [curve] = [
        t for t in tables(page, "chart-table") if t[0][0] == "constant@0.20" and len(t[0]) == 8
    ]
    for row, level in zip(curve, report.levels, strict=True):
        assert row[0] == level["name"]
        assert row[2] == one_decimal(level["throughput"]["output_tokens_per_s"])
        assert row[3] == one_decimal(level["latency_ms"]["ttft"]["p95"])
        assert row[4] == one_decimal(level["latency_ms"]["tpot"]["p95"])
        assert row[6] == "yes"
    # The latency table too.
    [latency] = tables(page, "levels-latency")
    ttft_rows = [row for row in latency if row[1] == "TTFT"]
    assert [row[5] for row in ttft_rows] == [
        one_decimal(level["latency_ms"]["ttft"]["p95"]) for level in report.levels
    ]


def test_report_page_says_what_goodput_and_capacity_mean(client, sre, r1):
    report, _ = import_file(r1, *SWEEP, workload="batch")
    client.force_login(sre)

    page = client.get(_report_url(report)).content.decode()

    capacity = queries.report_capacity(report)
    gph = capacity["gpu_hours_per_million_output_tokens"]
    goodput = re.search(r'id="goodput".*?</div>', page, re.S).group(0)
    assert "100.0 %" in goodput
    assert '<span class="badge ok">met</span>' in goodput
    assert "met the SLOs all at once" in goodput
    assert "time to first token ≤ 800 ms" in goodput
    section = re.search(r'id="capacity".*?</div>', page, re.S).group(0)
    assert "request rate 1 req/s" in section
    assert "level constant@1.00" in section
    assert f"{gph:,.2f} GPU-hours per million output tokens" in section
    assert "On 2 GPUs" in section
    assert "3 of 3 levels are within the SLOs" in section


def test_report_page_of_a_tool_summary_has_neither_curve_nor_distribution(client, sre, r1):
    report, _ = import_file(r1, "aiperf", "profile_export_aiperf.json")
    client.force_login(sre)

    page = client.get(_report_url(report)).content.decode()

    assert 'id="chart-latency"' in page
    assert 'id="chart-throughput-latency"' not in page
    assert 'id="chart-ttft-cdf"' not in page
    assert "No goodput: the file has no per-request data" in page
    assert "the tool's own summary" in page


def test_report_page_says_stale_and_why(client, sre, r1):
    with time_machine.travel(timezone.now() - dt.timedelta(days=100), tick=False):
        report, _ = import_file(r1, *VLLM)
    client.force_login(sre)

    page = client.get(_report_url(report)).content.decode()

    assert '<span class="badge warn">stale</span>' in page
    assert "production services accept evidence up to 90 days old" in page
    assert "Release gates do not accept stale evidence" in page


# ---------------------------------------------------------------- the revision page


def test_revision_page_lists_reports_with_status_and_raw_link(client, sre, r1):
    report, _ = import_file(r1, *VLLM, workload="short")
    with time_machine.travel(timezone.now() - dt.timedelta(days=100), tick=False):
        import_file(r1, *SWEEP, workload="batch")
    client.force_login(sre)

    page = client.get("/services/kb-assistant/r1/").content.decode()

    [rows] = tables(page, "evidence-reports")
    assert len(rows) == 2
    short = rows[0]
    assert "Short prompts" in short[0]
    assert short[1] == "vllm"  # the sample does not say its version
    assert short[2] == "computed here"
    assert short[3] == str(report.requests)
    assert short[5] == f"{one_decimal(report.ttft_p95_ms)} ms"
    assert short[6] == f"{one_decimal(report.tpot_p95_ms)} ms"
    assert short[7] == "100.0 %"
    assert short[9] == "current"
    assert rows[1][9].startswith("stale measured")
    assert f'href="{_report_url(report)}raw"' in page
    # No upload form for an SRE, but the latency chart of the current report.
    assert 'id="loadtest-form"' not in page
    assert 'id="chart-latency"' in page
    assert "1 stale report left out" in page


def test_revision_page_latency_table_holds_the_reports_numbers(client, sre, r1):
    report, _ = import_file(r1, *VLLM, workload="short")
    client.force_login(sre)

    page = client.get("/services/kb-assistant/r1/").content.decode()

    [table] = [t for t in tables(page, "chart-table")]
    [row] = table
    latency = report.headline_level["latency_ms"]
    assert row[0] == "Short prompts"
    assert row[1:4] == [one_decimal(latency["ttft"][p]) for p in ("p50", "p95", "p99")]
    assert row[4:7] == [one_decimal(latency["tpot"][p]) for p in ("p50", "p95", "p99")]


def test_revision_page_without_evidence_loads_no_plotly_for_readers(client, sre, owner, r1):
    client.force_login(sre)
    page = client.get("/services/kb-assistant/r1/").content.decode()
    assert "No load-test report yet" in page
    assert "vendor/plotly-basic-" not in page

    client.force_login(owner)
    page = client.get("/services/kb-assistant/r1/").content.decode()
    assert 'id="loadtest-form"' in page
    assert 'type="file"' in page
    assert "vendor/plotly-basic-" in page  # the chart may appear after the first upload


def _generic_variant(i: int) -> SimpleUploadedFile:
    """The generic CSV with one more request and the model r1 serves: another file, the
    same shape, current evidence."""
    header, rows = fixture_path("generic", "requests.csv").read_bytes().split(b"\n", 1)
    rows += f"1{i}0.0,9{i}0.0,11,512,,20.0,4\n".encode()
    data = (
        b"\n".join([header + b",model", *(row + b",gemma-3-270m" for row in rows.splitlines())])
        + b"\n"
    )
    return SimpleUploadedFile(f"requests-{i}.csv", data)


def _attach(revision, count: int) -> None:
    workloads = LoadTestReport.Workload.values
    for i in range(count):
        file = _generic_variant(i)
        services.import_loadtest_report(
            revision,
            actor=None,
            workload=workloads[i % len(workloads)],
            file=file,
            filename=file.name,
        )


@pytest.mark.parametrize("count", [1, 5])
def test_revision_page_query_count_does_not_grow_with_reports(
    client, owner, r1, count, django_assert_num_queries
):
    _attach(r1, count)
    client.force_login(owner)

    # 1 session, 2 user, 3 the revision with service, team, asset, license,
    # runtime, based-on and creator, 4 the user's groups and 5 team membership
    # (may they edit?), 6 revisions with the same fingerprint, 7 capabilities;
    # then the evidence: 8 the reports with their uploaders (without their
    # levels), 9 the levels of the newest current report of each class; and 10
    # the releases' lock rule (is it referenced by a release past draft?).
    with django_assert_num_queries(10):
        response = client.get("/services/kb-assistant/r1/")

    assert len(response.context["evidence_reports"]) == count


@pytest.mark.parametrize("count", [1, 5])
def test_service_page_query_count_does_not_grow_with_reports(
    client, owner, kb, r1, count, django_assert_num_queries
):
    candidate = RevisionFactory(service=kb, runtime=r1.runtime, model_asset=r1.model_asset)
    _attach(r1, count)
    _attach(candidate, count)
    client.force_login(owner)

    # As in test_views_catalog (9), plus the SLO matrix's 10 live and candidate
    # revisions and 11 their reports, replay's 12 live backends (health) and 13
    # backends (none, so no probes or runs queries) and 14 regressed runs, the
    # run-evidence trend's 15 days, 16 live-revision changes and 17 their revisions,
    # the serving history's 18 events and 19 revisions, 20 the rollout shares' events
    # (none, so no releases query), 21 open and 22 recently closed releases, 23 the lock
    # rule over the revisions listed, and the rollback section's 24 plan in force and 25
    # the revisions rolled back off the service (none; nothing served before the live
    # revision: no target to judge or verify), 26 rollout in flight, 27 unauthorized
    # changes, 28 recent rollbacks and 29 the reader's permissions; the reviews
    # section's 30 open review, 31 last concluded review and 32 open actions.
    with django_assert_num_queries(32):
        response = client.get("/services/kb-assistant/")

    assert len(response.context["matrix_blocks"]) == 2


# ---------------------------------------------------------------- the service page


@pytest.fixture
def evidence_set(kb, r1, owner):
    """r1 live: a current vLLM short report and a stale GuideLLM sweep;
    r2 candidate: AIPerf short and inference-perf high concurrency."""
    candidate = RevisionFactory(service=kb, runtime=r1.runtime, model_asset=r1.model_asset)
    with time_machine.travel(timezone.now() - dt.timedelta(days=100), tick=False):
        import_file(r1, *SWEEP, workload="batch")
    import_file(r1, *VLLM, workload="short")
    import_file(candidate, "aiperf", "profile_export.jsonl", workload="short")
    import_file(
        candidate, "inference_perf", "summary_lifecycle_metrics.json", workload="high_concurrency"
    )
    return candidate


def _words(page: str, role: str) -> dict[str, dict[str, str]]:
    table = re.search(rf'<table class="data slo-matrix" data-role="{role}">.*?</table>', page, re.S)
    words: dict[str, dict[str, str]] = {}
    for row in re.finditer(r'<tr data-workload="(\w+)">(.*?)</tr>', table.group(0), re.S):
        cells = re.findall(r'data-metric="(\w+)" data-word="([^"]+)"', row.group(2))
        words[row.group(1)] = dict(cells)
    return words


def test_service_page_shows_the_slo_matrix_words_for_live_and_candidate(
    client, sre, kb, evidence_set
):
    client.force_login(sre)

    page = client.get("/services/kb-assistant/").content.decode()

    matrix = queries.slo_matrix(Service.objects.get(pk=kb.pk))
    for block in matrix["revisions"]:
        shown = _words(page, block["role"])
        expected = {
            row["workload"]: {cell["metric"]: cell["word"] for cell in row["cells"]}
            for row in block["rows"]
        }
        assert shown == expected
    live = _words(page, "live")
    assert live["short"]["ttft_p95"] == "met"
    assert set(live["batch"].values()) == {"stale"}
    assert set(live["streaming"].values()) == {"no evidence"}
    # Every word is written in its badge, not only coloured.
    assert '<span class="badge ok">met</span>' in page
    assert '<span class="badge warn">stale</span>' in page
    assert '<span class="badge none">no evidence</span>' in page
    assert "Evidence against the SLOs" in page


def test_service_page_compares_the_candidate_with_live(client, sre, kb, evidence_set):
    client.force_login(sre)

    page = client.get("/services/kb-assistant/").content.decode()

    assert "vendor/plotly-basic-" in page
    figure = re.search(r'<figure [^>]*id="chart-comparison".*?</figure>', page, re.S).group(0)
    [spec] = chart_specs(figure)
    assert {"live r1", "candidate r2"} <= {trace.get("name") for trace in spec["data"]}
    [rows] = tables(figure, "chart-table")
    live = LoadTestReport.objects.get(revision=kb.live_revision, workload="short")
    candidate = LoadTestReport.objects.get(revision=evidence_set, workload="short")
    short_ttft = next(row for row in rows if row[0] == "Short prompts" and row[1] == "p95 TTFT")
    assert short_ttft[2] == one_decimal(live.ttft_p95_ms)
    # AIPerf's records name no model: the candidate's number is shown, marked unverified.
    assert short_ttft[3] == f"{one_decimal(candidate.ttft_p95_ms)} unverified"
    delta = candidate.ttft_p95_ms - live.ttft_p95_ms
    assert short_ttft[4].startswith(f"{'+' if delta > 0 else ''}{one_decimal(delta)} ms")
    assert ("slower" if delta > 0 else "faster") in short_ttft[4]


def test_service_page_without_a_candidate_shows_no_comparison_nor_plotly(client, sre, kb, r1):
    import_file(r1, *VLLM)
    client.force_login(sre)

    page = client.get("/services/kb-assistant/").content.decode()

    assert 'data-role="live"' in page
    assert 'data-role="candidate"' not in page
    assert 'id="chart-comparison"' not in page
    assert "vendor/plotly-basic-" not in page
