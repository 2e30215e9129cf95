"""Applying each kind of entry through its domain verbs.

One function per kind; each compares the entry with the stored row in
document terms (the `*_view` functions of `export`), calls the verb with
what differs, and records the change. Locked rows are refused here, before
the verb, with a message that says which new row to add instead; a gateway
policy version never changes, so one that differs is always refused.
"""

from __future__ import annotations

import re
from functools import partial
from typing import Any

from ledger import services as verbs
from ledger.declarative.document import Path, Problem
from ledger.declarative.export import (
    acceptance_view,
    asset_view,
    gateway_policy_view,
    license_view,
    revision_view,
    runtime_view,
    service_view,
    team_view,
)
from ledger.declarative.run import Change, Failed, Run, Skip, diff, same, show
from ledger.declarative.schema import SLO_FIELDS, Entry, declared_label, parse_asset_ref
from ledger.models import GatewayPolicy, ModelAsset, Revision, Runtime, Service

_RETIRED = ModelAsset.Lifecycle.RETIRED
RETIREMENT_KEYS = ("lifecycle", "retired_on", "deprecated_on")
# Domain field -> document key path (relative to the entry) a refusal is reported at.
SERVICE_ERROR_PATHS = {name: ("slos", key) for key, name in SLO_FIELDS.items()}
CAPABILITY_ERROR_PATHS = {"value": (), "kind": ()}
# The gateway policy verbs report a bad name under the revision's key.
POLICY_ERROR_PATHS = {"gateway_policy_version": ("label",), "document": ("document",)}
# "tenants[1].rpm: …", as the policy verb names a problem inside the document.
_JSON_PROBLEM = re.compile(
    r"^(?P<path>[\w-]+(?:\.[\w-]+|\[\d+\])*|\(the document\)): (?P<message>.*)$", re.S
)
_JSON_PART = re.compile(r"\[(\d+)\]|([\w-]+)")


ASSET_KEYS = [
    "team",
    "family",
    "source_repository",
    "license",
    "license_approval",
    "quantization",
    "derived_from",
    "derivation",
    "weights_digest",
    "tokenizer_id",
    "tokenizer_digest",
    "chat_template_digest",
    "generation_config_digest",
    "config_digest",
    "model_card_url",
    "lifecycle",
    "deprecated_on",
    "retired_on",
]


RUNTIME_KEYS = [name for name in Runtime.STATED_FIELDS if name != "name"]
# A file states a service's SLOs apart, under `slos` (schema.SLO_FIELDS).
SERVICE_KEYS = [
    name for name in Service.STATED_FIELDS if name != "slug" and name not in Service.SLO_FIELDS
]


REVISION_KEYS = [
    "model_asset",
    "runtime",
    "context_limit",
    "gateway_policy_version",
    "based_on",
    "notes",
]


def apply_team(run: Run, entry: Entry) -> None:
    slug = entry["slug"]
    members = [run.users[name] for name in entry.get("members", [])]
    team = run.teams.get(slug)
    if team is None:
        team = run.call(
            entry.path,
            verbs.create_team,
            actor=run.actor,
            slug=slug,
            name=entry["name"],
            members=members,
        )
        run.teams[slug] = team
        run.record("team", slug, Change("create", "team", slug, entry.path))
        return
    current = sorted(user.get_username() for user in team.members.all())
    view = team_view(team, current)
    if not same(view["name"], entry["name"]):
        run.problems.append(
            Problem(
                (*entry.path, "name"),
                f"team {slug} is named {view['name']!r}; the registry has no operation to "
                "rename a team yet, so apply cannot change it. Keep the recorded name.",
            )
        )
        raise Failed
    missing = [user for user in members if user.get_username() not in current]
    if missing:

        def add_all() -> None:
            for user in missing:
                verbs.add_team_member(team, user, actor=run.actor)

        run.call(entry.path, add_all)
    if entry.has("members"):
        extra = sorted(set(current) - set(entry["members"]))
        if extra:
            run.warnings.append(
                Problem(
                    (*entry.path, "members"),
                    f"{', '.join(extra)} stay(s) in team {slug}: apply adds members but the "
                    "registry has no operation to remove one yet.",
                )
            )
    after = sorted(set(current) | {user.get_username() for user in missing})
    fields = [("members", current, after)] if missing else []
    run.changed("team", slug, slug, entry.path, fields)


