"""GPU memory and KV-cache peaks of a load test: from the tool's own GPU telemetry, else
from two Prometheus scrapes of the engine and DCGM around it (the higher value of the
two, a lower bound), through the verb, the command, the upload form and the pages."""

from __future__ import annotations

import io
import json
import re
from html import unescape
from pathlib import Path

import pytest
from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError
from rest_framework.authtoken.models import Token

from ledger import queries, services
from ledger.metrics_import import parse_exposition, scrape_peaks
from ledger.models import Event, LoadTestReport
from tests.ledger.evidence.conftest import fixture_path, import_file, upload

SCRAPES = Path(__file__).resolve().parents[2] / "fixtures" / "prometheus"
LOADTEST = SCRAPES / "loadtest"
VLLM = ("vllm", "vllm_c2_n20_detailed.json")
# 73,420 MiB on GPU 1 after the test, in GiB.
GPU_PEAK_GIB = round(73420 / 1024, 3)


def scrape_text(*names: str) -> str:
    """One file of several scrapes, as `cat engine.txt dcgm.txt > before.txt` makes it."""
    return "".join((LOADTEST / name).read_text() for name in names)


def scrape_file(*names: str, name: str | None = None, content: bytes | None = None):
    data = scrape_text(*names).encode() if content is None else content
    return SimpleUploadedFile(name or names[0], data)


def before_after() -> dict[str, SimpleUploadedFile]:
    return {
        "metrics_before": scrape_file("vllm_dp2_before.txt", "dcgm_before.txt", name="before.txt"),
        "metrics_after": scrape_file("vllm_dp2_after.txt", "dcgm_after.txt", name="after.txt"),
    }


def _stored_files() -> list[Path]:
    return [p for p in Path(settings.MEDIA_ROOT).rglob("*") if p.is_file()]


# ---------------------------------------------------------------- reading two scrapes


def test_two_scrapes_give_the_busiest_gpu_and_the_fullest_engine():
    before = parse_exposition(scrape_text("vllm_dp2_before.txt", "dcgm_before.txt"))
    after = parse_exposition(scrape_text("vllm_dp2_after.txt", "dcgm_after.txt"))

    peaks = scrape_peaks(before, after)

    assert peaks == {
        "gpu_memory_peak_gib": {
            "value": GPU_PEAK_GIB,
            "source": "scrape",
            "metric": "DCGM_FI_DEV_FB_USED",
            "lower_bound": True,
        },
        "kv_cache_peak_pct": {
            "value": 87.4,
            "source": "scrape",
            "metric": "vllm:kv_cache_usage_perc",
            "lower_bound": True,
        },
    }


def test_a_gauge_peak_is_the_higher_scrape_not_a_difference():
    # SGLang's token usage: 0.28 before, 0.41 after. Differenced like a counter it would
    # be 13 %, or -13 % the other way round; a peak is the higher value either way.
    before = parse_exposition((SCRAPES / "sglang_before.txt").read_text())
    after = parse_exposition((SCRAPES / "sglang_after.txt").read_text())

    forward = scrape_peaks(before, after)["kv_cache_peak_pct"]
    backward = scrape_peaks(after, before)["kv_cache_peak_pct"]

    assert forward["value"] == backward["value"] == 41.0
    assert forward["metric"] == "sglang:token_usage"


def test_vllms_deprecated_gauge_name_is_read_too():
    old = scrape_text("vllm_dp2_after.txt").replace(
        "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"
    )

    peaks = scrape_peaks(parse_exposition(old), parse_exposition(old))

    assert peaks["kv_cache_peak_pct"]["metric"] == "vllm:gpu_cache_usage_perc"
    assert peaks["kv_cache_peak_pct"]["value"] == 87.4
    assert "gpu_memory_peak_gib" not in peaks


# ---------------------------------------------------------------- through the verb


def test_import_with_scrapes_fills_both_peaks_and_says_where_they_came_from(revision):
    report, created = import_file(revision, *VLLM, workload="long_context", **before_after())

    report.refresh_from_db()
    assert created
    assert report.gpu_memory_peak_gib == GPU_PEAK_GIB
    assert report.kv_cache_peak_pct == 87.4
    assert report.results["peaks"]["kv_cache_peak_pct"]["lower_bound"] is True
    assert queries.has_peaks(report)
    event = Event.objects.get(action="loadtest_report.imported")
    assert event.payload_data["peaks"]["gpu_memory_peak_gib"]["value"] == GPU_PEAK_GIB


