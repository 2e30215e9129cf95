"""A day's breakdown from two scrapes of LiteLLM's /metrics, on exposition text written
as LiteLLM 1.108.7 writes it (label sets copied from a real proxy's scrape, the caller's
metadata labels among them): rows by tenant, task type and backend, what the gateway
could not tell counted as unattributed, a counter reset read as increase() does, and the
totals the sums of the rows."""

from __future__ import annotations

from ledger.metrics_import import parse_exposition
from ledger.models.run_evidence import UNATTRIBUTED
from releases.gateway.metrics import ServiceNames, by_service, read_gateway_day

NAMES = ServiceNames(
    slug="kb-assistant",
    tenants=frozenset({"support", "sales"}),
    task_types=frozenset({"chat", "rag"}),
    backends={
        "kb-assistant-backend-7": "kb-assistant-live",
        "kb-assistant-backend-8": "kb-assistant-canary",
    },
)

TYPES = """\
# HELP litellm_proxy_total_requests_metric_total Total number of requests made to the proxy server - track number of client side requests
# TYPE litellm_proxy_total_requests_metric_total counter
"""

BEFORE = (
    TYPES
    + """\
litellm_proxy_total_requests_metric_total{api_key_alias="None",api_provider="openai",client_ip="10.0.3.4",end_user="None",hashed_api_key="88dc28d0f030c55ed4ab77ed8faf098196cb1c05df778539800c9f1243fe6b4b",metadata_ledger_task_type="rag",metadata_ledger_tenant="support",model_id="kb-assistant-backend-7",org_alias="None",org_id="None",requested_model="kb-assistant",route="/v1/chat/completions",status_code="200",team="None",team_alias="None",user="default_user_id",user_agent="python-httpx/0.28.1",user_email="None"} 10.0
litellm_proxy_total_requests_metric_total{api_key_alias="kb-assistant/sales",api_provider="None",client_ip="10.0.3.9",end_user="None",hashed_api_key="5f0c2a1e9b7d4c3a8e6f1b2d3c4a5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d",metadata_ledger_task_type="None",metadata_ledger_tenant="None",model_id="None",org_alias="None",org_id="None",requested_model="kb-assistant",route="/v1/chat/completions",status_code="429",team="kb-assistant--sales",team_alias="kb-assistant/sales",user="None",user_agent="python-httpx/0.28.1",user_email="None"} 1.0
litellm_proxy_total_requests_metric_total{api_key_alias="None",api_provider="openai",client_ip="10.0.3.4",end_user="None",hashed_api_key="88dc28d0f030c55ed4ab77ed8faf098196cb1c05df778539800c9f1243fe6b4b",metadata_ledger_task_type="rag",metadata_ledger_tenant="support",model_id="kb-assistant-backend-8",org_alias="None",org_id="None",requested_model="kb-assistant",route="/v1/chat/completions",status_code="200",team="None",team_alias="None",user="default_user_id",user_agent="python-httpx/0.28.1",user_email="None"} 50.0
litellm_proxy_total_requests_metric_total{api_key_alias="None",api_provider="openai",client_ip="10.0.3.4",end_user="None",hashed_api_key="88dc28d0f030c55ed4ab77ed8faf098196cb1c05df778539800c9f1243fe6b4b",metadata_ledger_task_type="sql",metadata_ledger_tenant="finance",model_id="dataagent-sql-backend-3",org_alias="None",org_id="None",requested_model="dataagent-sql",route="/v1/chat/completions",status_code="200",team="None",team_alias="None",user="default_user_id",user_agent="python-httpx/0.28.1",user_email="None"} 100.0
litellm_proxy_total_requests_metric_total{api_key_alias="None",api_provider="openai",client_ip="10.0.3.4",end_user="None",hashed_api_key="88dc28d0f030c55ed4ab77ed8faf098196cb1c05df778539800c9f1243fe6b4b",metadata_ledger_task_type="chat",metadata_ledger_tenant="support",model_id="kb-assistant-backend-7",org_alias="None",org_id="None",requested_model="kb-assistant",route="/v1/chat/completions",status_code="200",team="None",team_alias="None",user="default_user_id",user_agent="python-httpx/0.28.1",user_email="None"} 30.0
# HELP litellm_input_tokens_metric_total Total number of input tokens from LLM requests
# TYPE litellm_input_tokens_metric_total counter
litellm_input_tokens_metric_total{api_key_alias="None",api_provider="openai",end_user="None",hashed_api_key="88dc28d0f030c55ed4ab77ed8faf098196cb1c05df778539800c9f1243fe6b4b",metadata_ledger_task_type="rag",metadata_ledger_tenant="support",model="served-a",model_id="kb-assistant-backend-7",org_alias="None",org_id="None",requested_model="kb-assistant",team="None",team_alias="None",user="default_user_id",user_email="None"} 1000.0
# HELP litellm_output_tokens_metric_total Total number of output tokens from LLM requests
# TYPE litellm_output_tokens_metric_total counter
litellm_output_tokens_metric_total{api_key_alias="None",api_provider="openai",end_user="None",hashed_api_key="88dc28d0f030c55ed4ab77ed8faf098196cb1c05df778539800c9f1243fe6b4b",metadata_ledger_task_type="rag",metadata_ledger_tenant="support",model="served-a",model_id="kb-assistant-backend-7",org_alias="None",org_id="None",requested_model="kb-assistant",team="None",team_alias="None",user="default_user_id",user_email="None"} 200.0
"""
)