def apply_license(run: Run, entry: Entry) -> None:
    spdx_id = entry["spdx_id"]
    license_ = run.licenses.get(spdx_id)
    if license_ is None:
        run.licenses[spdx_id] = run.call(
            entry.path,
            verbs.create_license,
            actor=run.actor,
            spdx_id=spdx_id,
            name=entry["name"],
            kind=entry.get("kind"),
            gated=entry.get("gated", False),
            terms_url=entry.get("terms_url", ""),
        )
        run.record("license", spdx_id, Change("create", "license", spdx_id, entry.path))
        return
    differences = diff(entry, license_view(license_), ["name", "kind", "gated", "terms_url"])
    for key, before, after in differences:
        run.problems.append(
            Problem(
                (*entry.path, key),
                f"{spdx_id} is recorded with {key} {show(before)}, the document says "
                f"{show(after)}; the registry has no operation to change a recorded license "
                "yet. Keep the recorded value, or record the new terms as another "
                "LicenseRef-… license.",
            )
        )
    if differences:
        raise Failed
    run.record("license", spdx_id, None)


def assets_in_lineage_order(run: Run) -> list[Entry]:
    by_ref = {entry.identity: entry for entry in run.doc.model_assets}
    ordered: list[Entry] = []
    placed: set = set()

    def place(entry: Entry) -> None:
        if entry.identity in placed:
            return
        placed.add(entry.identity)
        if entry.get("derived_from"):
            parent = by_ref.get(parse_asset_ref(entry["derived_from"]))
            if parent is not None:
                place(parent)
        ordered.append(entry)

    for entry in run.doc.model_assets:
        place(entry)
    return ordered


def asset_value(run: Run, key: str, value: Any) -> Any:
    if key == "team":
        return run.team(value)
    if key == "license":
        return run.license(value)
    if key == "derived_from":
        return run.asset(value) if value else None
    return value


def apply_asset(run: Run, entry: Entry) -> None:
    ref = entry.identity
    label = f"{ref[0]}@{ref[1]}"
    asset = run.assets.get(ref)
    if asset is None:
        fields = {key: asset_value(run, key, entry[key]) for key in ASSET_KEYS if entry.has(key)}
        late = {}
        if entry.get("lifecycle") == _RETIRED:
            late = {key: fields.pop(key) for key in RETIREMENT_KEYS if key in fields}
        asset = run.call(
            entry.path,
            verbs.register_asset,
            actor=run.actor,
            name=ref[0],
            revision=ref[1],
            **fields,
        )
        run.assets[ref] = asset
        run.record("model asset", ref, Change("create", "model asset", label, entry.path))
        if late:
            run.late_retirements.append((entry, asset, late))
    else:
        differences = diff(entry, asset_view(asset), ASSET_KEYS)
        if entry.get("lifecycle") == _RETIRED and asset.lifecycle != _RETIRED:
            retiring = [d for d in differences if d[0] in RETIREMENT_KEYS]
            differences = [d for d in differences if d[0] not in RETIREMENT_KEYS]
            run.late_retirements.append((entry, asset, {key: after for key, _, after in retiring}))
        run.refuse_locked(
            asset,
            entry.path,
            differences,
            lambda: f"{label} is locked ({'; '.join(asset.lock_reasons())})",
            "Register the new content as a new asset (same name, a new `revision`) and add "
            "a new service revision that uses it instead.",
        )
        if differences:
            run.call(
                entry.path,
                verbs.update_asset,
                asset,
                actor=run.actor,
                **{key: asset_value(run, key, after) for key, _, after in differences},
            )
        run.changed("model asset", ref, label, entry.path, differences)
    for acceptance in entry.children.get("license_acceptances", []):
        run.each(
            acceptance,
            "license acceptance",
            partial(accept, run, asset),
            identity=(ref, acceptance.identity),
        )


