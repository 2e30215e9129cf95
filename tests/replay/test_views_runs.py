"""Run pages, through the client: a run's results and progress, the run list, two runs compared."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from replay.models import Result, Run
from tests.replay.factories import ResultFactory, RunFactory, SampleFactory, SampleSetFactory
from tests.replay.helpers import finish, make_backend, run_with_results
from tests.support.charts import chart_specs


@pytest.fixture
def backend(team):
    return make_backend(team)


# ---------------------------------------------------------------- the run page


def test_run_page_shows_what_a_failed_json_schema_check_expected_and_got(client, auditor, backend):
    run = finish(run_with_results(backend))
    client.force_login(auditor)

    page = client.get(f"/replay/runs/{run.pk}/").content.decode()

    assert "<strong>json_schema</strong>" in page
    assert "<dt>Expected</dt><dd>JSON valid against the schema</dd>" in page
    assert "$.answer: &#x27;four&#x27; is not of type &#x27;integer&#x27;" in page
    assert "check_failed" in page


def test_run_page_heads_with_state_verdict_trigger_backend_and_revision(client, auditor, backend):
    run = finish(run_with_results(backend, trigger=Run.Trigger.SCHEDULE))
    client.force_login(auditor)
    revision = backend.revision

    page = client.get(f"/replay/runs/{run.pk}/").content.decode()

    assert run.verdict == Run.Verdict.FAILED  # one sample below its budget
    assert '<span class="badge bad">failed</span>' in page
    assert ">finished</span>" in page
    assert "<dd>Schedule</dd>" in page
    assert f'href="/replay/backends/{backend.name}/"' in page
    assert f'href="/services/{revision.service.slug}/r{revision.number}/"' in page
    assert revision.fingerprint in page
    assert "json-0: 0/1 attempts passed" in page  # the domain's reason
    assert "75 %" in page  # pass rate


def test_run_page_shows_redacted_outputs_by_hash_and_length_only(client, auditor, backend):
    run = RunFactory(backend=backend)
    sample = SampleFactory(sample_set=run.sample_set, key="payroll", sensitive=True)
    ResultFactory(
        run=run,
        sample=sample,
        redacted=True,
        output="",
        output_sha256="ab" * 32,
        output_length=812,
    )
    client.force_login(auditor)

    page = client.get(f"/replay/runs/{run.pk}/").content.decode()

    assert "Output redacted · sha256 <code" in page
    assert f"{'ab' * 6}…</code> · 812 chars" in page


def test_run_page_shows_an_output_and_skipped_samples_in_words(client, auditor, backend):
    run = RunFactory(backend=backend)
    ResultFactory(run=run, sample__sample_set=run.sample_set, output="The answer is 4.")
    ResultFactory(
        run=run,
        sample=SampleFactory(sample_set=run.sample_set, rerunnable=False),
        outcome=Result.Outcome.SKIPPED,
        ttft_ms=None,
        tpot_ms=None,
    )
    client.force_login(auditor)

    page = client.get(f"/replay/runs/{run.pk}/").content.decode()

    assert "<pre>The answer is 4.</pre>" in page
    assert "Not sent: the sample has side effects." in page


def test_run_results_filter_by_outcome_category_and_error_code_in_the_url(client, auditor, backend):
    run = finish(run_with_results(backend, failing=2, passing=3))
    client.force_login(auditor)
    url = f"/replay/runs/{run.pk}/"

    failed = client.get(url, {"outcome": "failed"})
    json_only = client.get(url, {"category": "structured_json"})
    by_code = client.get(url, {"error_code": "check_failed"})
    unknown_code = client.get(url, {"error_code": "http_500"})

    assert [r.sample.key for r in failed.context["page"]] == ["json-0", "json-1"]
    assert [r.sample.key for r in json_only.context["page"]] == ["json-0", "json-1"]
    assert by_code.context["page"].paginator.count == 2
    assert "Some filters were ignored" in unknown_code.content.decode()  # not a code of this run
    assert '<option value="check_failed">check_failed</option>' in failed.content.decode()


def test_run_results_page_through_htmx_fragment(client, auditor, backend):
    run = run_with_results(backend, failing=0, passing=30)
    client.force_login(auditor)

    response = client.get(f"/replay/runs/{run.pk}/", {"page": "2"}, headers={"HX-Request": "true"})

    page = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in page
    assert "Against the baseline" not in page
    assert len(response.context["page"].object_list) == 5
    assert "qa-9" in page  # keys sort as text: qa-0, qa-1, qa-10, …
    assert response["HX-Push-Url"] == f"/replay/runs/{run.pk}/?page=2"


def test_run_page_query_count_does_not_grow_with_results(
    client, auditor, backend, django_assert_num_queries
):
    small = finish(run_with_results(backend, failing=1, passing=1))
    large = finish(run_with_results(backend, failing=5, passing=15))
    client.force_login(auditor)
    client.get(f"/replay/runs/{small.pk}/")

    def count(run):
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        with CaptureQueriesContext(connection) as queries:
            client.get(f"/replay/runs/{run.pk}/")
        return len(queries)

    assert count(small) == count(large)
    # session, user, the run with its set, backend, revision and baseline, outcome
    # counts, error codes, attempts the set asks for, other runs of the set, the
    # results' count and page
    with django_assert_num_queries(9):
        client.get(f"/replay/runs/{large.pk}/")


def test_run_page_shows_the_comparison_with_its_baseline(client, auditor, backend):
    sample_set = SampleSetFactory(name="kb-smoke")
    now = timezone.now()
    baseline = finish(
        run_with_results(backend, ttft=100.0, failing=0, sample_set=sample_set),
        at=now - dt.timedelta(hours=1),
    )
    run = RunFactory(backend=backend, sample_set=sample_set)
    for sample in sample_set.samples.all():
        ResultFactory(run=run, sample=sample, ttft_ms=400.0)
    run = finish(run, baseline=baseline, at=now)
    client.force_login(auditor)

    page = client.get(f"/replay/runs/{run.pk}/").content.decode()

    assert run.verdict == Run.Verdict.REGRESSED
    assert f'href="/replay/runs/{baseline.pk}/">run {baseline.pk}</a>' in page
    assert f"/replay/runs/compare?a={baseline.pk}&amp;b={run.pk}" in page
    assert "p95 TTFT rose from" in page
    assert '<span class="badge bad">regressed</span>' in page
    # The baseline's TTFTs are 100, 101 and 102 ms: its p95 is 101.9 ms; this run's is 400.
    assert run.comparison["ttft_ms"]["p95"] == {
        "a": 101.9,
        "b": 400.0,
        "delta": 298.1,
        "change_pct": 292.5,
    }
    assert (
        '<td data-label="" class="card-title">p95 TTFT</td> '
        '<td data-label="Baseline" class="num">101.9 ms</td> '
        '<td data-label="This run" class="num">400.0 ms</td> '
        '<td data-label="Change" class="num">+298.1 ms (+292.5 %)</td> '
        '<td data-label="Verdict"><span class="badge bad">regressed</span></td>'
    ) in " ".join(page.split())


def test_run_page_without_baseline_says_how_one_comes(client, auditor, backend):
    run = finish(run_with_results(backend, failing=0))
    client.force_login(auditor)

    page = client.get(f"/replay/runs/{run.pk}/").content.decode()

    assert "No baseline" in page
    assert "becomes the baseline of the next" in page


# ---------------------------------------------------------------- progress


def test_running_run_polls_its_progress_every_two_seconds(client, auditor, backend):
    run = run_with_results(backend, failing=0, passing=2)
    SampleFactory(sample_set=run.sample_set, repeat=3)
    Run.objects.filter(pk=run.pk).update(state=Run.State.RUNNING, started_at=timezone.now())
    client.force_login(auditor)

    page = client.get(f"/replay/runs/{run.pk}/").content.decode()

    assert f'hx-get="/replay/runs/{run.pk}/progress?was=running"' in page
    assert 'hx-trigger="every 2s"' in page
    assert "2 of 5 attempts done" in page
    assert f'href="/replay/runs/{run.pk}/"' in page  # a refresh link for no JavaScript


def test_progress_fragment_keeps_polling_while_the_run_is_active(client, auditor, backend):
    run = RunFactory(backend=backend, state=Run.State.QUEUED)
    SampleFactory(sample_set=run.sample_set)
    client.force_login(auditor)

    response = client.get(
        f"/replay/runs/{run.pk}/progress?was=queued", headers={"HX-Request": "true"}
    )

    page = response.content.decode()
    assert page.strip().startswith('<div id="run-progress"')
    assert 'hx-trigger="every 2s"' in page
    assert "waiting for a worker" in page
    assert "HX-Request" in response["Vary"]


def test_progress_of_a_run_that_just_finished_reloads_the_page(client, auditor, backend):
    run = finish(run_with_results(backend))
    client.force_login(auditor)

    response = client.get(
        f"/replay/runs/{run.pk}/progress?was=running", headers={"HX-Request": "true"}
    )

    assert response["HX-Refresh"] == "true"


def test_finished_run_page_does_not_poll(client, auditor, backend):
    run = finish(run_with_results(backend))
    client.force_login(auditor)

    page = client.get(f"/replay/runs/{run.pk}/").content.decode()
    fragment = client.get(
        f"/replay/runs/{run.pk}/progress", headers={"HX-Request": "true"}
    ).content.decode()

    assert "every 2s" not in page
    assert "every 2s" not in fragment


def test_progress_without_htmx_goes_to_the_run_page(client, auditor, backend):
    run = RunFactory(backend=backend)
    client.force_login(auditor)

    response = client.get(f"/replay/runs/{run.pk}/progress")

    assert response.status_code == 302
    assert response["Location"] == f"/replay/runs/{run.pk}/"


def test_unknown_run_is_404(client, auditor, db):
    client.force_login(auditor)
    assert client.get("/replay/runs/999999/").status_code == 404
    assert client.get("/replay/runs/999999/progress").status_code == 404


# ---------------------------------------------------------------- the run list


def test_run_list_filters_in_the_url(client, auditor, team):
    a, b = make_backend(team, name="a-vllm"), make_backend(team, name="b-sglang")
    finish(run_with_results(a, sample_set=SampleSetFactory(name="kb-smoke")))
    finish(run_with_results(b, failing=0, sample_set=SampleSetFactory(name="sql")))
    RunFactory(backend=b, state=Run.State.RUNNING)
    client.force_login(auditor)

    by_backend = client.get("/replay/runs/", {"backend": "b-sglang"})
    by_verdict = client.get("/replay/runs/", {"verdict": "failed"})
    by_set = client.get("/replay/runs/", {"sample_set": "sql"})

    assert by_backend.context["page"].paginator.count == 2
    assert [r.backend.name for r in by_verdict.context["page"]] == ["a-vllm"]
    assert [r.sample_set.name for r in by_set.context["page"]] == ["sql"]


def test_run_list_query_count_does_not_grow_with_runs(
    client, auditor, backend, django_assert_num_queries
):
    for _ in range(5):
        finish(run_with_results(backend, failing=0, passing=1))
    client.force_login(auditor)
    client.get("/replay/runs/")

    # session, user, count, the backends the filter offers, the page of runs with
    # their set, backend and revision
    with django_assert_num_queries(5):
        client.get("/replay/runs/")


def test_run_list_empty_state_points_to_the_backends(client, auditor):
    client.force_login(auditor)
    assert "press <strong>Run now</strong>" in client.get("/replay/runs/").content.decode()


# ---------------------------------------------------------------- comparison


@pytest.fixture
def parity(team):
    """kb-smoke replayed on vLLM (live) and on SGLang (candidate): order-json got worse."""
    sample_set = SampleSetFactory(name="kb-smoke")
    capital = SampleFactory(sample_set=sample_set, key="capital-fr")
    order = SampleFactory(
        sample_set=sample_set,
        key="order-json",
        category="structured_json",
        repeat=2,
        min_pass_rate=0.5,
    )
    vllm, sglang = make_backend(team, name="kb-vllm"), make_backend(team, name="kb-sglang")
    runs = []
    for backend, order_outcomes, ttft in (
        (vllm, ["passed", "passed"], 100.0),
        (sglang, ["passed", "failed"], 180.0),
    ):
        run = RunFactory(backend=backend, sample_set=sample_set)
        ResultFactory(run=run, sample=capital, ttft_ms=ttft)
        for attempt, outcome in enumerate(order_outcomes, start=1):
            ResultFactory(run=run, sample=order, attempt=attempt, outcome=outcome, ttft_ms=ttft)
        runs.append(finish(run))
    return runs


def test_compare_page_puts_per_sample_pass_rates_side_by_side(client, auditor, parity):
    live, candidate = parity
    client.force_login(auditor)

    response = client.get("/replay/runs/compare", {"a": live.pk, "b": candidate.pk})

    page = response.content.decode()
    rows = {row["key"]: row for row in response.context["pass_rows"]}
    assert (rows["order-json"]["a_pct"], rows["order-json"]["b_pct"]) == (100.0, 50.0)
    assert rows["order-json"]["worse"]
    assert rows["capital-fr"]["delta_points"] == 0.0
    assert '<span class="badge bad">worse</span>' in page
    assert len(chart_specs(page)) == 2
    assert "vendor/plotly-basic-" in page


def test_compare_page_gives_p95_ttft_and_tpot_deltas(client, auditor, parity):
    live, candidate = parity
    client.force_login(auditor)

    response = client.get("/replay/runs/compare", {"a": live.pk, "b": candidate.pk})

    rows = {row["metric"]: row for row in response.context["latency_rows"]}
    assert rows["p95 TTFT"]["a"] == 100.0
    assert rows["p95 TTFT"]["b"] == 180.0
    assert rows["p95 TTFT"]["delta"] == 80.0
    assert rows["p95 TTFT"]["delta_pct"] == 80.0
    assert "p95 TPOT" in rows
    assert "+80.0 ms (+80.0 %)" in response.content.decode()


def test_compare_refuses_runs_of_different_sets(client, auditor, backend):
    a = finish(run_with_results(backend, sample_set=SampleSetFactory(name="one")))
    b = finish(run_with_results(backend, sample_set=SampleSetFactory(name="two")))
    client.force_login(auditor)

    page = client.get("/replay/runs/compare", {"a": a.pk, "b": b.pk}).content.decode()

    assert "only runs of the same set compare" in page
    assert chart_specs(page) == []


def test_compare_waits_for_both_runs_to_finish(client, auditor, parity):
    live, _ = parity
    running = RunFactory(backend=live.backend, sample_set=live.sample_set, state="running")
    client.force_login(auditor)

    page = client.get("/replay/runs/compare", {"a": live.pk, "b": running.pk}).content.decode()

    assert f"Run {running.pk} is running: runs compare once both have finished." in page


def test_compare_with_one_run_offers_the_others_of_its_set(client, auditor, parity):
    live, candidate = parity
    client.force_login(auditor)

    page = client.get("/replay/runs/compare", {"a": live.pk}).content.decode()

    assert f'href="?a={live.pk}&amp;b={candidate.pk}"' in page


def test_compare_names_bad_run_numbers(client, auditor, db):
    client.force_login(auditor)

    page = client.get("/replay/runs/compare", {"a": "x", "b": "424242"}).content.decode()

    assert "Run A: &#x27;x&#x27; is not a run number." in page
    assert "Run B: there is no run 424242." in page