def test_the_real_sample_files_record_no_peaks_of_their_own(revision):
    # They ran on CPU: AIPerf's telemetry_data is there, with no endpoint in it.
    report, _ = import_file(revision, "aiperf", "profile_export_aiperf.json")

    report.refresh_from_db()
    assert (report.gpu_memory_peak_gib, report.kv_cache_peak_pct) == (None, None)
    assert "peaks" not in report.results
    assert not queries.has_peaks(report)
    event = Event.objects.get(action="loadtest_report.imported")
    assert "peaks" not in event.payload_data


def _aiperf_with_telemetry(max_gb: list[float]) -> SimpleUploadedFile:
    """The real AIPerf summary with GPU telemetry as AIPerf's json_exporter writes it
    when a DCGM exporter answered (`telemetry_data.endpoints.<host>.gpus.gpu_<i>`)."""
    doc = json.loads(fixture_path("aiperf", "profile_export_aiperf.json").read_text())
    gpus = {
        f"gpu_{i}": {
            "gpu_index": i,
            "gpu_name": "NVIDIA H100 80GB HBM3",
            "gpu_uuid": f"GPU-0000000{i}-86f3-7a43-b711-4771313afc50",
            "hostname": "gpu-node-07",
            "metrics": {
                "gpu_utilization": {"avg": 71.2, "min": 0.0, "max": 98.0, "unit": "%"},
                "gpu_memory_used": {
                    "avg": peak - 0.4,
                    "min": peak - 1.1,
                    "max": peak,
                    "p99": peak,
                    "p90": peak - 0.2,
                    "p75": peak - 0.3,
                    "std": 0.21,
                    "count": 141,
                    "unit": "GB",
                },
            },
        }
        for i, peak in enumerate(max_gb)
    }
    doc["telemetry_data"]["endpoints"] = {"localhost:9401": {"gpus": gpus}}
    return SimpleUploadedFile("profile_export_aiperf.json", json.dumps(doc).encode())


def test_aiperfs_own_gpu_telemetry_wins_over_the_scrapes(revision):
    file = _aiperf_with_telemetry([75.62, 76.99])

    report, _ = services.import_loadtest_report(
        revision,
        actor=None,
        workload="long_context",
        file=file,
        filename=file.name,
        **before_after(),
    )

    report.refresh_from_db()
    # AIPerf's GB are 10^9 bytes (MiB x 1.048576e-3): 76.99 GB is 71.703 GiB.
    assert report.gpu_memory_peak_gib == round(76.99e9 / 2**30, 3)
    peaks = report.results["peaks"]
    assert peaks["gpu_memory_peak_gib"]["source"] == "tool"
    assert peaks["gpu_memory_peak_gib"]["lower_bound"] is False
    # AIPerf records no KV-cache use: that one is still the scrapes'.
    assert peaks["kv_cache_peak_pct"]["source"] == "scrape"


def test_aiperf_telemetry_in_another_unit_is_refused_by_its_json_path(revision):
    doc = json.loads(_aiperf_with_telemetry([76.99]).read())
    doc["telemetry_data"]["endpoints"]["localhost:9401"]["gpus"]["gpu_0"]["metrics"][
        "gpu_memory_used"
    ]["unit"] = "MiB"
    file = SimpleUploadedFile("profile_export_aiperf.json", json.dumps(doc).encode())

    with pytest.raises(ValidationError) as caught:
        services.import_loadtest_report(
            revision, actor=None, workload="short", file=file, filename=file.name
        )

    (message,) = caught.value.message_dict["file"]
    assert "telemetry_data.endpoints.localhost:9401.gpus.gpu_0.metrics.gpu_memory_used.unit" in (
        message
    )
    assert "expected unit GB" in message
    assert not LoadTestReport.objects.exists()


# ---------------------------------------------------------------- bad scrapes write nothing


def _refusal(revision, **scrapes) -> dict[str, list[str]]:
    events = Event.objects.count()
    with pytest.raises(ValidationError) as caught:
        import_file(revision, *VLLM, **scrapes)
    assert not LoadTestReport.objects.exists()
    assert Event.objects.count() == events
    assert _stored_files() == []
    return caught.value.message_dict


def test_one_scrape_alone_is_refused_naming_the_missing_one(revision):
    errors = _refusal(revision, metrics_before=scrape_file("vllm_dp2_before.txt"))

    assert set(errors) == {"metrics_after"}
    assert "Give both scrapes" in errors["metrics_after"][0]


def test_a_line_that_is_not_exposition_text_is_named_with_its_file_and_line(revision):
    errors = _refusal(
        revision,
        metrics_before=scrape_file("vllm_dp2_before.txt"),
        metrics_after=scrape_file("vllm_broken_line.txt"),
    )

    (message,) = errors["metrics_after"]
    assert message.startswith("vllm_broken_line.txt, line 5: ")
    assert "Expected Prometheus exposition text" in message