def accept(run: Run, asset: ModelAsset, entry: Entry) -> None:
    key = (asset.pk, *entry.identity)
    label = f"{asset} {entry['terms_version']} accepted by {entry['accepted_by']}"
    existing = asset.license_acceptances.filter(
        license=asset.license,
        terms_version=entry["terms_version"],
        accepted_by=entry["accepted_by"],
    ).first()
    if existing is None:
        run.call(
            entry.path,
            verbs.record_license_acceptance,
            asset,
            actor=run.actor,
            terms_version=entry["terms_version"],
            accepted_by=entry["accepted_by"],
            accepted_at=entry["accepted_at"],
            note=entry.get("note", ""),
        )
        run.record(
            "license acceptance", key, Change("create", "license acceptance", label, entry.path)
        )
        return
    differences = diff(entry, acceptance_view(existing), ["accepted_at", "note"])
    for name, before, after in differences:
        run.problems.append(
            Problem(
                (*entry.path, name),
                f"this acceptance is recorded with {name} {show(before)}, the document says "
                f"{show(after)}; a recorded acceptance is evidence and does not change. "
                "Keep the recorded value or record a new acceptance (another terms_version).",
            )
        )
    if differences:
        raise Failed
    run.record("license acceptance", key, None)


def retire(run: Run, entry: Entry, asset: ModelAsset, changes: dict[str, Any]) -> None:
    asset.refresh_from_db()
    view = asset_view(asset)
    fields = [(key, view[key], value) for key, value in changes.items()]
    run.call(entry.path, verbs.update_asset, asset, actor=run.actor, **changes)
    ref = entry.identity
    run.changed("model asset", ref, f"{ref[0]}@{ref[1]}", entry.path, fields)


def apply_runtime(run: Run, entry: Entry) -> None:
    name = entry["name"]
    runtime = run.runtimes.get(name)
    if runtime is None:
        fields = {key: entry[key] for key in RUNTIME_KEYS if entry.has(key)}
        fields["team"] = run.team(entry["team"])
        runtime = run.call(entry.path, verbs.create_runtime, actor=run.actor, name=name, **fields)
        run.runtimes[name] = runtime
        run.record("runtime", name, Change("create", "runtime", name, entry.path))
    else:
        differences = diff(entry, runtime_view(runtime), RUNTIME_KEYS)
        run.refuse_locked(
            runtime,
            entry.path,
            differences,
            lambda: f"runtime {name} is locked ({'; '.join(runtime.lock_reasons())})",
            "Add a new runtime (a new `name`) and a new service revision that uses it instead.",
        )
        if not differences:
            run.record("runtime", name, None)
            return
        changes = {key: after for key, _, after in differences}
        if "team" in changes:
            changes["team"] = run.team(changes["team"])
        run.call(entry.path, verbs.update_runtime, runtime, actor=run.actor, **changes)
        run.changed("runtime", name, name, entry.path, differences)
    for warning in verbs.runtime_warnings(runtime):
        key = "image" if "pinned by digest" in warning else "launch_parameters"
        run.warnings.append(Problem((*entry.path, key), warning))


def apply_service(run: Run, entry: Entry) -> None:
    slug = entry["slug"]
    service = run.services.get(slug)
    slos = entry.get("slos", {})
    if service is None:
        fields = {key: entry[key] for key in SERVICE_KEYS if entry.has(key)}
        fields["team"] = run.team(entry["team"])
        task_types = fields.pop("task_types", [])
        fields.update({SLO_FIELDS[key]: value for key, value in slos.items()})
        service = run.call(
            entry.path,
            verbs.create_service,
            actor=run.actor,
            slug=slug,
            task_types=task_types,
            error_paths=SERVICE_ERROR_PATHS,
            **fields,
        )
        run.services[slug] = service
        run.record("service", slug, Change("create", "service", slug, entry.path))
        return
    view = service_view(service, [task.slug for task in service.task_types.all()])
    differences = diff(entry, view, SERVICE_KEYS)
    differences += [
        (f"slos.{key}", view["slos"][key], value)
        for key, value in slos.items()
        if not same(view["slos"][key], value)
    ]
    if differences:
        changes: dict[str, Any] = {}
        task_types = None
        for key, _, after in differences:
            if key == "task_types":
                task_types = after
            elif key == "team":
                changes["team"] = run.team(after)
            elif key.startswith("slos."):
                changes[SLO_FIELDS[key.removeprefix("slos.")]] = after
            else:
                changes[key] = after
        run.call(
            entry.path,
            verbs.update_service,
            service,
            actor=run.actor,
            task_types=task_types,
            error_paths=SERVICE_ERROR_PATHS,
            **changes,
        )
    run.changed("service", slug, slug, entry.path, differences)


