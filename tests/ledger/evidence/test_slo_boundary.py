"""Throughput, concurrency and timeout SLOs (table 6-2's performance boundary): the SLO
matrix judges the first two against the report's columns, says why the third has no
evidence, and the form, the API and the registry file refuse bad values by field."""

from __future__ import annotations

import importlib
from decimal import Decimal

import pytest
import yaml

from ledger import queries, services
from ledger.models import Event, LoadTestReport, Service
from tests.ledger.evidence.conftest import import_file
from tests.ledger.test_declarative import apply, refused, registry

pytestmark = pytest.mark.django_db


def _short(service: Service) -> dict[str, dict]:
    """The live revision's short row, by metric."""
    fresh = Service.objects.get(pk=service.pk)
    (block,) = queries.slo_matrix(fresh)["revisions"]
    row = next(r for r in block["rows"] if r["workload"] == "short")
    return {cell["metric"]: cell for cell in row["cells"]}


@pytest.fixture
def live(service, revision):
    services.set_live_revision(service, revision, actor=None)
    return revision


def test_the_import_records_the_first_levels_concurrency(live):
    by_concurrency, _ = import_file(live, "vllm", "vllm_c2_n20_detailed.json")
    by_rate, _ = import_file(live, "guidellm", "rate-sweep", "benchmarks.json", workload="batch")

    assert by_concurrency.concurrency == 2.0
    # A rate-driven level records the rate, not a concurrency.
    assert by_rate.concurrency is None
    assert by_rate.results["levels"][0]["conditions"]["request_rate"] == 0.2


def test_the_matrix_judges_minimum_throughput_and_concurrency_attained(service, live):
    # vLLM sample: max_concurrency 2, 54.2 output tokens/s.
    import_file(live, "vllm", "vllm_c2_n20_detailed.json")
    services.update_service(
        service, actor=None, slo_min_output_tokens_per_s=54, slo_min_concurrency=2
    )

    cells = _short(service)

    assert cells["throughput"]["word"] == "met"
    assert cells["throughput"]["value"] == pytest.approx(54.249, abs=1e-3)
    assert (cells["throughput"]["slo"], cells["throughput"]["bound"]) == (54.0, "min")
    assert cells["concurrency"]["word"] == "met"
    assert (cells["concurrency"]["value"], cells["concurrency"]["slo"]) == (2.0, 2.0)


def test_the_matrix_calls_a_value_below_a_minimum_breached(service, live):
    import_file(live, "vllm", "vllm_c2_n20_detailed.json")
    services.update_service(
        service, actor=None, slo_min_output_tokens_per_s=55, slo_min_concurrency=3
    )

    cells = _short(service)

    assert cells["throughput"]["word"] == "breached"
    assert cells["concurrency"]["word"] == "breached"
    # The latency SLOs of the same report are still met: only the minimums miss.
    assert cells["ttft_p95"]["word"] == "met"


def test_a_rate_driven_report_has_no_concurrency_to_judge(service, live):
    import_file(live, "guidellm", "rate-sweep", "benchmarks.json")
    services.update_service(
        service, actor=None, slo_min_output_tokens_per_s=5, slo_min_concurrency=2
    )

    cells = _short(service)

    assert cells["concurrency"]["word"] == "no evidence"
    assert cells["concurrency"]["note"] == "not in the report"
    assert cells["throughput"]["word"] == "met"


def test_the_timeout_rate_is_never_measured_and_says_why(service, live):
    import_file(live, "vllm", "vllm_c2_n20_detailed.json")
    assert _short(service)["timeout_rate"]["word"] == "no SLO"

    services.update_service(service, actor=None, slo_timeout_rate_pct=Decimal("0.5"))
    cell = _short(service)["timeout_rate"]

    assert (cell["word"], cell["value"], cell["slo"]) == ("no evidence", None, 0.5)
    assert cell["note"] == (
        "load-test reports do not record timeouts; the periodic review judges it on the "
        "gateway's days"
    )


def test_unset_boundary_slos_read_no_slo(service, live):
    import_file(live, "vllm", "vllm_c2_n20_detailed.json")

    cells = _short(service)

    assert cells["throughput"]["word"] == "no SLO"
    assert cells["concurrency"]["word"] == "no SLO"
    # Shown all the same, so the reader sees what was measured.
    assert cells["concurrency"]["value"] == 2.0


def test_the_service_page_shows_the_boundary_slos_and_the_matrix_columns(
    client, owner, service, live
):
    import_file(live, "vllm", "vllm_c2_n20_detailed.json")
    services.update_service(
        service,
        actor=None,
        slo_min_output_tokens_per_s=400,
        slo_min_concurrency=16,
        slo_timeout_rate_pct=Decimal("0.50"),
    )
    client.force_login(owner)

    page = client.get(f"/services/{service.slug}/").content.decode()

    assert "throughput ≥ 400 output tokens/s" in page
    assert "concurrency ≥ 16" in page
    assert "timeouts ≤ 0.50%" in page
    assert 'data-metric="throughput" data-word="breached"' in page
    assert 'data-metric="concurrency" data-word="breached"' in page
    assert 'data-metric="timeout_rate" data-word="no evidence"' in page
    assert "SLO ≥ 16 requests" in page


# ---------------------------------------------------------------- bad input, by field


