"""`manage.py seed_demo`: a believable registry, idempotent, and a fleet for benchmarks."""

from __future__ import annotations

import datetime as dt
from io import StringIO

import pytest
from django.contrib.auth import authenticate
from django.core.management import call_command
from django.test import RequestFactory
from django.utils import timezone

from ledger.chain import verify_chain
from ledger.models import (
    Capability,
    Event,
    LicenseAcceptance,
    ModelAsset,
    PriceSheet,
    Revision,
    Service,
)
from ledger.permissions import can_edit_team_objects
from ledger.queries import license_findings, serving_history, unpriced_gpu_models

# seed_demo has built the demo once for the module; a test's own seed() is a second run.
pytestmark = pytest.mark.usefixtures("demo_world")

DEMO_SERVICES = {
    "kb-assistant": ("production", "customer_data"),
    "dataagent-sql": ("production", "customer_data"),
    "support-summarizer": ("internal", "internal"),
    "code-review-bot": ("experimental", "internal"),
    "doc-translate": ("internal", "external"),
    # Added by the releases demo, released through the ledger (releases/demo/rollouts.py).
    "support-faq": ("internal", "internal"),
    "canary-lab": ("experimental", "internal"),
}


def seed(*args: str) -> str:
    out = StringIO()
    call_command("seed_demo", "--quiet-logins", *args, stdout=out)
    return out.getvalue()


def test_seed_demo_builds_a_registry_across_tiers_engines_and_licenses(db):
    services = {s.slug: s for s in Service.objects.select_related("live_revision")}
    assert {slug: (s.tier, s.exposure) for slug, s in services.items()} == DEMO_SERVICES
    assert all(service.live_revision is not None for service in services.values())
    engines = set(Revision.objects.values_list("runtime__engine", flat=True))
    assert {"vllm", "sglang", "tgi", "ollama", "llama_cpp"} <= engines
    awq = ModelAsset.objects.get(name="kb-qwen2.5-7b-ft-awq")
    assert [(a.quantization, a.derivation) for a in awq.lineage()] == [
        ("bf16", "base"),
        ("bf16", "fine_tuned"),
        ("int4-awq", "quantized"),
    ]
    assert ModelAsset.objects.filter(quantization="gguf-q4_k_m").exists()
    assert ModelAsset.objects.get(name="Qwen2-7B-Instruct").lifecycle == "retired"
    assert LicenseAcceptance.objects.filter(
        license__spdx_id="LicenseRef-Llama-3.1-Community"
    ).exists()
    assert Capability.objects.count() > 40


def test_seed_demo_gives_earlier_revisions_a_history_of_having_served(db):
    kb = Service.objects.get(slug="kb-assistant")
    served = dict(kb.revisions.values_list("number", "served_at"))
    assert kb.live_revision.number == 3
    assert served[1] and served[2] and served[3]
    assert served[4] is None  # a candidate
    assert kb.revisions.get(number=1).lock_reasons() == ["r1 has served live traffic"]


def test_seed_demo_candidates_show_license_findings(db):
    translate = Service.objects.get(slug="doc-translate")
    codes = {
        number: {finding.code for finding in license_findings(translate, revision)}
        for number, revision in (
            (r.number, r) for r in translate.revisions.select_related("model_asset__license")
        )
    }
    assert codes[1] == set()
    assert "license_unaccepted" in codes[2]
    assert "license_exposure" in codes[3]


def test_seed_demo_twice_appends_no_event_and_keeps_the_chain_whole(db):
    events = Event.objects.count()

    output = seed()

    assert Event.objects.count() == events
    assert "demo registry: no changes" in output
    assert verify_chain().ok


def test_demo_owner_can_log_in_and_edit_the_demo_services(db):
    owner = authenticate(
        RequestFactory().post("/accounts/login/"), username="owner", password="demo"
    )
    assert owner is not None
    for service in Service.objects.select_related("team"):
        assert service.team.members.filter(pk=owner.pk).exists(), service.slug
        assert can_edit_team_objects(owner, service.team)


def test_seed_demo_scale_adds_services_with_history_and_the_chain_verifies(db):
    before = Event.objects.count()

    output = seed("--scale", "3")

    fleet = Service.objects.filter(slug__startswith="fleet-").select_related("live_revision")
    assert fleet.count() == 3
    for service in fleet:
        assert service.revisions.count() == 24
        assert Capability.objects.filter(revision__service=service).count() == 72
        assert service.live_revision.number == 21
        assert service.revisions.filter(served_at__isnull=False).count() == 7
        subject_events = Event.objects.filter(
            subject_type="ledger.revision",
            subject_id__in=[str(pk) for pk in service.revisions.values_list("pk", flat=True)],
        ).count()
        assert subject_events == 24
        # The live-revision events tell the serving history, newest first.
        history = serving_history(service)
        assert [interval.revision.number for interval in history] == [21, 18, 15, 12, 9, 6, 3]
        assert history[0].reason == "fleet history" and history[0].until is None
        assert service.revisions.get(number=24).based_on.number == 23
    assert Event.objects.count() - before > 3 * 100
    assert "fleet: 3 services created" in output
    assert verify_chain().ok


def test_seed_demo_scale_again_creates_nothing(db):
    seed("--scale", "2")
    events = Event.objects.count()

    output = seed("--scale", "2")

    assert Event.objects.count() == events
    assert "fleet: 0 services created (2 were there)" in output


def test_seed_demo_attaches_evidence_and_replay_data_once(db):
    from ledger.models import LoadTestReport
    from replay.models import Backend, SampleSet

    seed()

    live = Service.objects.get(slug="kb-assistant").live_revision
    reports = LoadTestReport.objects.filter(revision=live)
    assert sorted(reports.values_list("tool", flat=True)) == ["guidellm", "vllm"]
    assert reports.get(tool="guidellm").level_count == 3
    assert SampleSet.objects.filter(name__startswith="starter-").count() == 7
    assert Backend.objects.get(name="kb-assistant-live").revision == live


def test_seed_demo_prices_every_gpu_model_its_runtimes_name_once(db):
    today = timezone.now().date()
    assert unpriced_gpu_models(today) == []
    sheets = list(PriceSheet.objects.all())
    assert {s.currency for s in sheets} == {"USD"}
    assert {s.effective_from for s in sheets} == {today - dt.timedelta(days=90)}
    seed()
    assert PriceSheet.objects.count() == len(sheets)