AFTER = (
    TYPES
    + """\
litellm_proxy_total_requests_metric_total{api_key_alias="None",api_provider="openai",client_ip="10.0.3.4",end_user="None",hashed_api_key="88dc28d0f030c55ed4ab77ed8faf098196cb1c05df778539800c9f1243fe6b4b",metadata_ledger_task_type="rag",metadata_ledger_tenant="support",model_id="kb-assistant-backend-7",org_alias="None",org_id="None",requested_model="kb-assistant",route="/v1/chat/completions",status_code="200",team="None",team_alias="None",user="default_user_id",user_agent="python-httpx/0.28.1",user_email="None"} 25.0
litellm_proxy_total_requests_metric_total{api_key_alias="kb-assistant/sales",api_provider="openai",client_ip="10.0.3.9",end_user="None",hashed_api_key="5f0c2a1e9b7d4c3a8e6f1b2d3c4a5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d",metadata_ledger_task_type="chat",metadata_ledger_tenant="None",model_id="kb-assistant-backend-8",org_alias="None",org_id="None",requested_model="kb-assistant",route="/v1/chat/completions",status_code="200",team="kb-assistant--sales",team_alias="kb-assistant/sales",user="None",user_agent="python-httpx/0.28.1",user_email="None"} 4.0
litellm_proxy_total_requests_metric_total{api_key_alias="kb-assistant/sales",api_provider="None",client_ip="10.0.3.9",end_user="None",hashed_api_key="5f0c2a1e9b7d4c3a8e6f1b2d3c4a5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d",metadata_ledger_task_type="None",metadata_ledger_tenant="None",model_id="None",org_alias="None",org_id="None",requested_model="kb-assistant",route="/v1/chat/completions",status_code="429",team="kb-assistant--sales",team_alias="kb-assistant/sales",user="None",user_agent="python-httpx/0.28.1",user_email="None"} 3.0
litellm_proxy_total_requests_metric_total{api_key_alias="None",api_provider="openai",client_ip="10.0.3.4",end_user="None",hashed_api_key="88dc28d0f030c55ed4ab77ed8faf098196cb1c05df778539800c9f1243fe6b4b",metadata_ledger_task_type="None",metadata_ledger_tenant="None",model_id="kb-assistant-backend-7",org_alias="None",org_id="None",requested_model="kb-assistant",route="/v1/chat/completions",status_code="408",team="None",team_alias="None",user="default_user_id",user_agent="python-httpx/0.28.1",user_email="None"} 1.0
litellm_proxy_total_requests_metric_total{api_key_alias="None",api_provider="openai",client_ip="10.0.3.4",end_user="None",hashed_api_key="88dc28d0f030c55ed4ab77ed8faf098196cb1c05df778539800c9f1243fe6b4b",metadata_ledger_task_type="translate",metadata_ledger_tenant="marketing",model_id="kb-assistant-backend-7",org_alias="None",org_id="None",requested_model="kb-assistant",route="/v1/chat/completions",status_code="200",team="other-svc--ops",team_alias="other-svc/ops",user="default_user_id",user_agent="python-httpx/0.28.1",user_email="None"} 6.0
litellm_proxy_total_requests_metric_total{api_key_alias="None",api_provider="openai",client_ip="10.0.3.4",end_user="None",hashed_api_key="88dc28d0f030c55ed4ab77ed8faf098196cb1c05df778539800c9f1243fe6b4b",metadata_ledger_task_type="rag",metadata_ledger_tenant="support",model_id="kb-assistant-backend-8",org_alias="None",org_id="None",requested_model="kb-assistant",route="/v1/chat/completions",status_code="200",team="None",team_alias="None",user="default_user_id",user_agent="python-httpx/0.28.1",user_email="None"} 8.0
litellm_proxy_total_requests_metric_total{api_key_alias="None",api_provider="openai",client_ip="10.0.3.4",end_user="None",hashed_api_key="88dc28d0f030c55ed4ab77ed8faf098196cb1c05df778539800c9f1243fe6b4b",metadata_ledger_task_type="sql",metadata_ledger_tenant="finance",model_id="dataagent-sql-backend-3",org_alias="None",org_id="None",requested_model="dataagent-sql",route="/v1/chat/completions",status_code="200",team="None",team_alias="None",user="default_user_id",user_agent="python-httpx/0.28.1",user_email="None"} 170.0
litellm_proxy_total_requests_metric_total{api_key_alias="None",api_provider="openai",client_ip="10.0.3.4",end_user="None",hashed_api_key="88dc28d0f030c55ed4ab77ed8faf098196cb1c05df778539800c9f1243fe6b4b",metadata_ledger_task_type="chat",metadata_ledger_tenant="support",model_id="kb-assistant-backend-7",org_alias="None",org_id="None",requested_model="kb-assistant",route="/v1/chat/completions",status_code="200",team="None",team_alias="None",user="default_user_id",user_agent="python-httpx/0.28.1",user_email="None"} 30.0
# HELP litellm_input_tokens_metric_total Total number of input tokens from LLM requests
# TYPE litellm_input_tokens_metric_total counter
litellm_input_tokens_metric_total{api_key_alias="None",api_provider="openai",end_user="None",hashed_api_key="88dc28d0f030c55ed4ab77ed8faf098196cb1c05df778539800c9f1243fe6b4b",metadata_ledger_task_type="rag",metadata_ledger_tenant="support",model="served-a",model_id="kb-assistant-backend-7",org_alias="None",org_id="None",requested_model="kb-assistant",team="None",team_alias="None",user="default_user_id",user_email="None"} 4000.0
litellm_input_tokens_metric_total{api_key_alias="kb-assistant/sales",api_provider="openai",end_user="None",hashed_api_key="5f0c2a1e9b7d4c3a8e6f1b2d3c4a5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d",metadata_ledger_task_type="chat",metadata_ledger_tenant="None",model="served-b",model_id="kb-assistant-backend-8",org_alias="None",org_id="None",requested_model="kb-assistant",team="kb-assistant--sales",team_alias="kb-assistant/sales",user="None",user_email="None"} 900.0
# HELP litellm_output_tokens_metric_total Total number of output tokens from LLM requests
# TYPE litellm_output_tokens_metric_total counter
litellm_output_tokens_metric_total{api_key_alias="None",api_provider="openai",end_user="None",hashed_api_key="88dc28d0f030c55ed4ab77ed8faf098196cb1c05df778539800c9f1243fe6b4b",metadata_ledger_task_type="rag",metadata_ledger_tenant="support",model="served-a",model_id="kb-assistant-backend-7",org_alias="None",org_id="None",requested_model="kb-assistant",team="None",team_alias="None",user="default_user_id",user_email="None"} 800.0
litellm_output_tokens_metric_total{api_key_alias="kb-assistant/sales",api_provider="openai",end_user="None",hashed_api_key="5f0c2a1e9b7d4c3a8e6f1b2d3c4a5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d",metadata_ledger_task_type="chat",metadata_ledger_tenant="None",model="served-b",model_id="kb-assistant-backend-8",org_alias="None",org_id="None",requested_model="kb-assistant",team="kb-assistant--sales",team_alias="kb-assistant/sales",user="None",user_email="None"} 120.0
# HELP litellm_llm_api_time_to_first_token_metric Time to first token for a models LLM API call
# TYPE litellm_llm_api_time_to_first_token_metric histogram
litellm_llm_api_time_to_first_token_metric_bucket{api_key_alias="kb-assistant/sales",api_provider="openai",end_user="None",hashed_api_key="5f0c2a1e9b7d4c3a8e6f1b2d3c4a5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d",le="0.1",metadata_ledger_task_type="chat",metadata_ledger_tenant="None",model="served-b",model_group="kb-assistant",model_id="kb-assistant-backend-8",org_alias="None",org_id="None",requested_model="kb-assistant",service_tier="None",team="kb-assistant--sales",team_alias="kb-assistant/sales",user="None"} 0.0
litellm_llm_api_time_to_first_token_metric_bucket{api_key_alias="kb-assistant/sales",api_provider="openai",end_user="None",hashed_api_key="5f0c2a1e9b7d4c3a8e6f1b2d3c4a5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d",le="0.25",metadata_ledger_task_type="chat",metadata_ledger_tenant="None",model="served-b",model_group="kb-assistant",model_id="kb-assistant-backend-8",org_alias="None",org_id="None",requested_model="kb-assistant",service_tier="None",team="kb-assistant--sales",team_alias="kb-assistant/sales",user="None"} 2.0
litellm_llm_api_time_to_first_token_metric_bucket{api_key_alias="kb-assistant/sales",api_provider="openai",end_user="None",hashed_api_key="5f0c2a1e9b7d4c3a8e6f1b2d3c4a5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d",le="0.5",metadata_ledger_task_type="chat",metadata_ledger_tenant="None",model="served-b",model_group="kb-assistant",model_id="kb-assistant-backend-8",org_alias="None",org_id="None",requested_model="kb-assistant",service_tier="None",team="kb-assistant--sales",team_alias="kb-assistant/sales",user="None"} 4.0
litellm_llm_api_time_to_first_token_metric_bucket{api_key_alias="kb-assistant/sales",api_provider="openai",end_user="None",hashed_api_key="5f0c2a1e9b7d4c3a8e6f1b2d3c4a5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d",le="+Inf",metadata_ledger_task_type="chat",metadata_ledger_tenant="None",model="served-b",model_group="kb-assistant",model_id="kb-assistant-backend-8",org_alias="None",org_id="None",requested_model="kb-assistant",service_tier="None",team="kb-assistant--sales",team_alias="kb-assistant/sales",user="None"} 4.0
litellm_llm_api_time_to_first_token_metric_count{api_key_alias="kb-assistant/sales",api_provider="openai",end_user="None",hashed_api_key="5f0c2a1e9b7d4c3a8e6f1b2d3c4a5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d",metadata_ledger_task_type="chat",metadata_ledger_tenant="None",model="served-b",model_group="kb-assistant",model_id="kb-assistant-backend-8",org_alias="None",org_id="None",requested_model="kb-assistant",service_tier="None",team="kb-assistant--sales",team_alias="kb-assistant/sales",user="None"} 4.0
litellm_llm_api_time_to_first_token_metric_sum{api_key_alias="kb-assistant/sales",api_provider="openai",end_user="None",hashed_api_key="5f0c2a1e9b7d4c3a8e6f1b2d3c4a5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d",metadata_ledger_task_type="chat",metadata_ledger_tenant="None",model="served-b",model_group="kb-assistant",model_id="kb-assistant-backend-8",org_alias="None",org_id="None",requested_model="kb-assistant",service_tier="None",team="kb-assistant--sales",team_alias="kb-assistant/sales",user="None"} 1.1
"""
)