def _service_form(team, **overrides):
    return {
        "slug": "kb-assistant",
        "name": "Knowledge-base assistant",
        "description": "",
        "team": team.pk,
        "tier": "internal",
        "exposure": "internal",
        "task_types": "chat",
        "tenants": "support",
        "slo_ttft_p95_ms": "800",
        "slo_ttft_p99_ms": "1500",
        "slo_tpot_ms": "",
        "slo_error_rate_pct": "0.5",
        "slo_min_output_tokens_per_s": "400",
        "slo_min_concurrency": "16",
        "slo_timeout_rate_pct": "0.2",
        "review_cadence_days": "90",
        **overrides,
    }


def test_the_form_sets_the_boundary_slos(client, owner, team):
    client.force_login(owner)

    response = client.post("/services/new", _service_form(team))

    assert response.status_code == 302
    service = Service.objects.get(slug="kb-assistant")
    assert service.slo_min_output_tokens_per_s == 400
    assert service.slo_min_concurrency == 16
    assert service.slo_timeout_rate_pct == Decimal("0.20")


def test_the_form_refuses_bad_boundary_slos_next_to_each_field(client, owner, team):
    client.force_login(owner)

    response = client.post(
        "/services/new",
        _service_form(
            team,
            slo_min_output_tokens_per_s="0",
            slo_min_concurrency="-4",
            slo_timeout_rate_pct="120",
        ),
    )

    assert response.status_code == 200
    errors = response.context["form"].errors
    assert set(errors) == {
        "slo_min_output_tokens_per_s",
        "slo_min_concurrency",
        "slo_timeout_rate_pct",
    }
    assert errors["slo_timeout_rate_pct"] == ["Ensure this value is less than or equal to 100."]
    assert not Service.objects.exists()
    assert not Event.objects.exists()


def test_the_api_refuses_bad_boundary_slos_naming_each_field(client, owner, team):
    client.force_login(owner)

    response = client.post(
        "/api/services/",
        {
            "slug": "kb-assistant",
            "name": "KB",
            "team": "kb-team",
            "slo_min_output_tokens_per_s": 0,
            "slo_min_concurrency": "many",
            "slo_timeout_rate_pct": "-1",
        },
        content_type="application/json",
    )

    assert response.status_code == 400
    assert set(response.json()) == {
        "slo_min_output_tokens_per_s",
        "slo_min_concurrency",
        "slo_timeout_rate_pct",
    }
    assert not Service.objects.exists()


def test_the_api_returns_the_boundary_slos(client, owner, team):
    client.force_login(owner)

    response = client.post(
        "/api/services/",
        {
            "slug": "kb-assistant",
            "name": "KB",
            "team": "kb-team",
            "slo_min_output_tokens_per_s": 400,
            "slo_min_concurrency": 16,
            "slo_timeout_rate_pct": "0.5",
        },
        content_type="application/json",
    )

    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["slo_min_output_tokens_per_s"], body["slo_min_concurrency"]) == (400, 16)
    assert body["slo_timeout_rate_pct"] == "0.50"


def _file(tmp_path, document: dict):
    path = tmp_path / "registry.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def test_the_registry_file_sets_the_boundary_slos_under_slos(owner, tmp_path):
    document = registry()
    document["services"][0]["slos"] |= {
        "min_output_tokens_per_s": 400,
        "min_concurrency": 16,
        "timeout_rate_pct": 0.5,
    }

    apply(_file(tmp_path, document))

    service = Service.objects.get(slug="kb-assistant")
    assert (service.slo_min_output_tokens_per_s, service.slo_min_concurrency) == (400, 16)
    assert service.slo_timeout_rate_pct == Decimal("0.50")


def test_the_registry_file_refuses_a_bad_boundary_slo_by_its_path(owner, tmp_path):
    document = registry()
    document["services"][0]["slos"] |= {"min_concurrency": 0, "timeout_rate_pct": 101}

    stderr = refused(_file(tmp_path, document))

    assert (
        "services[0].slos.min_concurrency: Ensure this value is greater than or equal to 1."
        in stderr
    )
    assert (
        "services[0].slos.timeout_rate_pct: Ensure this value is less than or equal to 100."
        in stderr
    )
    assert not Service.objects.exists()


def test_migration_0020_fills_the_concurrency_of_older_reports_from_their_results(live):
    from django.apps import apps

    migration = importlib.import_module("ledger.migrations.0020_service_performance_slos")
    by_concurrency, _ = import_file(live, "vllm", "vllm_c2_n20_detailed.json")
    by_rate, _ = import_file(live, "guidellm", "rate-sweep", "benchmarks.json", workload="batch")
    LoadTestReport.objects.update(concurrency=None)  # as reports were before 0020

    migration.concurrency_from_results(apps, None)

    by_concurrency.refresh_from_db()
    by_rate.refresh_from_db()
    assert by_concurrency.concurrency == 2.0
    assert by_rate.concurrency is None


def test_the_api_gives_a_reports_concurrency(client, owner, live):
    report, _ = import_file(live, "vllm", "vllm_c2_n20_detailed.json")
    client.force_login(owner)

    response = client.get(f"/api/loadtests/{report.pk}/")

    assert response.status_code == 200
    assert response.json()["concurrency"] == 2.0
