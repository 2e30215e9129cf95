"""The service catalog, the service page and the service forms, through the client."""

from __future__ import annotations

import pytest

from ledger import services
from ledger.models import Event, Service
from tests.ledger.factories import (
    ModelAssetFactory,
    RevisionFactory,
    RuntimeFactory,
    ServiceFactory,
    TeamFactory,
)

CATALOG = "/services/"
# The database rule's own message (ledger_service_ttft_p99_not_below_p95).
P99_BELOW_P95 = (
    "SLO p99 TTFT (ms) must be at least the SLO p95 TTFT (ms): give a p99 equal to or "
    "above the p95 (e.g. p95 900, p99 1500), or leave one of them empty."
)


def live_service(team, slug, *, engine="vllm", asset_name=None, task_types=(), **fields):
    """A service with one revision, live."""
    service = ServiceFactory(team=team, slug=slug, task_types=list(task_types), **fields)
    asset = ModelAssetFactory(team=team, **({"name": asset_name} if asset_name else {}))
    parameters = {"max_model_len": 8192} if engine == "vllm" else {}
    runtime = RuntimeFactory(team=team, engine=engine, launch_parameters=parameters)
    revision = RevisionFactory(
        service=service, model_asset=asset, runtime=runtime, context_limit=8192
    )
    services.set_live_revision(service, revision, actor=None)
    return Service.objects.select_related("live_revision").get(pk=service.pk)


def services_in_catalog(response) -> list[str]:
    return [service.slug for service in response.context["page"].object_list]


# ---------------------------------------------------------------- catalog


def test_catalog_lists_each_service_with_tier_team_live_revision_and_slos(client, owner, team):
    live_service(
        team, "kb-assistant", tier="production", asset_name="Qwen2.5-7B", slo_ttft_p95_ms=800
    )
    client.force_login(owner)

    response = client.get(CATALOG)

    page = response.content.decode()
    assert response.status_code == 200
    assert "kb-assistant" in page
    assert '<span class="badge tier-production">production</span>' in page
    assert "Knowledge base team" in page
    assert "Qwen2.5-7B@main" in page
    assert "vLLM 0.6.3" in page
    assert "TTFT p95 800 ms" in page


def test_catalog_searches_slug_name_and_the_live_model(client, owner, team):
    live_service(team, "kb-assistant", asset_name="Qwen2.5-7B")
    live_service(team, "dataagent-sql", asset_name="Llama-3.1-8B")
    client.force_login(owner)

    assert services_in_catalog(client.get(CATALOG, {"q": "KB-ass"})) == ["kb-assistant"]
    assert services_in_catalog(client.get(CATALOG, {"q": "llama"})) == ["dataagent-sql"]


def test_catalog_filters_by_tier_team_engine_and_task_type(client, owner, team):
    other = TeamFactory(slug="data-team", name="Data team")
    live_service(team, "kb-assistant", tier="production", task_types=["rag"])
    live_service(other, "dataagent-sql", engine="sglang", task_types=["sql"])
    client.force_login(owner)

    assert services_in_catalog(client.get(CATALOG, {"tier": "production"})) == ["kb-assistant"]
    assert services_in_catalog(client.get(CATALOG, {"team": "data-team"})) == ["dataagent-sql"]
    assert services_in_catalog(client.get(CATALOG, {"engine": "sglang"})) == ["dataagent-sql"]
    assert services_in_catalog(client.get(CATALOG, {"task_type": "rag"})) == ["kb-assistant"]
    both = client.get(CATALOG, {"tier": "production", "engine": "sglang"})
    assert services_in_catalog(both) == []


def test_catalog_says_what_to_do_when_nothing_matches(client, owner, team):
    live_service(team, "kb-assistant")
    client.force_login(owner)

    page = client.get(CATALOG, {"q": "nothing-like-this"}).content.decode()

    assert "No service matches these filters" in page
    assert 'href="/services/"' in page


def test_catalog_empty_registry_invites_model_owner_to_create_the_first(
    client, owner, team, auditor
):
    client.force_login(owner)
    assert "Create the first service" in client.get(CATALOG).content.decode()

    client.force_login(auditor)
    assert "ask the owner of your service" in client.get(CATALOG).content.decode()