def _day(before: str = BEFORE, after: str = AFTER, names: ServiceNames = NAMES):
    return read_gateway_day(
        parse_exposition(before, source="before.txt"),
        parse_exposition(after, source="after.txt"),
        names,
    )


def _rows(day) -> dict[tuple[str, str, str], dict]:
    return {(r["tenant"], r["task_type"], r["backend"]): r for r in day.breakdown}


def test_each_tenant_task_type_and_backend_is_a_row_of_what_happened_in_the_window():
    rows = _rows(_day())

    assert {key: row["requests"] for key, row in rows.items()} == {
        # 25 - 10 by the caller's metadata, on the backend model_id names.
        ("support", "rag", "kb-assistant-live"): 15,
        # The team names the tenant (a key's team outranks what a caller claims); a
        # series absent before counts from 0.
        ("sales", "chat", "kb-assistant-canary"): 4,
        # Refused by the team's limit before a deployment was picked: no backend, and
        # LiteLLM's failure hook has no metadata labels, so no task type.
        ("sales", UNATTRIBUTED, ""): 2,
        # A timeout the caller did not label, and a team and metadata that are not this
        # service's: counted, as unattributed.
        (UNATTRIBUTED, UNATTRIBUTED, "kb-assistant-live"): 1 + 6,
        # 50 before, 8 after: the proxy restarted, so 8 is what was counted since.
        ("support", "rag", "kb-assistant-canary"): 8,
    }
    # support/chat did not move in the window: no row; dataagent-sql is another service.
    assert not any(key[1] == "sql" for key in rows)