def test_a_kv_cache_gauge_written_as_a_percentage_is_refused_naming_the_series(revision):
    errors = _refusal(
        revision,
        metrics_before=scrape_file("vllm_dp2_before.txt"),
        metrics_after=scrape_file("vllm_kv_as_percent.txt"),
    )

    (message,) = errors["metrics_after"]
    assert 'vllm:kv_cache_usage_perc{engine="1",model_name="Qwen/Qwen2.5-7B-Instruct"}' in message
    assert "is 87.4; expected a fraction from 0 to 1" in message


def test_scrapes_without_any_peak_gauge_are_refused_saying_what_was_looked_for(revision):
    # TGI exposes no KV-cache gauge, and no DCGM scrape came with it.
    errors = _refusal(
        revision,
        metrics_before=SimpleUploadedFile(
            "tgi_before.txt", (SCRAPES / "tgi_before.txt").read_bytes()
        ),
        metrics_after=SimpleUploadedFile("tgi_after.txt", (SCRAPES / "tgi_after.txt").read_bytes()),
    )

    assert set(errors) == {"metrics_before", "metrics_after"}
    assert "DCGM_FI_DEV_FB_USED, vllm:kv_cache_usage_perc" in errors["metrics_after"][0]


def test_a_scrape_over_the_limit_or_not_utf8_is_refused(revision, monkeypatch):
    monkeypatch.setattr("ledger.services.scrape_peaks.MAX_SCRAPE_BYTES", 1000)
    errors = _refusal(revision, **before_after())
    assert "before.txt: the scrape is larger than" in errors["metrics_before"][0]

    monkeypatch.undo()
    latin1 = "# HELP x caf\xe9\n# TYPE x gauge\nx 1\n".encode("latin-1")
    errors = _refusal(
        revision,
        metrics_before=scrape_file("vllm_dp2_before.txt"),
        metrics_after=scrape_file(name="after.txt", content=latin1),
    )
    assert errors["metrics_after"][0].startswith("after.txt, line 1: not UTF-8 text")


# ---------------------------------------------------------------- the command


def test_the_command_takes_the_scrapes_and_prints_the_peaks(revision):
    out, err = io.StringIO(), io.StringIO()
    before = LOADTEST / "vllm_dp2_before.txt"
    after = LOADTEST / "vllm_dp2_after.txt"

    call_command(
        "import_loadtest",
        "--revision",
        str(revision.pk),
        "--workload",
        "long_context",
        "--metrics-before",
        str(before),
        "--metrics-after",
        str(after),
        str(fixture_path(*VLLM)),
        stdout=out,
        stderr=err,
    )

    data = json.loads(out.getvalue())["report"]
    assert data["kv_cache_peak_pct"] == 87.4
    assert data["gpu_memory_peak_gib"] is None  # no DCGM scrape given
    assert data["results"]["peaks"]["kv_cache_peak_pct"]["metric"] == "vllm:kv_cache_usage_perc"


def test_the_command_names_a_bad_scrape_and_stores_nothing(revision):
    with pytest.raises(CommandError) as caught:
        call_command(
            "import_loadtest",
            "--revision",
            str(revision.pk),
            "--workload",
            "short",
            "--metrics-before",
            str(LOADTEST / "vllm_dp2_before.txt"),
            "--metrics-after",
            str(LOADTEST / "vllm_broken_line.txt"),
            str(fixture_path(*VLLM)),
            stdout=io.StringIO(),
        )

    assert str(caught.value).startswith("metrics_after: ")
    assert "vllm_broken_line.txt, line 5" in str(caught.value)
    assert not LoadTestReport.objects.exists()


# ---------------------------------------------------------------- the upload form and pages


SAVE_URL = "/services/kb-assistant/r1/loadtests/new"
PREVIEW_URL = "/services/kb-assistant/r1/loadtests/preview"


def test_the_upload_form_takes_the_scrapes_and_the_report_page_shows_the_peaks(
    client, owner, revision
):
    client.force_login(owner)

    response = client.post(
        SAVE_URL, {"workload": "long_context", "file": upload(*VLLM), **before_after()}
    )

    report = LoadTestReport.objects.get()
    assert response.status_code == 302
    assert report.kv_cache_peak_pct == 87.4
    page = unescape(client.get(response["Location"]).content.decode())
    gpu = re.search(r'<dd id="peak-gpu-memory">(.*?)</dd>', page, re.S).group(1)
    assert "71.7 GiB on the busiest GPU" in gpu
    assert "a lower bound" in gpu
    kv = re.search(r'<dd id="peak-kv-cache">(.*?)</dd>', page, re.S).group(1)
    assert "87.4 %" in kv
    assert "vllm:kv_cache_usage_perc" in kv