def test_a_model_owner_without_a_team_is_told_why_they_cannot_create(client, owner):
    # The same rule as the create page and the API (ledger.permissions.can_create).
    client.force_login(owner)
    page = client.get(CATALOG).content.decode()

    assert "Create the first service" not in page
    assert "you belong to no team yet" in page
    assert client.get("/services/new").status_code == 403


def test_catalog_htmx_search_returns_only_the_results_and_a_clean_address(client, owner, team):
    live_service(team, "kb-assistant")
    client.force_login(owner)

    response = client.get(
        CATALOG, {"q": "kb", "tier": "", "team": "", "page": "1"}, HTTP_HX_REQUEST="true"
    )

    body = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in body
    assert 'id="results"' not in body  # the container stays; only its content is swapped
    assert "kb-assistant" in body
    assert response["HX-Push-Url"] == "/services/?q=kb"
    assert "HX-Request" in response["Vary"]


def test_catalog_history_restore_gets_the_whole_page(client, owner, team):
    client.force_login(owner)

    response = client.get(
        CATALOG, {"q": "kb"}, HTTP_HX_REQUEST="true", HTTP_HX_HISTORY_RESTORE_REQUEST="true"
    )

    assert "<html" in response.content.decode()


def test_catalog_form_works_without_javascript(client, owner, team):
    client.force_login(owner)

    page = client.get(CATALOG, {"q": "kb"}).content.decode()

    assert '<form class="filters" method="get" action="/services/"' in page
    assert 'value="kb"' in page
    assert 'hx-trigger="input changed delay:250ms, search"' in page
    assert 'hx-push-url="true"' in page


def test_catalog_pages_by_25_and_keeps_the_filters(client, owner, team):
    for n in range(27):
        ServiceFactory(team=team, slug=f"svc-{n:02d}", tier="production")
    client.force_login(owner)

    first = client.get(CATALOG, {"tier": "production"})
    second = client.get(CATALOG, {"tier": "production", "page": "2"})

    assert len(services_in_catalog(first)) == 25
    assert services_in_catalog(second) == ["svc-25", "svc-26"]
    page = first.content.decode()
    assert 'href="?tier=production&amp;page=2"' in page
    assert 'hx-get="?tier=production&amp;page=2"' in page


def test_top_bar_search_goes_to_the_search_that_opens_one_match(client, owner):
    client.force_login(owner)

    page = client.get("/assets/").content.decode()

    assert 'action="/search/"' in page
    assert 'name="q"' in page
    for label in ("Services", "Assets", "Runtimes", "Events"):
        assert f">{label}</a>" in page


def _catalog_with(team, count):
    for n in range(count):
        live_service(team, f"svc-{n:02d}", task_types=["chat", "rag"])


@pytest.mark.parametrize("count", [3, 30])
def test_catalog_query_count_does_not_grow_with_the_services(
    client, owner, team, count, django_assert_num_queries
):
    _catalog_with(team, count)
    client.force_login(owner)

    # 1 session, 2 user, 3 the user's groups (roles) and 4 whether they belong to
    # a team (may they create?), 5 count of matching services, 6 the page of
    # services joined with team, live revision, asset, runtime and readiness, 7
    # their task types (prefetch), 8 the rollouts in flight among them, 9 teams and
    # 10 task types for the filter selects, 11 the page's days of run evidence for the
    # cost column (none here: nothing else is read).
    with django_assert_num_queries(11):
        response = client.get(CATALOG)

    assert len(services_in_catalog(response)) == min(count, 25)


@pytest.mark.parametrize("count", [3, 30])
def test_filtered_catalog_query_count_does_not_grow_either(
    client, owner, team, count, django_assert_num_queries
):
    _catalog_with(team, count)
    client.force_login(owner)

    # As above, plus 2 lookups of the team and task type named in the filters.
    with django_assert_num_queries(13):
        client.get(CATALOG, {"team": team.slug, "task_type": "rag", "engine": "vllm", "q": "svc"})


# ---------------------------------------------------------------- service page


@pytest.fixture
def kb(team):
    """kb-assistant: r1 live with two capabilities, r2 the same thing again, r3 different."""
    service = live_service(team, "kb-assistant", tier="internal", asset_name="Qwen2.5-7B")
    r1 = service.live_revision
    services.declare_capability(r1, actor=None, kind="streaming", value="sse")
    capability = services.declare_capability(r1, actor=None, kind="context_length", value=8192)
    services.record_capability_check(capability, actor=None, passed=True, evidence={"ok": 1})
    RevisionFactory(
        service=service, model_asset=r1.model_asset, runtime=r1.runtime, context_limit=8192
    )
    RevisionFactory(
        service=service, model_asset=r1.model_asset, runtime=r1.runtime, context_limit=16384
    )
    return Service.objects.get(pk=service.pk)