def apply_gateway_policy(run: Run, service_entry: Entry, entry: Entry) -> None:
    """Record a version the registry does not have; a recorded one must say the same."""
    slug = service_entry["slug"]
    version = entry["version"]
    label = declared_label(entry)
    identity = (slug, label)
    name = f"{slug} {label}"
    policy = run.policies.get((slug, version))
    if policy is not None:
        _refuse_a_changed_policy(run, entry, policy)
        run.record("gateway policy", identity, None)
        return
    service = run.services[slug]
    note = entry.get("note", "")
    if entry["document"] is None:
        policy = run.call(
            entry.path,
            verbs.policy_named,
            service,
            label,
            actor=run.actor,
            note=note,
            error_paths=POLICY_ERROR_PATHS,
        )
    else:
        # The verb's own checks, first, so each problem gets its place inside the document.
        problems = verbs.document_problems(service, entry["document"])
        if problems:
            run.problems += [_inside_document(entry.path, text) for text in problems]
            raise Failed
        policy = run.call(
            entry.path,
            verbs.create_gateway_policy,
            service,
            actor=run.actor,
            document=entry["document"],
            note=note,
            error_paths=POLICY_ERROR_PATHS,
        )
    if policy.version != version:
        # Only a name from before versioning that looks like v<n> can push the number on.
        run.problems.append(
            Problem(
                (*entry.path, "version"),
                f"{name} would be recorded as version {policy.version}, not {version}: "
                f"{slug} already has a policy named v{version}. Number it {policy.version}.",
            )
        )
        raise Failed
    run.policies[(slug, version)] = policy
    fields = [("note", None, note)] if note else []
    if policy.known:
        fields.append(("sha256", None, policy.sha256))
    run.record(
        "gateway policy", identity, Change("create", "gateway policy", name, entry.path, fields)
    )


def _refuse_a_changed_policy(run: Run, entry: Entry, policy: GatewayPolicy) -> None:
    """A version is what revisions were approved with; the database refuses to rewrite it."""
    slug = policy.service.slug
    view = gateway_policy_view(policy)
    recorded = f"{slug} gateway policy version {policy.version}"
    advice = (
        f"A recorded version never changes: record the change as a new version "
        f"(version: {run.next_policy_version[slug]}) and name it in the revisions that use it."
    )
    problems = []
    if declared_label(entry) != policy.label:
        problems.append(
            Problem(
                (*entry.path, "label"),
                f"{recorded} is named {policy.label}, the document says "
                f"{declared_label(entry)}; a version keeps its name. Write "
                + (
                    f"label: {policy.label}."
                    if policy.label != f"v{policy.version}"
                    else "no label."
                ),
            )
        )
    if not same(view["document"], entry["document"]):
        if entry["document"] is None or view["document"] is None:
            what = "no document" if view["document"] is None else "a document"
            detail = f"is recorded with {what}"
        else:
            paths = _differing_paths(view["document"], entry["document"])
            shown = ", ".join(paths[:5]) + (", …" if len(paths) > 5 else "")
            detail = f"is recorded with another document (it differs at {shown})"
        problems.append(
            Problem((*entry.path, "document"), f"{recorded} ({policy.label}) {detail}. {advice}")
        )
    if entry.has("note") and not same(view["note"], entry["note"]):
        problems.append(
            Problem(
                (*entry.path, "note"),
                f"{recorded} ({policy.label}) is recorded with the note {show(view['note'])}; "
                "the registry has no operation to change it. Keep the recorded note.",
            )
        )
    if problems:
        run.problems.extend(problems)
        raise Failed


def _differing_paths(before: Any, after: Any, where: str = "") -> list[str]:
    """The JSON paths at which two documents differ, e.g. limits.max_output_tokens."""
    if isinstance(before, dict) and isinstance(after, dict):
        paths = []
        for key in [*before, *(k for k in after if k not in before)]:
            inner = f"{where}.{key}" if where else key
            if key not in before or key not in after:
                paths.append(inner)
            else:
                paths += _differing_paths(before[key], after[key], inner)
        return paths
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        paths = []
        for index, (old, new) in enumerate(zip(before, after, strict=True)):
            paths += _differing_paths(old, new, f"{where}[{index}]")
        return paths
    return [] if same(before, after) else [where or "(the document)"]


def _inside_document(entry_path: Path, text: str) -> Problem:
    """The verb's `tenants[1].rpm: …` at its place inside the entry's document, so the
    line number points at it."""
    path: Path = (*entry_path, "document")
    match = _JSON_PROBLEM.match(text)
    if match is None:
        return Problem(path, text)
    if match["path"] != "(the document)":
        for index, key in _JSON_PART.findall(match["path"]):
            path = (*path, int(index) if index else key)
    return Problem(path, match["message"])


