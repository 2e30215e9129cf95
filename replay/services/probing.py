"""Probing a backend: what it serves, whether its revision's declared capabilities hold.

A probe reads ``/v1/models`` and the engine's version endpoint, compares them with
the registered revision and runtime (drift), and sends one small request per
declared capability that a request can test. Each tested capability is recorded
through ``ledger.services.record_capability_check`` — verified (bound to the
revision's fingerprint) or failed, with what was seen.

Drift appends ``replay.drift_detected`` when it appears or changes and
``replay.drift_cleared`` when it goes away, not on every probe: a periodic sweep of
a drifted backend would otherwise bury the ledger in copies of one finding.
"""

from __future__ import annotations

import logging
from typing import Any

from asgiref.sync import async_to_sync
from django.db import transaction
from django.utils import timezone

from ledger import services as ledger_services
from ledger.chain import append_event
from ledger.models import Capability
from lib.actors import Actor
from replay import probes
from replay.client import BackendConfig, replay_many
from replay.metrics_probe import judge_metrics
from replay.models import Backend, Probe
from replay.permissions import ensure_can_manage_backend
from replay.services.backends import CredentialMissing, backend_config
from replay.services.metrics import ScrapeFailed, fetch_metrics

logger = logging.getLogger(__name__)

_PROBE_TIMEOUT = 10.0


def registered_context(backend: Backend) -> int:
    """What the engine was launched with, else the revision's context limit."""
    launched = (backend.revision.runtime.launch_parameters or {}).get("max_model_len")
    return launched if isinstance(launched, int) else backend.revision.context_limit


async def _observe(
    backend: Backend, config: BackendConfig, checks: list, *, metrics: bool = False
) -> dict[str, Any]:
    """Everything the probe asks the server, in one event loop; `metrics`: its /metrics too."""
    seen: dict[str, Any] = {"models": [], "version": probes.VersionInfo(None, None, None)}
    try:
        seen["models"] = await probes.get_models(
            config.base_url, credential=config.credential, timeout=_PROBE_TIMEOUT
        )
    except probes.ProbeError as error:
        seen["error"] = str(error)
        return seen
    seen["version"] = await probes.get_version(
        config.base_url, backend.engine, credential=config.credential, timeout=_PROBE_TIMEOUT
    )
    requests = [probe.request for _, probe in checks]
    seen["results"] = await replay_many(config, requests) if requests else []
    if metrics:
        try:
            seen["metrics"] = await fetch_metrics(
                config.base_url, credential=config.credential, timeout=_PROBE_TIMEOUT
            )
        except ScrapeFailed as error:
            seen["metrics_error"] = str(error)
    return seen


def _checks_for(capabilities: list[Capability]) -> tuple[list, dict[str, str]]:
    checks, not_probed = [], {}
    for capability in capabilities:
        if capability.kind == Capability.Kind.METRICS:
            continue  # read from /metrics, not by a request (`_metrics_verdict`)
        probe = probes.capability_probe(capability.kind, capability.value)
        if isinstance(probe, str):
            not_probed[capability.kind] = probe
        else:
            checks.append((capability, probe))
    return checks, not_probed