def test_service_page_shows_what_is_live(client, sre, kb):
    client.force_login(sre)

    response = client.get("/services/kb-assistant/")

    page = response.content.decode()
    live = kb.live_revision
    assert response.status_code == 200
    assert "Qwen2.5-7B@main" in page
    assert "BF16" in page
    assert "vLLM 0.6.3" in page
    assert live.runtime.image in page
    assert "8192 tokens" in page
    assert f"{live.fingerprint[:19]}…" in page
    assert f'title="{live.fingerprint}"' in page


def test_service_page_shows_license_findings_as_words(client, sre, kb):
    client.force_login(sre)

    page = client.get("/services/kb-assistant/").content.decode()

    assert (
        '<span class="badge warn">warning</span> The license of Qwen2.5-7B@main awaits approval'
        in page
    )


def test_service_page_shows_a_clear_license_when_nothing_is_wrong(client, sre, security, team):
    service = live_service(team, "clean-svc")
    services.set_license_approval(
        service.live_revision.model_asset, actor=security, approval="approved"
    )
    client.force_login(sre)

    page = client.get("/services/clean-svc/").content.decode()

    assert '<span class="badge ok">clear</span> Apache-2.0' in page


def test_service_page_shows_capabilities_with_status_words(client, sre, kb):
    client.force_login(sre)

    page = client.get("/services/kb-assistant/").content.decode()

    assert '<span class="badge ok">verified</span>' in page
    assert '<span class="badge ">declared</span>' in page
    assert "<code>&quot;sse&quot;</code>" in page


def test_service_page_lists_revisions_and_flags_the_same_fingerprint(client, sre, kb):
    client.force_login(sre)

    response = client.get("/services/kb-assistant/")

    revisions = {r.label: r for r in response.context["revisions"]}
    assert list(revisions) == ["r3", "r2", "r1"]
    assert revisions["r2"].same_as == ["r1"]
    assert revisions["r1"].same_as == ["r2"]
    assert revisions["r3"].same_as == []
    page = response.content.decode()
    assert "same as r1" in page
    assert '<span class="badge ok">live</span>' in page
    assert "locked" in page and "editable" in page


def test_service_page_timeline_shows_actor_action_and_changed_fields(client, owner, kb):
    services.update_service(kb, actor=owner, name="Knowledge base")
    client.force_login(owner)

    response = client.get("/services/kb-assistant/")

    events = response.context["events"]
    assert events[0].action == "service.updated"
    assert events[0].actor_label == owner.username
    assert events[0].changes == [
        {"field": "name", "before": "Kb Assistant", "after": "Knowledge base"}
    ]
    actions = [event.action for event in events]
    assert "capability.verified" in actions
    assert "revision.created" in actions
    live_change = next(e for e in events if e.action == "service.live_revision_changed")
    assert live_change.changes == [{"field": "live_revision", "before": None, "after": "r1"}]
    page = response.content.decode()
    assert "<del>Kb Assistant</del> → <ins>Knowledge base</ins>" in page
    assert "<del>(empty)</del> → <ins>r1</ins>" in page


def test_service_page_keeps_only_the_last_20_events(client, owner, kb):
    for n in range(25):
        services.update_service(kb, actor=owner, name=f"Name {n}")
    client.force_login(owner)

    events = client.get("/services/kb-assistant/").context["events"]

    assert len(events) == 20
    assert events[0].changes[0]["after"] == "Name 24"


def test_service_page_of_an_unknown_slug_is_404(client, sre):
    client.force_login(sre)

    assert client.get("/services/nope/").status_code == 404


def test_service_without_live_revision_says_so(client, owner, team):
    ServiceFactory(team=team, slug="new-svc")
    client.force_login(owner)

    page = client.get("/services/new-svc/").content.decode()

    assert "No revision is live yet" in page
    assert "Create the first revision" in page