def test_a_rows_failures_are_its_status_codes_with_429_as_rate_limit_hits_and_408_as_timeouts():
    rows = _rows(_day())

    limited = rows["sales", UNATTRIBUTED, ""]
    assert limited["error_counts"] == {"429": 2}
    assert (limited["errors_4xx"], limited["rate_limit_hits"], limited["timeouts"]) == (2, 2, 0)
    timed_out = rows[UNATTRIBUTED, UNATTRIBUTED, "kb-assistant-live"]
    assert timed_out["error_counts"] == {"408": 1}
    assert (timed_out["errors_4xx"], timed_out["timeouts"]) == (1, 1)
    assert rows["support", "rag", "kb-assistant-live"]["error_counts"] == {}


def test_tokens_and_time_to_first_token_are_the_rows_own():
    rows = _rows(_day())

    support = rows["support", "rag", "kb-assistant-live"]
    assert (support["input_tokens"], support["output_tokens"]) == (3000, 600)
    assert support["latency"] == {}  # not streamed: LiteLLM measures no first token
    sales = rows["sales", "chat", "kb-assistant-canary"]
    assert (sales["input_tokens"], sales["output_tokens"]) == (900, 120)
    # 4 observations, 2 up to 0.25 s and 2 more up to 0.5 s: PromQL's interpolation.
    assert sales["latency"] == {
        "ttft_p50_ms": 250.0,
        "ttft_p95_ms": 475.0,
        "ttft_p99_ms": 495.0,
    }


