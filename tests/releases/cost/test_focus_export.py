"""The cost as FOCUS 1.0 CSV: `manage.py export_cost`, checked by the FinOps
Foundation's own validator (tests/support/focus_validator.py)."""

from __future__ import annotations

import csv
import datetime as dt
import json
from decimal import Decimal

import pytest
from django.core.management import CommandError, call_command

from ledger.models import Service
from releases.cost.focus import COLUMNS, FOCUS_COLUMNS
from tests.releases.cost.test_cost_days import TODAY, breakdown, materialize, price, summary
from tests.releases.factories import build_world, report
from tests.support.focus_validator import validate_focus

pytestmark = pytest.mark.django_db

# The columns FOCUS 1.0 requires (the validator's *_Required rules, ResourceId spelt as
# the specification spells it).
REQUIRED = {
    "AvailabilityZone", "BilledCost", "BillingAccountId", "BillingAccountName",
    "BillingCurrency", "BillingPeriodEnd", "BillingPeriodStart", "ChargeCategory",
    "ChargeClass", "ChargeDescription", "ChargePeriodEnd", "ChargePeriodStart",
    "CommitmentDiscountCategory", "CommitmentDiscountId", "CommitmentDiscountName",
    "CommitmentDiscountStatus", "CommitmentDiscountType", "ConsumedQuantity", "ConsumedUnit",
    "ContractedCost", "ContractedUnitPrice", "EffectiveCost", "InvoiceIssuer", "ListCost",
    "ListUnitPrice", "PricingCategory", "PricingQuantity", "PricingUnit", "Provider",
    "Publisher", "RegionId", "RegionName", "ResourceId", "ResourceName", "ResourceType",
    "ServiceCategory", "ServiceName", "SkuId", "SkuPriceId", "SubAccountId", "SubAccountName",
    "Tags",
}  # fmt: skip


@pytest.fixture
def priced_month(team):
    """Two services over three days: rows by tenant and task type, a scrape-only day, and
    one day before the price sheet."""
    price(since=TODAY - dt.timedelta(days=2))
    worlds = [build_world(team), build_world(team, slug="legal-drafts")]
    report(worlds[0].live, "short", output_tokens_per_s=2000)
    for world in worlds:
        for offset in range(3):
            day = summary(
                world.service, TODAY - dt.timedelta(days=offset), requests=300, output_tokens=9000
            )
            breakdown(day, "support", "chat", requests=200, output_tokens=6000, input_tokens=90)
            breakdown(day, "sales", "rag", requests=100, output_tokens=3000, errors_5xx=4)
        summary(world.service, TODAY - dt.timedelta(days=3), requests=10)  # no price yet
    summary(worlds[1].service, TODAY - dt.timedelta(days=4), source="scrape", requests=10)
    materialize()
    return worlds


def _export(tmp_path, *args: str) -> tuple[list[dict[str, str]], str]:
    output = tmp_path / "cost.csv"
    from io import StringIO

    out, err = StringIO(), StringIO()
    call_command(
        "export_cost",
        "--since",
        str(TODAY - dt.timedelta(days=4)),
        "--until",
        str(TODAY + dt.timedelta(days=1)),
        "--output",
        str(output),
        *args,
        stdout=out,
        stderr=err,
    )
    with output.open(newline="") as f:
        return list(csv.DictReader(f)), out.getvalue() + err.getvalue()


def test_the_export_passes_the_focus_validator_and_adds_up_to_the_cent(priced_month, tmp_path):
    rows, said = _export(tmp_path)

    verdict = validate_focus(tmp_path / "cost.csv", tmp_path)
    assert verdict.passed, "\n".join(verdict.failed) + verdict.console
    assert verdict.checks > 100
    with (tmp_path / "cost.csv").open(newline="") as f:
        header = next(csv.reader(f))
    assert set(header) >= REQUIRED
    assert tuple(header) == COLUMNS
    # Two services x three priced days x (two tenants + idle).
    assert len(rows) == 18
    assert "18 rows for 6 service-days" in said
    assert "3 service-days left out: no price sheet" in said
    for row in rows:
        assert row["ChargeCategory"] == "Usage"
        assert row["BilledCost"] == row["EffectiveCost"] == row["ListCost"] == row["ContractedCost"]
        assert row["SkuPriceId"] == f"H100-80GB@{TODAY - dt.timedelta(days=2)}"
        assert row["ResourceId"].startswith("sha256:")
        assert json.loads(row["Tags"])["tenant"] == row["x_Tenant"]
    # Each service-day's rows add up to its GPU-hours at the price, to the cent.
    for slug in ("kb-assistant", "legal-drafts"):
        for offset in range(3):
            day = f"{TODAY - dt.timedelta(days=offset)}T00:00:00Z"
            parts = [r for r in rows if r["ServiceName"] == slug and r["ChargePeriodStart"] == day]
            assert [r["x_Tenant"] for r in parts] == ["sales", "support", "idle"]
            assert sum(Decimal(r["BilledCost"]) for r in parts) == Decimal("58.80")
            assert sum(Decimal(r["ConsumedQuantity"]) for r in parts) == Decimal(24)
    kb_today = [
        r for r in rows if r["ServiceName"] == "kb-assistant" and r["ChargePeriodStart"] == day
    ]
    support = next(r for r in kb_today if r["x_Tenant"] == "support")
    assert (support["x_TaskType"], support["x_OutputTokens"], support["x_InputTokens"]) == (
        "chat",
        "6000",
        "90",
    )
    sales = next(r for r in kb_today if r["x_Tenant"] == "sales")
    assert (sales["x_Requests"], sales["x_AcceptedAnswers"]) == ("100", "96")