def probe_backend(backend: Backend, *, actor: Actor, record_unchanged: bool = True) -> Probe:
    """Probe a backend now; returns the stored Probe.

    The requests go out with no transaction open (a long-context probe against a
    CPU-bound engine can take minutes); what they found is recorded in one.
    ``record_unchanged=False`` (the periodic sweep) records a capability only when
    its status changes, so a sweep of a healthy fleet appends no events.
    """
    backend = Backend.objects.select_related("revision__service__team", "revision__runtime").get(
        pk=backend.pk
    )
    revision = backend.revision
    ensure_can_manage_backend(actor, revision)
    probe = Probe(backend=backend, fingerprint=revision.fingerprint, started_at=timezone.now())
    capabilities = list(revision.capabilities.order_by("kind"))
    checks, not_probed = _checks_for(capabilities)
    declared_metrics = next((c for c in capabilities if c.kind == Capability.Kind.METRICS), None)
    try:
        config = backend_config(backend, concurrency=min(len(checks) or 1, 4))
    except CredentialMissing as error:
        probe.error = str(error)
        probe.finished_at = timezone.now()
        probe.save(force_insert=True)
        return probe
    seen = async_to_sync(_observe)(backend, config, checks, metrics=declared_metrics is not None)
    probe.finished_at = timezone.now()
    if "error" in seen:
        probe.error = seen["error"]
        probe.save(force_insert=True)
        return probe
    models, version = seen["models"], seen["version"]
    probe.reachable = True
    probe.served_models = [{"id": m.id, "max_context": m.max_context} for m in models]
    probe.max_context = probes.reported_context(models, version, backend.model_name)
    probe.engine_version = (version.version or "")[:80]
    probe.drift = probes.find_drift(
        model_name=backend.model_name,
        context=registered_context(backend),
        engine=revision.runtime.engine,
        engine_version=revision.runtime.engine_version,
        models=models,
        version=version,
    )
    results: dict[str, Any] = {
        kind: {"status": "not_probed", "why": why} for kind, why in not_probed.items()
    }
    with transaction.atomic():
        current = {
            c.pk: c for c in Capability.objects.select_for_update().filter(revision=revision)
        }
        verdicts = [
            (probed, probes.judge_capability(check, replayed))
            for (probed, check), replayed in zip(checks, seen["results"], strict=True)
        ]
        if declared_metrics is not None:
            verdicts.append((declared_metrics, _metrics_verdict(backend, declared_metrics, seen)))
        for probed, verdict in verdicts:
            status = Capability.Status.VERIFIED if verdict.passed else Capability.Status.FAILED
            results[probed.kind] = {"status": status, **verdict.evidence}
            capability = current.get(probed.pk)
            if capability is None or capability.value != probed.value:
                continue  # re-declared while the probe ran: the verdict is about the old value
            unchanged = capability.status == status and (
                status == Capability.Status.FAILED
                or capability.verified_fingerprint == revision.fingerprint
            )
            if record_unchanged or not unchanged:
                evidence = {
                    **verdict.evidence,
                    "backend": backend.name,
                    "probed_at": probe.started_at,
                    "declared": capability.value,
                }
                ledger_services.record_capability_check(
                    capability, actor=actor, passed=verdict.passed, evidence=_jsonable(evidence)
                )
        probe.capability_results = _jsonable(results)
        probe.save(force_insert=True)
        _record_drift(backend, probe, actor)
    return probe


def _metrics_verdict(
    backend: Backend, capability: Capability, seen: dict[str, Any]
) -> probes.CapabilityVerdict:
    """The declared series looked for in the backend's /metrics, as scraped just now."""
    if "metrics" not in seen:
        return probes.CapabilityVerdict(
            False,
            {
                "probe": "GET /metrics",
                "outcome": "unreachable",
                "error_detail": seen.get("metrics_error", ""),
            },
        )
    passed, evidence = judge_metrics(
        capability.value,
        seen["metrics"],
        engine=backend.revision.runtime.engine,
        source=f"{backend.name} /metrics",
    )
    return probes.CapabilityVerdict(passed, {"outcome": "ok" if passed else "missing", **evidence})


def _jsonable(value: Any) -> Any:
    """Datetimes as ISO text: evidence is stored in JSON fields."""
    if isinstance(value, dict):
        return {key: _jsonable(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_jsonable(item) for item in value]
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return value


def _record_drift(backend: Backend, probe: Probe, actor: Actor) -> None:
    previous = (
        Probe.objects.filter(backend=backend, reachable=True)
        .exclude(pk=probe.pk)
        .order_by("-started_at")
        .values_list("drift", flat=True)
        .first()
    )
    previous = previous or []
    if probe.drift == previous:
        return
    label = f"{backend.name} ({backend.revision})"
    if probe.drift:
        logger.warning("drift on %s: %s", backend.name, probes.describe_drift(probe.drift))
        append_event(
            actor=actor,
            action="replay.drift_detected",
            subject=backend,
            subject_label=label,
            payload={
                "probe": probe.pk,
                "drift": probe.drift,
                "previous": previous,
                "fingerprint": probe.fingerprint,
            },
        )
    else:
        append_event(
            actor=actor,
            action="replay.drift_cleared",
            subject=backend,
            subject_label=label,
            payload={"probe": probe.pk, "previous": previous},
        )
