"""What changes from one gateway policy document to another, and what each change does to
callers, breaking ones first.

Breaking: a limit lowered (prompts refused, answers truncated, requests cut, more 429s),
a tenant removed or its quota lowered, a fallback dropped, a task type's degradation
changed or dropped, and egress to an external fallback newly allowed (requests may
leave the company: a signer must see it first). Everything else that differs (a limit
raised, a tenant added, retries) is a plain change with its words.

Field names are the document's paths under `gateway_policy.`, e.g.
`gateway_policy.limits.max_output_tokens`, `gateway_policy.tenants.legal`,
`gateway_policy.tenants.support.rpm`, `gateway_policy.fallbacks.context_window`,
`gateway_policy.degradation.sql`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ledger.queries.diff import Change

PREFIX = "gateway_policy."

# What a lowered limit does to callers; {from} {to} {tenants} are filled in.
LIMIT_LOWERED = {
    "max_input_tokens": "max_input_tokens {from} → {to}: prompts longer than {to} tokens "
    "will be refused by the gateway",
    "max_output_tokens": "max_output_tokens {from} → {to}: long answers for {tenants} will "
    "be truncated",
    "timeout_s": "timeout_s {from} → {to}: requests running longer than {to} s will be cut off",
    "stream_timeout_s": "stream_timeout_s {from} → {to}: streams whose first chunk takes "
    "longer than {to} s will fail",
    "max_parallel_requests": "max_parallel_requests {from} → {to}: at most {to} requests per "
    "backend at once; the rest wait or get 429",
}
QUOTA_LOWERED = {
    "rpm": "tenant {tenant}'s rpm {from} → {to}: it is rate limited (429) sooner",
    "tpm": "tenant {tenant}'s tpm {from} → {to}: it is rate limited (429) sooner",
    "max_parallel_requests": "tenant {tenant}'s max_parallel_requests {from} → {to}: fewer "
    "of its requests run at once",
}
FALLBACK_WHEN = {
    "context_window": "prompts too long for it",
    "error": "requests it cannot serve (pool full or failing)",
    "content_policy": "requests its engine refuses for content",
}


def _change(field: str, old: Any, new: Any, breaking: bool, why: str) -> Change:
    return {"field": PREFIX + field, "from": old, "to": new, "breaking": breaking, "why": why}


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _lowered(old: Any, new: Any) -> bool:
    return bool(new < old)


def policy_changes(old: dict[str, Any] | None, new: dict[str, Any] | None) -> list[Change]:
    """Each change from document `old` to `new`, breaking first, then by field. A side
    whose document is unknown (None) is one change: its contents cannot be compared."""
    if old == new:
        return []
    if old is None or new is None:
        side = "the earlier" if old is None else "the new"
        why = f"{side} gateway policy's document is unknown: its changes cannot be listed"
        return [_change("document", old and "recorded", new and "recorded", False, why)]
    changes = [
        *_limits(old.get("limits", {}), new.get("limits", {}), new),
        *_tenants(old.get("tenants", []), new.get("tenants", [])),
        *_fallbacks(old.get("fallbacks", []), new.get("fallbacks", [])),
        *_degradation(old.get("degradation", {}), new.get("degradation", {})),
        *_plain("retries", old.get("retries", {}), new.get("retries", {})),
        *_egress(old.get("egress"), new.get("egress")),
    ]
    return sorted(changes, key=lambda change: (not change["breaking"], change["field"]))


def _tenant_names(document: dict[str, Any]) -> str:
    names = [tenant["name"] for tenant in document.get("tenants", [])]
    if not names:
        return "every caller"
    return ("tenant " if len(names) == 1 else "tenants ") + ", ".join(names)


def _limits(old: dict[str, Any], new: dict[str, Any], new_document: dict[str, Any]) -> list[Change]:
    changes = []
    for name in sorted(old.keys() | new.keys()):
        was, now = old.get(name), new.get(name)
        if was == now:
            continue
        field = f"limits.{name}"
        if _number(was) and _number(now) and _lowered(was, now):
            why = LIMIT_LOWERED[name].format(
                **{"from": was, "to": now, "tenants": _tenant_names(new_document)}
            )
            changes.append(_change(field, was, now, True, why))
        elif now is None:
            changes.append(_change(field, was, now, False, f"{name} no longer set (was {was})"))
        elif was is None:
            changes.append(_change(field, was, now, False, f"{name} now set to {now}"))
        else:
            changes.append(_change(field, was, now, False, f"{name} {was} → {now}"))
    return changes


def _tenants(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[Change]:
    before = {tenant["name"]: tenant for tenant in old}
    after = {tenant["name"]: tenant for tenant in new}
    changes = []
    for name in sorted(before.keys() | after.keys()):
        was, now = before.get(name), after.get(name)
        if was == now:
            continue
        field = f"tenants.{name}"
        if now is None:
            why = f"tenant {name} removed: its calls will be refused"
            changes.append(_change(field, "listed", None, True, why))
            continue
        if was is None:
            changes.append(_change(field, None, "listed", False, f"tenant {name} added"))
            continue
        for key in ("rpm", "tpm", "max_parallel_requests"):
            old_value, new_value = was.get(key), now.get(key)
            if old_value == new_value:
                continue
            lowered = new_value is not None and old_value is not None and new_value < old_value
            if lowered:
                why = QUOTA_LOWERED[key].format(tenant=name, **{"from": old_value, "to": new_value})
            elif new_value is None:
                why = f"tenant {name}'s {key} no longer set (was {old_value})"
            else:
                why = f"tenant {name}'s {key} {old_value or 'unset'} → {new_value}"
            changes.append(_change(f"{field}.{key}", old_value, new_value, lowered, why))
        changes.extend(_budget(name, was.get("budget"), now.get("budget")))
    return changes


def _budget(tenant: str, was: dict[str, Any] | None, now: dict[str, Any] | None) -> list[Change]:
    if was == now:
        return []
    field = f"tenants.{tenant}.budget"

    def said(budget: dict[str, Any] | None) -> str | None:
        if budget is None:
            return None
        return f"{budget['amount']} {budget['currency']} per {budget['period_days']} days"

    if now is not None and (
        was is None or now["amount"] / now["period_days"] < was["amount"] / was["period_days"]
    ):
        why = f"tenant {tenant}'s budget is now {said(now)}: its calls are refused once it is spent"
        if was is not None:
            why += f" (was {said(was)})"
        return [_change(field, said(was), said(now), True, why)]
    if now is None:
        return [_change(field, said(was), None, False, f"tenant {tenant} no longer has a budget")]
    return [
        _change(field, said(was), said(now), False, f"tenant {tenant}'s budget is now {said(now)}")
    ]


def _fallback_targets(fallbacks: list[dict[str, Any]]) -> dict[str, list[str]]:
    targets: dict[str, list[str]] = {}
    for fallback in fallbacks:
        targets.setdefault(fallback["on"], []).append(fallback["to_service"])
    return targets


def _fallbacks(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[Change]:
    before, after = _fallback_targets(old), _fallback_targets(new)
    changes = []
    for on in sorted(before.keys() | after.keys()):
        was, now = before.get(on, []), after.get(on, [])
        if was == now:
            continue
        dropped = [slug for slug in was if slug not in now]
        field = f"fallbacks.{on}"
        old_text, new_text = ", ".join(was) or None, ", ".join(now) or None
        if dropped:
            where = f"now go to {new_text}" if now else "will be refused"
            why = f"{FALLBACK_WHEN[on]} no longer fall back to {', '.join(dropped)}: they {where}"
            changes.append(_change(field, old_text, new_text, True, why))
        else:
            why = f"{FALLBACK_WHEN[on]} now fall back to {new_text}"
            changes.append(_change(field, old_text, new_text, False, why))
    return changes


def _degradation_words(rule: dict[str, Any] | None) -> str | None:
    if rule is None:
        return None
    action = rule["action"]
    if action == "fallback":
        return f"fallback to {rule['to_service']}"
    return str(action).replace("_", " ")


def _degradation(old: dict[str, Any], new: dict[str, Any]) -> list[Change]:
    changes = []
    for task in sorted(old.keys() | new.keys()):
        was, now = old.get(task), new.get(task)
        if was == now:
            continue
        field = f"degradation.{task}"
        old_text, new_text = _degradation_words(was), _degradation_words(now)
        if now is None:
            why = f"{task} has no degradation any more (was {old_text}): callers get errors"
            changes.append(_change(field, old_text, None, True, why))
        elif was is None:
            changes.append(
                _change(field, None, new_text, False, f"{task} now degrades: {new_text}")
            )
        elif old_text == new_text:
            why = f"{task}'s degradation message changes: callers are told something else"
            changes.append(_change(field, old_text, new_text, False, why))
        else:
            why = f"when degraded, {task} callers get {new_text} instead of {old_text}"
            changes.append(_change(field, old_text, new_text, True, why))
    return changes


def _plain(section: str, old: dict[str, Any], new: dict[str, Any]) -> list[Change]:
    return [
        _change(
            f"{section}.{key}",
            old.get(key),
            new.get(key),
            False,
            f"{key} {old.get(key)} → {new.get(key)}",
        )
        for key in sorted(old.keys() | new.keys())
        if old.get(key) != new.get(key)
    ]


def _egress(old: dict[str, Any] | None, new: dict[str, Any] | None) -> list[Change]:
    was = None if old is None else old["external_fallback_allowed"]
    now = None if new is None else new["external_fallback_allowed"]
    if was == now:
        return []
    field = "egress.external_fallback_allowed"
    if now is True:
        why = "egress to an external fallback now allowed: requests may leave for an external API"
        return [_change(field, was, now, True, why)]
    if now is False:
        return [_change(field, was, now, False, "egress to an external fallback no longer allowed")]
    return [_change(field, was, now, False, "egress is no longer stated")]
