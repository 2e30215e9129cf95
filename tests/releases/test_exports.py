"""Exports requested through the pages and the API, built by the task's body, stored in a
real S3-compatible server (moto's, on loopback) or the local folder, downloaded through
links that expire; every request and download an Event with the digest.

The task itself, in a real worker process, is tests/releases/test_export_worker.py."""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
import io
import json
import subprocess
import sys
import urllib.error
import urllib.request
import zipfile
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
import time_machine
from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.urls import reverse
from django.utils import timezone

from ledger import signing
from ledger.models import Event
from releases.audit.records import AuditFilters
from releases.audit.services import exports
from releases.governance import services
from releases.models import Export
from tests.releases.factories import UNDECLARED, build_world, file_release

pytestmark = pytest.mark.django_db

VERIFIER = Path(settings.BASE_DIR) / "scripts" / "verify_bundle.py"
OCT = dt.datetime(2026, 10, 1, tzinfo=dt.UTC)
NOV = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)


@pytest.fixture
def october(team, owner, signers, other_sre):
    """An approved release with a waiver (by another platform SRE than the one who signs)
    in October, a formula in its summary; a draft of another service in November."""
    with time_machine.travel(OCT + dt.timedelta(days=3), tick=False):
        world = build_world(team)
        release = file_release(
            world, owner, summary='=HYPERLINK("http://evil")', metrics_declared=UNDECLARED
        )
        services.grant_waiver(
            release,
            actor=other_sre,
            gate="metrics_coverage",
            reason="+1 from the board",
            expires_at=timezone.now() + dt.timedelta(days=5),
        )
        services.submit_release(release, actor=owner)
        for role, signer in signers.items():
            services.sign_off(release, actor=signer, role=role, decision="approve")
    with time_machine.travel(NOV + dt.timedelta(days=2), tick=False):
        other = build_world(team, slug="sql-agent")
        file_release(other, owner)
    return release


def _request(auditor, fmt: str, **filters) -> Export:
    return exports.request_export(
        actor=auditor, format=fmt, filters=AuditFilters(since=OCT, until=NOV, **filters)
    )


def _zip(export: Export) -> zipfile.ZipFile:
    with export.file.open("rb") as stored:
        return zipfile.ZipFile(io.BytesIO(stored.read()))


def test_a_request_is_queued_and_recorded_as_an_event(auditor, october):
    export = _request(auditor, "csv", service="kb-assistant")

    assert export.state == "queued"
    event = Event.objects.get(action="export.requested")
    assert event.actor == auditor
    assert event.payload_data["format"] == "csv"
    assert event.payload_data["filters"] == {"service": "kb-assistant"}


def test_csv_neutralises_full_width_formula_signs(team, owner, auditor):
    # U+FF1D, U+FF0B, U+FF0D, U+FF20: spreadsheets read the full-width forms as = + - @.
    with time_machine.travel(OCT + dt.timedelta(days=3), tick=False):
        file_release(build_world(team), owner, summary='\uff1dHYPERLINK("http://evil")')

    archive = _zip(exports.build_export(_request(auditor, "csv").pk))

    releases = list(csv.DictReader(io.TextIOWrapper(archive.open("releases.csv"), "utf-8")))
    assert releases[0]["summary"] == '\'\uff1dHYPERLINK("http://evil")'
    events = list(csv.DictReader(io.TextIOWrapper(archive.open("events.csv"), "utf-8")))
    assert not any(
        value.startswith(("\uff1d", "\uff0b", "\uff0d", "\uff20"))
        for row in (*releases, *events)
        for value in row.values()
    )


def test_only_auditors_and_security_may_request(owner, sre, security, auditor, october):
    for person in (owner, sre):
        with pytest.raises(PermissionDenied):
            _request(person, "csv")
    assert _request(security, "csv").requested_by == security
    assert _request(auditor, "csv").requested_by == auditor


def test_csv_has_one_file_per_record_type_spreadsheet_safe(auditor, october):
    export = exports.build_export(_request(auditor, "csv").pk)

    export.refresh_from_db()
    assert export.state == "ready" and export.progress == 100
    archive = _zip(export)
    assert sorted(archive.namelist()) == [
        "cost-focus.csv",
        "drills.csv",
        "events.csv",
        "gateway_policies.csv",
        "manifest.json",
        "releases.csv",
        "reviews.csv",
        "revisions.csv",
        "rollbacks.csv",
        "signoffs.csv",
        "waivers.csv",
    ]
    releases = list(csv.DictReader(io.TextIOWrapper(archive.open("releases.csv"), "utf-8")))
    assert len(releases) == 1  # November's draft is outside the period
    assert releases[0]["summary"] == '\'=HYPERLINK("http://evil")'
    assert releases[0]["state"] == "approved"
    waivers = list(csv.DictReader(io.TextIOWrapper(archive.open("waivers.csv"), "utf-8")))
    assert waivers[0]["reason"] == "'+1 from the board"
    assert waivers[0]["granted_by"] == "pat"
    signoffs = list(csv.DictReader(io.TextIOWrapper(archive.open("signoffs.csv"), "utf-8")))
    assert {row["role"] for row in signoffs} == {
        "model_team",
        "platform",
        "security_compliance",
        "business_owner",
    }
    manifest = json.loads(archive.read("manifest.json"))
    assert manifest["records"] == export.record_counts
    assert manifest["chain_head"]["sequence"] == export.chain_head_sequence
    for entry in manifest["files"]:
        assert hashlib.sha256(archive.read(entry["path"])).hexdigest() == entry["sha256"]
    with export.file.open("rb") as stored:
        assert hashlib.sha256(stored.read()).hexdigest() == export.sha256