def test_the_days_totals_are_the_sums_of_its_rows():
    day = _day()
    rows = day.breakdown

    for name in ("requests", "input_tokens", "output_tokens", "rate_limit_hits", "timeouts"):
        assert day.fields[name] == sum(row[name] for row in rows), name
    assert day.fields["requests"] == 36
    assert day.fields["error_counts"] == {"408": 1, "429": 2}
    assert day.fields["rate_4xx"] == round(3 / 36, 6)
    assert day.fields["ttft_p95_ms"] == 475.0  # one tenant streamed
    assert day.fields["e2e_p95_ms"] is None


def test_the_details_say_what_was_read_what_reset_and_what_could_not_be_attributed():
    details = _day().details

    assert details["from"] == "gateway_metrics"
    [reset] = details["counter_resets"]
    assert reset.startswith("litellm_proxy_total_requests_metric{")
    assert 'model_id="kb-assistant-backend-8"' in reset
    assert 'metadata_ledger_tenant="support"' in reset
    assert details["unattributed"] == {
        "task_type": ["translate"],
        "tenant": ["marketing", "other-svc--ops"],
    }
    assert details["missing"] == ["litellm_request_total_latency_metric"]


def test_without_token_metrics_the_tokens_are_unknown_not_zero():
    only_requests = AFTER.split("# HELP litellm_input_tokens_metric_total")[0]

    day = _day(after=only_requests)

    assert (day.fields["input_tokens"], day.fields["output_tokens"]) == (None, None)
    assert "litellm_input_tokens_metric" in day.details["missing"]
    assert day.fields["requests"] == 36


def test_a_deployment_the_ledger_does_not_know_keeps_its_model_id():
    names = ServiceNames(NAMES.slug, NAMES.tenants, NAMES.task_types, backends={})

    rows = _rows(_day(names=names))

    assert ("support", "rag", "kb-assistant-backend-7") in rows
    assert _day(names=names).details["unattributed"]["backend"] == [
        "kb-assistant-backend-7",
        "kb-assistant-backend-8",
    ]


def test_a_quiet_window_is_a_day_of_no_requests_and_no_rows():
    day = _day(before=AFTER, after=AFTER)

    assert day.breakdown == []
    assert day.fields["requests"] == 0


def test_a_scrape_split_by_service_reads_as_the_whole_one():
    """The beat task splits the gateway's scrape once; each part reads as the whole."""
    before, after = (parse_exposition(text) for text in (BEFORE, AFTER))
    earlier, later = by_service(before), by_service(after)

    assert set(later) == {"kb-assistant", "dataagent-sql"}
    assert read_gateway_day(earlier["kb-assistant"], later["kb-assistant"], NAMES).fields == (
        read_gateway_day(before, after, NAMES).fields
    )
    # dataagent-sql has no token series: its part still has the family, so 0 tokens, not
    # unknown.
    other = ServiceNames("dataagent-sql", frozenset(), frozenset())
    day = read_gateway_day(earlier["dataagent-sql"], later["dataagent-sql"], other)
    assert (day.fields["requests"], day.fields["output_tokens"]) == (70, 0)