def test_the_preview_shows_the_peaks_and_writes_nothing(client, owner, revision):
    client.force_login(owner)

    response = client.post(
        PREVIEW_URL,
        {"workload": "short", "file": upload(*VLLM), **before_after()},
        HTTP_HX_REQUEST="true",
    )

    page = unescape(response.content.decode())
    assert "71.7 GiB on the busiest GPU" in page
    assert not LoadTestReport.objects.exists()


def test_a_bad_scrape_is_named_beside_its_field_and_nothing_is_saved(client, owner, revision):
    client.force_login(owner)

    response = client.post(
        SAVE_URL,
        {
            "workload": "short",
            "file": upload(*VLLM),
            "metrics_before": scrape_file("vllm_dp2_before.txt"),
            "metrics_after": scrape_file("vllm_broken_line.txt"),
        },
        HTTP_HX_REQUEST="true",
    )

    page = unescape(response.content.decode())
    field = re.search(r'id="field-metrics_after".*?</div>', page, re.S).group(0)
    assert "vllm_broken_line.txt, line 5" in field
    assert not LoadTestReport.objects.exists()
    assert _stored_files() == []


def test_a_report_without_peaks_says_they_were_not_measured(client, auditor, revision):
    report, _ = import_file(revision, *VLLM)
    client.force_login(auditor)

    page = client.get(f"/services/kb-assistant/r1/loadtests/{report.pk}/").content.decode()

    gpu = re.search(r'<dd id="peak-gpu-memory">(.*?)</dd>', page, re.S).group(1)
    assert "not measured" in gpu


# ---------------------------------------------------------------- the SLO matrix


def _peak_cells(service) -> dict[str, dict[str, tuple]]:
    matrix = queries.slo_matrix(type(service).objects.get(pk=service.pk))
    (block,) = matrix["revisions"]
    return {
        row["workload"]: {
            cell["metric"]: (cell["word"], cell["value"], cell["note"])
            for cell in row["cells"]
            if cell["metric"] in ("gpu_memory_peak", "kv_cache_peak")
        }
        for row in block["rows"]
    }


def test_the_slo_matrix_shows_the_peaks_beside_the_percentiles_in_as_many_queries(
    service, revision, django_assert_num_queries
):
    services.set_live_revision(service, revision, actor=None)
    import_file(revision, *VLLM, workload="long_context", **before_after())
    import_file(revision, "sglang", "sglang_c2_n16_details.jsonl", workload="short")
    fresh = type(service).objects.get(pk=service.pk)

    # The revisions; their reports: the peaks are columns of the rows already read.
    with django_assert_num_queries(2):
        queries.slo_matrix(fresh)
    cells = _peak_cells(service)

    assert cells["long_context"] == {
        "gpu_memory_peak": ("no SLO", GPU_PEAK_GIB, ""),
        "kv_cache_peak": ("no SLO", 87.4, ""),
    }
    assert cells["short"] == {
        "gpu_memory_peak": ("no evidence", None, "not measured"),
        "kv_cache_peak": ("no evidence", None, "not measured"),
    }


def test_the_service_page_matrix_prints_the_peak_columns(client, auditor, service, revision):
    services.set_live_revision(service, revision, actor=None)
    import_file(revision, *VLLM, workload="long_context", **before_after())
    client.force_login(auditor)

    page = unescape(client.get(f"/services/{service.slug}/").content.decode())

    assert '<th scope="col">Peak GPU memory</th>' in page
    assert '<th scope="col">Peak KV cache</th>' in page
    cell = re.search(
        r'<tr data-workload="long_context">.*?data-metric="gpu_memory_peak".*?</td>', page, re.S
    ).group(0)
    assert f"{GPU_PEAK_GIB:,.1f} GiB" in cell


# ---------------------------------------------------------------- the API


def test_ci_uploads_the_scrapes_as_multipart_parts_and_reads_the_peaks_back(
    client, owner, revision
):
    token = Token.objects.create(user=owner)
    url = f"/api/revisions/{revision.pk}/loadtests/"
    auth = {"HTTP_AUTHORIZATION": f"Token {token.key}"}

    refused = client.post(
        url,
        {
            "workload": "long_context",
            "file": upload(*VLLM),
            "metrics_before": scrape_file("vllm_dp2_before.txt"),
            "metrics_after": scrape_file("vllm_kv_as_percent.txt"),
        },
        **auth,
    )
    created = client.post(
        url, {"workload": "long_context", "file": upload(*VLLM), **before_after()}, **auth
    )

    assert refused.status_code == 400
    assert "is 87.4; expected a fraction from 0 to 1" in refused.json()["metrics_after"][0]
    assert created.status_code == 201, created.content
    assert created.json()["gpu_memory_peak_gib"] == GPU_PEAK_GIB
    assert created.json()["kv_cache_peak_pct"] == 87.4
    assert LoadTestReport.objects.count() == 1