@pytest.mark.parametrize("extra_revisions", [0, 30])
def test_service_page_query_count_does_not_grow_with_revisions_and_events(
    client, owner, kb, extra_revisions, django_assert_num_queries
):
    r1 = kb.live_revision
    for _ in range(extra_revisions):
        revision = RevisionFactory(
            service=kb, model_asset=r1.model_asset, runtime=r1.runtime, context_limit=8192
        )
        services.declare_capability(revision, actor=None, kind="streaming", value="sse")
    client.force_login(owner)

    # 1 session, 2 user, 3 service joined with team and live revision, asset,
    # license and runtime, 4 the revisions with their parts, 5 the last 20
    # events (service, revisions and capabilities in one query), 6 the live
    # revision's capabilities, 7 the service's task types, 8 the user's groups
    # and 9 team membership (may they edit?), then the SLO matrix's 10 live and
    # candidate revisions and 11 their load-test reports, replay's 12 live
    # revision's backends with their latest probes and run (its health), 13
    # backends with their latest probe (no backend here, so no query for the
    # probes or runs), 14 regressed runs, the serving history's 15 live-revision
    # events and 16 the revisions they name, then the run-evidence trend's 17
    # days, 18 live-revision changes and 19 the numbers of the revisions they
    # made live, and 20 the rollout shares' events (none: no query for their
    # releases); the releases: 21 the open ones and 22 the recently closed ones,
    # each with its revisions and filer, and 23 the lock rule's "referenced by a
    # release past draft" over the revisions listed; the rollback section's 24 plan
    # in force and 25 the revisions rolled back off the service (none here, and no
    # revision served before the live one: no target to judge or verify), 26 rollout in
    # flight, 27 open unauthorized changes, 28 recent rollbacks and 29 the reader's
    # permissions; the reviews section's 30 open review, 31 last concluded review and
    # 32 open actions. The license is not gated, so no acceptance lookup.
    with django_assert_num_queries(32):
        response = client.get("/services/kb-assistant/")

    assert len(response.context["revisions"]) == 3 + extra_revisions


# ---------------------------------------------------------------- service forms


def service_data(team, **overrides):
    data = {
        "slug": "kb-assistant",
        "name": "Knowledge-base assistant",
        "description": "",
        "team": team.pk,
        "tier": "internal",
        "exposure": "internal",
        "task_types": "chat, rag",
        "tenants": "support, sales",
        "slo_ttft_p95_ms": "800",
        "slo_ttft_p99_ms": "1500",
        "slo_tpot_ms": "",
        "slo_error_rate_pct": "0.5",
        "review_cadence_days": "90",
    }
    data.update(overrides)
    return data


def test_owner_creates_a_service_and_the_ledger_records_it(client, owner, team):
    client.force_login(owner)

    response = client.post("/services/new", service_data(team))

    assert response.status_code == 302
    assert response["Location"] == "/services/kb-assistant/"
    service = Service.objects.get(slug="kb-assistant")
    assert service.team == team
    assert sorted(t.slug for t in service.task_types.all()) == ["chat", "rag"]
    assert service.tenants == ["support", "sales"]
    event = Event.objects.get(action="service.created")
    assert event.actor == owner
    assert event.subject_id == str(service.pk)


def test_service_form_shows_errors_inline_and_in_a_summary_and_keeps_values(client, owner, team):
    client.force_login(owner)

    response = client.post(
        "/services/new",
        service_data(team, slo_ttft_p95_ms="900", slo_ttft_p99_ms="100", task_types="chat, R A G"),
    )

    page = response.content.decode()
    assert response.status_code == 200
    assert 'class="error-summary"' in page
    assert "&#x27;R A G&#x27;: use lowercase letters" in page
    assert 'value="Knowledge-base assistant"' in page
    assert not Service.objects.exists()
    assert not Event.objects.exists()


def test_service_form_maps_a_database_rule_to_the_summary(client, owner, team):
    client.force_login(owner)

    response = client.post(
        "/services/new", service_data(team, slo_ttft_p95_ms="900", slo_ttft_p99_ms="100")
    )

    page = response.content.decode()
    assert response.status_code == 200
    assert response.context["form"].non_field_errors() == [P99_BELOW_P95]
    assert f"<li>{P99_BELOW_P95}</li>" in page  # in the summary at the top
    assert "ledger_service_ttft_p99_not_below_p95" not in page  # a rule's name says nothing
    assert not Service.objects.exists()
    assert not Event.objects.exists()


def test_service_form_has_a_label_and_help_for_every_field(client, owner, team):
    client.force_login(owner)

    response = client.get("/services/new")

    form = response.context["form"]
    page = response.content.decode()
    for field in form.visible_fields():
        assert f'<label for="{field.auto_id}">' in page
        assert field.help_text, field.name


