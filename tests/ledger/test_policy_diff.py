"""The words of a gateway policy change, breaking ones first (ledger/queries/policy_diff.py),
and the revision diff that carries them."""

from __future__ import annotations

import copy

import pytest

from ledger.gateway_policy import EXAMPLE
from ledger.queries.policy_diff import policy_changes


def _with(**sections):
    document = copy.deepcopy(EXAMPLE)
    document.update(sections)
    return document


def _said(old, new):
    return [
        (change["field"], change["breaking"], change["why"]) for change in policy_changes(old, new)
    ]


def test_the_same_document_changes_nothing():
    assert policy_changes(EXAMPLE, copy.deepcopy(EXAMPLE)) == []


def test_a_lowered_output_limit_names_the_tenants_whose_answers_are_cut():
    new = _with(limits={**EXAMPLE["limits"], "max_output_tokens": 512})

    assert _said(EXAMPLE, new) == [
        (
            "gateway_policy.limits.max_output_tokens",
            True,
            "max_output_tokens 1024 → 512: long answers for tenant support will be truncated",
        )
    ]


def test_a_raised_limit_is_a_plain_change():
    new = _with(limits={**EXAMPLE["limits"], "max_input_tokens": 16384, "timeout_s": 30})

    assert _said(EXAMPLE, new) == [
        (
            "gateway_policy.limits.timeout_s",
            True,
            "timeout_s 60 → 30: requests running longer than 30 s will be cut off",
        ),
        ("gateway_policy.limits.max_input_tokens", False, "max_input_tokens 8192 → 16384"),
    ]


def test_a_removed_tenant_is_refused_and_an_added_one_is_listed():
    old = _with(
        tenants=[
            {"name": "support", "rpm": 600, "tpm": 1000},
            {"name": "legal", "rpm": 5, "tpm": 10},
        ]
    )
    new = _with(
        tenants=[
            {"name": "support", "rpm": 300, "tpm": 1000},
            {"name": "sales", "rpm": 5, "tpm": 10},
        ]
    )

    assert _said(old, new) == [
        ("gateway_policy.tenants.legal", True, "tenant legal removed: its calls will be refused"),
        (
            "gateway_policy.tenants.support.rpm",
            True,
            "tenant support's rpm 600 → 300: it is rate limited (429) sooner",
        ),
        ("gateway_policy.tenants.sales", False, "tenant sales added"),
    ]


def test_a_smaller_budget_per_day_breaks_and_a_larger_one_does_not():
    tenant = EXAMPLE["tenants"][0]
    smaller = _with(
        tenants=[{**tenant, "budget": {"amount": 100, "currency": "USD", "period_days": 30}}]
    )
    larger = _with(
        tenants=[{**tenant, "budget": {"amount": 500, "currency": "USD", "period_days": 7}}]
    )

    ((_, breaking, why),) = _said(EXAMPLE, smaller)
    assert breaking and why.startswith("tenant support's budget is now 100 USD per 30 days")
    ((_, breaking, _),) = _said(EXAMPLE, larger)
    assert not breaking


def test_a_dropped_fallback_says_where_those_requests_go_now():
    old = _with(fallbacks=[{"on": "context_window", "to_service": "kb-long"}])
    new = _with(fallbacks=[])

    assert _said(old, new) == [
        (
            "gateway_policy.fallbacks.context_window",
            True,
            "prompts too long for it no longer fall back to kb-long: they will be refused",
        )
    ]


def test_a_changed_degradation_says_what_callers_get_instead():
    new = _with(degradation={**EXAMPLE["degradation"], "chat": {"action": "async_queue"}})

    assert _said(EXAMPLE, new) == [
        (
            "gateway_policy.degradation.chat",
            True,
            "when degraded, chat callers get async queue instead of fallback to support-faq",
        )
    ]


def test_egress_newly_allowed_comes_first():
    new = _with(
        egress={"external_fallback_allowed": True},
        retries={**EXAMPLE["retries"], "num_retries": 3},
    )

    assert _said(EXAMPLE, new) == [
        (
            "gateway_policy.egress.external_fallback_allowed",
            True,
            "egress to an external fallback now allowed: requests may leave for an external API",
        ),
        ("gateway_policy.retries.num_retries", False, "num_retries 2 → 3"),
    ]


@pytest.mark.parametrize(("old", "new"), [(None, EXAMPLE), (EXAMPLE, None)])
def test_an_unknown_side_is_one_change_that_says_so(old, new):
    ((field, breaking, why),) = _said(old, new)

    assert field == "gateway_policy.document"
    assert not breaking
    assert "document is unknown: its changes cannot be listed" in why


@pytest.mark.django_db
def test_the_revision_diff_lists_policy_changes_breaking_first(team):
    from ledger.queries import revision_diff
    from ledger.services.gateway_policies import create_gateway_policy
    from tests.ledger.factories import RevisionFactory, ServiceFactory

    service = ServiceFactory(team=team, tenants=["support", "legal"])
    ServiceFactory(team=team, slug="support-faq")
    old = _with(
        tenants=[
            {"name": "support", "rpm": 600, "tpm": 1000},
            {"name": "legal", "rpm": 5, "tpm": 10},
        ]
    )
    old["degradation"] = {}
    new = copy.deepcopy(old)
    new["tenants"] = new["tenants"][:1]
    v1 = create_gateway_policy(service, actor=None, document=old)
    v2 = create_gateway_policy(service, actor=None, document=new)
    r1 = RevisionFactory(service=service, gateway_policy_version=v1.label)
    r2 = RevisionFactory(
        service=service,
        model_asset=r1.model_asset,
        runtime=r1.runtime,
        gateway_policy_version=v2.label,
    )

    changes = revision_diff(r1, r2)

    assert changes[0]["field"] == "gateway_policy.tenants.legal"
    assert changes[0]["breaking"]
    assert changes[0]["why"] == "tenant legal removed: its calls will be refused"
    assert {
        "field": "gateway_policy_version",
        "from": "v1",
        "to": "v2",
        "breaking": False,
        "why": "the gateway policy changes from v1 to v2",
    } in changes