def test_jsonl_round_trips_the_records(auditor, october):
    export = exports.build_export(_request(auditor, "jsonl", path="normal").pk)

    archive = _zip(export)
    releases = [json.loads(line) for line in archive.open("releases.jsonl")]
    assert releases[0]["summary"] == '=HYPERLINK("http://evil")'  # as it is, in JSON
    assert releases[0]["id"] == october.pk
    # Revisions are written as their labels, as the pages name them.
    assert releases[0]["to_revision"] == f"r{october.to_revision.number}"
    assert releases[0]["rollback_target"] == (
        f"r{october.rollback_target.number}" if october.rollback_target else None
    )
    events = [json.loads(line) for line in archive.open("events.jsonl")]
    # Narrowed by path: the events of matching releases only.
    assert {e["subject_type"] for e in events} == {"releases.release"}
    assert len(events) == export.record_counts["events"] > 0


def test_a_bundle_carries_the_release_records_and_verifies_offline(auditor, october, tmp_path):
    export = exports.build_export(_request(auditor, "bundle").pk)

    assert export.state == "ready"
    bundle = tmp_path / export.filename
    with export.file.open("rb") as stored:
        bundle.write_bytes(stored.read())
    names = zipfile.ZipFile(bundle).namelist()
    for kind in ("releases", "signoffs", "waivers", "events"):
        assert f"records/{kind}.jsonl" in names
    key = tmp_path / "key.pem"
    key.write_text(signing.public_key_pem())
    result = subprocess.run(
        [sys.executable, str(VERIFIER), str(bundle), "--key", str(key)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("verified:")
    manifest = json.loads(zipfile.ZipFile(bundle).read("manifest.json"))
    assert manifest["chain_head"]["sequence"] == export.chain_head_sequence
    assert manifest["chain_head"]["hash"] == export.chain_head_hash


def test_ready_is_an_event_with_the_digest_and_chain_head(auditor, october):
    export = exports.build_export(_request(auditor, "csv").pk)

    event = Event.objects.get(action="export.ready")
    assert event.payload_data["sha256"] == export.sha256
    assert event.payload_data["chain_head"]["sequence"] == export.chain_head_sequence
    assert event.payload_data["requested_by"] == "ada"


def test_a_build_runs_once_however_often_the_task_is_delivered(auditor, october):
    export = _request(auditor, "csv")
    assert exports.build_export(export.pk) is not None

    assert exports.build_export(export.pk) is None
    assert Event.objects.filter(action="export.ready").count() == 1


def test_a_failed_build_says_why_and_is_an_event(auditor, october, s3_storage, settings):
    export = _request(auditor, "csv")
    # The object store has no such bucket (deleted, or a typo in the settings).
    settings.AWS_STORAGE_BUCKET_NAME = s3_storage + "-gone"

    exports.build_export(export.pk)

    export.refresh_from_db()
    assert export.state == "failed"
    assert "NoSuchBucket" in export.error
    assert not export.file
    assert Event.objects.get(action="export.failed").payload_data["error"] == export.error[:500]


# ---------------------------------------------------------------- downloads


def test_s3_download_is_a_presigned_link_that_expires(auditor, october, s3_storage, settings):
    """moto's server honours the signature's presence but enforces neither the signature
    nor the expiry (checked: a link past X-Amz-Expires still answers 200 there), so this
    reads the expiry the link is signed with; real S3 refuses it after that."""
    settings.EXPORT_LINK_EXPIRY_SECONDS = 120
    export = exports.build_export(_request(auditor, "csv").pk)
    assert export.file.name.startswith(f"exports/{export.pk}/")

    before = dt.datetime.now(dt.UTC).replace(microsecond=0)
    link = exports.download_link(export, actor=auditor)
    after = dt.datetime.now(dt.UTC)

    query = parse_qs(urlsplit(link.url).query)
    assert query["X-Amz-Expires"] == ["120"] and query["X-Amz-Signature"]
    signed_at = dt.datetime.strptime(query["X-Amz-Date"][0], "%Y%m%dT%H%M%SZ").replace(
        tzinfo=dt.UTC
    )
    # Bracketed by the moments around the call, not by a band: a busy machine is slow.
    assert before <= signed_at <= after
    two_minutes = dt.timedelta(seconds=120)
    assert before + two_minutes <= link.expires_at <= after + two_minutes
    with urllib.request.urlopen(link.url, timeout=10) as response:
        body = response.read()
        assert export.filename in response.headers["Content-Disposition"]
    assert hashlib.sha256(body).hexdigest() == export.sha256
    with pytest.raises(urllib.error.HTTPError) as unsigned:
        urllib.request.urlopen(link.url.split("?")[0], timeout=10)
    assert unsigned.value.code == 403
    event = Event.objects.get(action="export.downloaded")
    assert (event.actor, event.payload_data["sha256"]) == (auditor, export.sha256)


def test_local_download_is_a_signed_url_of_this_site_that_expires(client, auditor, october):
    export = exports.build_export(_request(auditor, "csv").pk)
    client.force_login(auditor)

    response = client.post(reverse("releases:export_download", args=[export.pk]))

    assert response.status_code == 302
    url = response["Location"]
    assert url.startswith(f"/audit/exports/{export.pk}/file/")
    client.logout()  # the link is the permission, as a presigned one is
    download = client.get(url)
    assert download.status_code == 200
    assert hashlib.sha256(b"".join(download.streaming_content)).hexdigest() == export.sha256
    assert Event.objects.filter(action="export.downloaded", actor=auditor).count() == 1
    later = timezone.now() + dt.timedelta(seconds=settings.EXPORT_LINK_EXPIRY_SECONDS + 1)
    with time_machine.travel(later):
        expired = client.get(url)
    assert expired.status_code == 410
    assert "expired" in expired.content.decode()
    tampered = client.get(url.replace(f"/exports/{export.pk}/", "/exports/999/"))
    assert tampered.status_code == 410


def test_an_unready_export_cannot_be_downloaded(client, auditor, october):
    export = _request(auditor, "csv")
    client.force_login(auditor)

    response = client.post(reverse("releases:export_download", args=[export.pk]), follow=True)

    assert "only a ready export can be downloaded" in response.content.decode()
    assert not Event.objects.filter(action="export.downloaded").exists()


# ---------------------------------------------------------------- pages


def test_the_audit_page_requests_an_export_of_its_filters(client, auditor, october):
    client.force_login(auditor)

    response = client.post(
        reverse("releases:export_request"),
        {"format": "bundle", "date_from": "2026-10-01", "date_to": "2026-10-31", "service": ""},
    )

    export = Export.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("releases:export_detail", args=[export.pk])
    assert (export.period_start, export.period_end) == (OCT, NOV)
    assert export.format == "bundle"


def test_a_bad_request_keeps_the_values_and_names_the_field(client, auditor, october):
    client.force_login(auditor)

    response = client.post(
        reverse("releases:export_request"), {"format": "pdf", "service": "kb-assistant"}
    )

    assert response.status_code == 400
    body = response.content.decode()
    assert "&#x27;pdf&#x27; is not one of the choices of Format" in body
    assert 'value="kb-assistant"' in body
    assert not Export.objects.exists()


def test_the_status_region_polls_while_building_and_stops_when_ready(client, auditor, october):
    export = _request(auditor, "csv")
    client.force_login(auditor)
    url = reverse("releases:export_detail", args=[export.pk])

    building = client.get(url, HTTP_HX_REQUEST="true").content.decode()
    page = client.get(url).content.decode()
    exports.build_export(export.pk)
    ready = client.get(url, HTTP_HX_REQUEST="true").content.decode()

    assert 'hx-trigger="every 2s"' in building and "<html" not in building
    assert '<meta http-equiv="refresh" content="5">' in page  # without JavaScript
    assert "hx-trigger" not in ready
    assert export.__class__.objects.get().sha256 in ready
    assert "Download" in ready


def test_exports_pages_are_for_exporters(client, owner, export_pages):
    client.force_login(owner)
    for url in export_pages:
        assert client.get(url).status_code == 403


@pytest.fixture
def export_pages(auditor, october):
    export = _request(auditor, "csv")
    return [
        reverse("releases:export_list"),
        reverse("releases:export_request"),
        reverse("releases:export_detail", args=[export.pk]),
    ]


def test_the_exports_list_reads_in_a_constant_number_of_queries(
    client, auditor, october, django_assert_num_queries
):
    for fmt in ("csv", "jsonl", "bundle"):
        _request(auditor, fmt)
    client.force_login(auditor)
    client.get(reverse("releases:export_list"))

    # session, user, groups (the rule), the page's count, its rows with their requesters
    with django_assert_num_queries(5):
        response = client.get(reverse("releases:export_list"))
    assert len(response.context["page"].object_list) == 3


# ---------------------------------------------------------------- API


def test_the_api_answers_at_once_and_reports_progress_then_a_link(client, auditor, october):
    client.force_login(auditor)

    created = client.post(
        "/api/exports/",
        {"format": "jsonl", "since": OCT.isoformat(), "until": NOV.isoformat()},
        content_type="application/json",
    )

    assert created.status_code == 202
    assert created.json()["state"] == "queued"
    export_id = created.json()["id"]
    exports.build_export(export_id)
    shown = client.get(f"/api/exports/{export_id}/").json()
    assert shown["state"] == "ready" and shown["progress"] == 100
    assert shown["chain_head"]["sequence"] >= 1
    link = client.post(f"/api/exports/{export_id}/download/").json()
    assert link["sha256"] == shown["sha256"]
    assert link["url"].startswith("http://testserver/audit/exports/")


def test_the_api_names_the_bad_field(client, auditor, october):
    client.force_login(auditor)

    unknown = client.post(
        "/api/exports/", {"format": "csv", "service": "nope"}, content_type="application/json"
    )
    backwards = client.post(
        "/api/exports/",
        {"format": "csv", "since": NOV.isoformat(), "until": OCT.isoformat()},
        content_type="application/json",
    )

    assert (unknown.status_code, set(unknown.json())) == (400, {"service"})
    assert (backwards.status_code, set(backwards.json())) == (400, {"until"})
    assert not Export.objects.exists()


def test_the_api_refuses_others_the_list_too(client, owner, october):
    client.force_login(owner)
    assert client.get("/api/exports/").status_code == 403


def test_the_command_says_when_a_period_holds_no_record(october, tmp_path):
    """The README's example once named a period the demo had no records in, and the
    command wrote six files of headers without a word (issue 27 item 8g)."""
    from django.core.management import call_command

    empty, full = io.StringIO(), io.StringIO()
    call_command(
        "export_audit",
        since="2025-01-01",
        until="2025-02-01",
        format="csv",
        output=str(tmp_path / "empty"),
        stdout=empty,
    )
    call_command(
        "export_audit",
        since="2026-10-01",
        until="2026-11-01",
        format="csv",
        output=str(tmp_path / "full"),
        stdout=full,
    )
    call_command(
        "export_audit",
        since="2025-01-01",
        until="2025-02-01",
        format="bundle",
        output=str(tmp_path / "empty.zip"),
        stdout=empty,
    )

    assert empty.getvalue().count("0 records in this period") == 2
    assert "signoffs.csv: 0 records written" in empty.getvalue()
    assert "0 records in this period" not in full.getvalue()
    assert "signoffs.csv: 4 records written" in full.getvalue()


def test_the_command_writes_a_file_per_record_type_and_bundles_them(october, tmp_path):
    from django.core.management import call_command

    out = tmp_path / "csv"
    call_command(
        "export_audit", since="2026-10-01", until="2026-11-01", format="csv", output=str(out)
    )
    bundle = tmp_path / "oct.zip"
    call_command(
        "export_audit", since="2026-10-01", until="2026-11-01", format="bundle", output=str(bundle)
    )

    assert sorted(p.name for p in out.iterdir()) == [
        "cost-focus.csv",
        "drills.csv",
        "events.csv",
        "gateway_policies.csv",
        "releases.csv",
        "reviews.csv",
        "revisions.csv",
        "rollbacks.csv",
        "signoffs.csv",
        "waivers.csv",
    ]
    rows = list(csv.DictReader((out / "signoffs.csv").open(encoding="utf-8")))
    assert len(rows) == 4 and {r["release"] for r in rows} == {str(october.pk)}
    names = zipfile.ZipFile(bundle).namelist()
    assert {"records/releases.jsonl", "records/signoffs.jsonl", "records/waivers.jsonl"} <= set(
        names
    )


def test_a_period_that_ends_before_the_default_start_names_the_end(client, auditor):
    client.force_login(auditor)

    response = client.post(
        "/api/exports/",
        {"format": "csv", "until": "2000-01-01T00:00:00Z"},
        content_type="application/json",
    )

    assert response.status_code == 400
    assert "without a start it starts on 2000-01-01" in response.json()["until"][0]


def test_the_api_list_reads_in_a_constant_number_of_queries(
    client, auditor, october, django_assert_num_queries
):
    for fmt in ("csv", "jsonl", "bundle"):
        _request(auditor, fmt)
    client.force_login(auditor)
    client.get("/api/exports/")

    # session, user, groups (the rule), the page's count, its rows with their requesters
    with django_assert_num_queries(5):
        response = client.get("/api/exports/")
    assert response.json()["count"] == 3