def revision_value(run: Run, key: str, value: Any, slug: str) -> Any:
    if key == "gateway_policy_version":
        return run.policy_label(slug, value)
    if key == "model_asset":
        return run.asset(value)
    if key == "runtime":
        return run.runtime(value)
    if key == "based_on":
        return run.revisions[(slug, value)] if value is not None else None
    return value


def apply_revision(run: Run, service_entry: Entry, entry: Entry) -> None:
    slug = service_entry["slug"]
    number = entry["number"]
    service = run.services[slug]
    label = f"{slug} r{number}"
    revision = run.revisions.get((slug, number))
    if revision is None:
        fields = {
            key: revision_value(run, key, entry[key], slug)
            for key in REVISION_KEYS
            if entry.has(key)
        }
        revision = run.call(entry.path, verbs.create_revision, service, actor=run.actor, **fields)
        run.revisions[(slug, number)] = revision
        run.record("revision", (slug, number), Change("create", "revision", label, entry.path))
    else:
        differences = diff(entry, revision_view(revision), REVISION_KEYS)
        for key, before, after in differences:
            if key == "based_on":
                run.problems.append(
                    Problem(
                        (*entry.path, key),
                        f"{label} records based_on {show(before)}; it is set when a revision is "
                        f"created and does not change (the document says {show(after)})",
                    )
                )
                raise Failed
        try:
            run.refuse_locked(
                revision,
                entry.path,
                differences,
                lambda: f"{label} is locked ({'; '.join(revision.lock_reasons())})",
                f"Add a new revision (number: {run.next_number[slug]}) with the change instead.",
            )
        except Failed:
            # Report what else the document changes on this revision before giving up.
            apply_capabilities(run, entry, revision, slug)
            raise
        if differences:
            run.call(
                entry.path,
                verbs.update_revision,
                revision,
                actor=run.actor,
                **{key: revision_value(run, key, after, slug) for key, _, after in differences},
            )
        run.changed("revision", (slug, number), label, entry.path, differences)
    apply_capabilities(run, entry, revision, slug)


def apply_capabilities(run: Run, entry: Entry, revision: Revision, slug: str) -> None:
    number = entry["number"]
    label = f"{slug} r{number}"
    current = run.capabilities.get(revision.pk, {})
    for kind, value in entry.get("capabilities", {}).items():
        path = (*entry.path, "capabilities", kind)
        identity = (slug, number, kind)
        existing = current.get(kind)
        cap_label = f"{label} {kind}"
        if existing is not None and same(existing.value, value):
            run.record("capability", identity, None)
            continue
        if existing is not None and revision.lock_reasons():
            run.problems.append(
                Problem(
                    path,
                    f"{label} is locked ({'; '.join(revision.lock_reasons())}): its {kind} "
                    f"cannot change from {show(existing.value)} to {show(value)}. Add a new "
                    f"revision (number: {run.next_number[slug]}) with the change instead.",
                )
            )
            run.failed.add(("capability", identity))
            continue
        try:
            run.call(
                path,
                verbs.declare_capability,
                revision,
                actor=run.actor,
                kind=kind,
                value=value,
                error_paths=CAPABILITY_ERROR_PATHS,
            )
        except Failed:
            run.failed.add(("capability", identity))
            continue
        if existing is None:
            change = Change("create", "capability", cap_label, path, [("value", None, value)])
        else:
            change = Change(
                "update", "capability", cap_label, path, [("value", existing.value, value)]
            )
        run.record("capability", identity, change)


def apply_live_revision(run: Run, entry: Entry) -> None:
    slug = entry["slug"]
    number = entry["live_revision"]
    if ("revision", (slug, number)) in run.failed:
        raise Skip
    service = run.services[slug]
    service.refresh_from_db(fields=["live_revision"])
    target = run.revisions[(slug, number)]
    if service.live_revision_id == target.pk:
        return
    before = service.live_revision.number if service.live_revision is not None else None
    run.call(
        (*entry.path, "live_revision"),
        verbs.set_live_revision,
        service,
        target,
        actor=run.actor,
        reason=run.reason,
    )
    change = Change("update", "service", slug, entry.path, [("live_revision", before, number)])
    run.record("service", slug, change)