def test_the_validator_refuses_what_focus_does_not_allow(priced_month, tmp_path):
    """Not a stub: the same file with a lower-case currency and no ChargeCategory fails."""
    rows, _said = _export(tmp_path, "--service", "kb-assistant")
    broken = tmp_path / "broken.csv"
    with broken.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=[c for c in COLUMNS if c != "ChargeCategory"])
        writer.writeheader()
        for row in rows:
            row.pop("ChargeCategory")
            writer.writerow(row | {"BillingCurrency": "usd"})

    verdict = validate_focus(broken, tmp_path)

    assert not verdict.passed
    assert any(name.startswith("ChargeCategory_Required") for name in verdict.failed)
    assert any(name.startswith("BillingCurrency_IsCurrencyCode") for name in verdict.failed)
    assert {r["ServiceName"] for r in rows} == {"kb-assistant"}


def test_a_formula_tenant_is_written_as_text(team, tmp_path):
    world = build_world(team)
    Service.objects.filter(pk=world.service.pk).update(tenants=["=HYPERLINK(1)"])
    price()
    day = summary(world.service, TODAY, requests=1, output_tokens=1)
    breakdown(day, "=HYPERLINK(1)", "chat", requests=1, output_tokens=1)
    materialize()

    rows, _said = _export(tmp_path)

    assert rows[0]["x_Tenant"] == "'=HYPERLINK(1)"
    assert rows[0]["ChargeDescription"].startswith("GPU-hours of kb-assistant")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--since", "2026-11-30", "--until", "2026-11-30"], "is not after --since"),
        (["--since", "30/11/2026", "--until", "2026-12-01"], "expected a day, YYYY-MM-DD"),
        (["--since", "2026-11-31", "--until", "2026-12-01"], "--since '2026-11-31'"),
        (
            ["--since", "2026-11-01", "--until", "2026-12-01", "--service", "nope"],
            "no service is named nope",
        ),
    ],
)
def test_bad_arguments_are_named(args, message, tmp_path, db):
    with pytest.raises(CommandError, match=message):
        call_command("export_cost", *args, "--output", str(tmp_path / "x.csv"))
    assert not (tmp_path / "x.csv").exists()


def test_focus_columns_come_first_in_the_specifications_order():
    assert COLUMNS[: len(FOCUS_COLUMNS)] == FOCUS_COLUMNS
    assert list(FOCUS_COLUMNS) == sorted(FOCUS_COLUMNS)
    assert all(column.startswith("x_") for column in COLUMNS[len(FOCUS_COLUMNS) :])


def test_the_auditors_exports_carry_the_periods_cost(priced_month, auditor, tmp_path):
    """csv and bundle alike: the days of the period (its end excluded), the services the
    filters select; a release filter selects no cost; the bundle still verifies."""
    from ledger import signing
    from releases.audit.records import AuditFilters
    from releases.audit.services import exports
    from tests.releases.test_exports import VERIFIER, _zip

    def export(fmt: str, **filters):
        period = AuditFilters(
            since=dt.datetime.combine(TODAY - dt.timedelta(days=1), dt.time(), tzinfo=dt.UTC),
            until=dt.datetime.combine(TODAY + dt.timedelta(days=1), dt.time(), tzinfo=dt.UTC),
            **filters,
        )
        built = exports.build_export(
            exports.request_export(actor=auditor, format=fmt, filters=period).pk
        )
        assert built.state == "ready", built.error
        return built

    def focus(archive, name: str) -> list[dict[str, str]]:
        import io

        return list(csv.DictReader(io.TextIOWrapper(archive.open(name), "utf-8")))

    everything = focus(_zip(export("csv")), "cost-focus.csv")
    one = focus(_zip(export("jsonl", service="legal-drafts")), "cost-focus.csv")
    by_release = focus(_zip(export("csv", state="approved")), "cost-focus.csv")
    bundle_export = export("bundle", service="kb-assistant")

    assert {(r["ServiceName"], r["ChargePeriodStart"][:10]) for r in everything} == {
        (slug, str(TODAY - dt.timedelta(days=offset)))
        for slug in ("kb-assistant", "legal-drafts")
        for offset in (0, 1)
    }
    assert {r["ServiceName"] for r in one} == {"legal-drafts"}
    assert by_release == []
    bundle = tmp_path / bundle_export.filename
    with bundle_export.file.open("rb") as stored:
        bundle.write_bytes(stored.read())
    import subprocess
    import sys
    import zipfile

    in_bundle = focus(zipfile.ZipFile(bundle), "records/cost-focus.csv")
    assert {r["ServiceName"] for r in in_bundle} == {"kb-assistant"} and len(in_bundle) == 6
    key = tmp_path / "key.pem"
    key.write_text(signing.public_key_pem())
    verified = subprocess.run(
        [sys.executable, str(VERIFIER), str(bundle), "--key", str(key)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert verified.returncode == 0, verified.stdout + verified.stderr