def test_service_inline_validation_answers_with_the_one_field(client, owner, team):
    ServiceFactory(team=team, slug="kb-assistant")
    client.force_login(owner)

    response = client.post(
        "/services/new/validate",
        service_data(team, slug="kb-assistant"),
        HTTP_HX_REQUEST="true",
        HTTP_HX_TRIGGER_NAME="slug",
    )

    body = response.content.decode()
    assert response.status_code == 200
    assert body.strip().startswith('<div class="field has-error" id="field-slug">')
    assert "Service with this Slug already exists." in body
    assert "field-name" not in body
    assert Service.objects.count() == 1


def test_service_inline_validation_needs_the_field_name(client, owner, team):
    client.force_login(owner)

    response = client.post("/services/new/validate", service_data(team), HTTP_HX_REQUEST="true")

    assert response.status_code == 400


def test_service_form_fields_post_to_the_validate_endpoint(client, owner, team):
    client.force_login(owner)

    page = client.get("/services/new").content.decode()

    assert 'hx-post="/services/new/validate"' in page
    assert 'hx-trigger="input changed delay:400ms"' in page
    assert 'hx-target="#field-slug"' in page
    assert 'hx-swap="outerHTML"' in page
    assert 'hx-include="closest form"' in page


def test_owner_edits_a_service_and_the_event_has_before_and_after(client, owner, team):
    service = ServiceFactory(team=team, slug="kb-assistant", name="Old", task_types=["chat"])
    client.force_login(owner)
    data = service_data(team, name="New name", task_types="chat, sql")
    data.pop("slug")

    response = client.post("/services/kb-assistant/edit", data)

    assert response.status_code == 302
    service.refresh_from_db()
    assert service.name == "New name"
    assert sorted(t.slug for t in service.task_types.all()) == ["chat", "sql"]
    event = Event.objects.filter(action="service.updated").get()
    payload = event.payload_data
    assert payload["before"]["name"] == "Old"
    assert payload["after"]["name"] == "New name"
    assert payload["after"]["task_types"] == ["chat", "sql"]
    assert event.actor == owner


def test_saving_an_unchanged_service_appends_nothing(client, owner, team):
    client.force_login(owner)
    client.post("/services/new", service_data(team))
    before = Event.objects.count()
    data = service_data(team)
    data.pop("slug")

    response = client.post("/services/kb-assistant/edit", data, follow=True)

    assert Event.objects.count() == before
    assert "Nothing changed." in response.content.decode()


def test_the_slug_cannot_be_renamed_from_the_edit_form(client, owner, team):
    ServiceFactory(team=team, slug="kb-assistant", name="KB")
    client.force_login(owner)

    client.post("/services/kb-assistant/edit", service_data(team, slug="renamed", name="KB"))

    assert Service.objects.filter(slug="kb-assistant").exists()
    assert not Service.objects.filter(slug="renamed").exists()


def test_service_page_flags_replay_drift_and_regressions(client, sre, kb):
    from django.utils import timezone

    from replay.models import Probe, Run
    from tests.replay.factories import BackendFactory, RunFactory

    backend = BackendFactory(name="kb-vllm", revision=kb.live_revision)
    Probe.objects.create(
        backend=backend,
        fingerprint=kb.live_revision.fingerprint,
        started_at=timezone.now(),
        reachable=True,
        drift=[{"what": "max_context", "registered": 32768, "reported": 8192}],
    )
    run = RunFactory(
        backend=backend,
        verdict=Run.Verdict.REGRESSED,
        state=Run.State.FINISHED,
        finished_at=timezone.now(),
    )
    client.force_login(sre)

    page = client.get("/services/kb-assistant/").content.decode()

    assert '<span class="badge bad">drift</span>' in page
    assert "max_context registered <code>32768</code>, reported <code>8192</code>" in page
    assert f'href="/replay/runs/{run.pk}/"' in page


def test_service_page_says_not_monitored_when_no_backend_watches_it(client, sre, kb):
    # It used to say "no drift · no regression" here, which reads as healthy.
    client.force_login(sre)

    page = client.get("/services/kb-assistant/").content.decode()

    assert 'data-health="not monitored"' in page
    assert "no enabled backend serves the live revision" in page
    assert '<span class="badge ok">' not in page.split('id="live-health"')[1].split("</div>")[0]
