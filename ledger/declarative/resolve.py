"""Before anything is written: load the rows a document names and check its references.

Every team, license, asset, runtime and revision a document mentions must be
declared in it or exist in the registry; users named as team members must
exist; lineage must lead back to a base asset; revision numbers and gateway
policy versions count up without a gap, and a revision naming `v<n>` names a
version the document declares or the registry has. Problems are collected on
the run, with the closest known name as a suggestion.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model

from ledger.declarative.document import Path, Problem, format_path
from ledger.declarative.run import Run
from ledger.declarative.schema import Entry, declared_label, parse_asset_ref, suggest
from ledger.models import (
    Capability,
    GatewayPolicy,
    License,
    ModelAsset,
    Revision,
    Runtime,
    Service,
    Team,
)
from ledger.services.gateway_policies import VERSION_LABEL

_RETIRED = ModelAsset.Lifecycle.RETIRED


def resolve(run: Run) -> None:
    """Load the rows the document names and check every reference; write nothing."""
    _load(run)
    _check(run)


def _load(run: Run) -> None:
    """The stored rows the document names (one query per kind), into the run."""
    doc = run.doc
    asset_entries = {entry.identity for entry in doc.model_assets}
    team_slugs = {e["slug"] for e in doc.teams}
    team_slugs |= {e["team"] for e in [*doc.model_assets, *doc.runtimes, *doc.services]}
    license_ids = {e["spdx_id"] for e in doc.licenses} | {e["license"] for e in doc.model_assets}
    asset_refs = set(asset_entries)
    asset_refs |= {
        parse_asset_ref(e["derived_from"]) for e in doc.model_assets if e.get("derived_from")
    }
    runtime_names = {e["name"] for e in doc.runtimes}
    for service in doc.services:
        for revision in service.children.get("revisions", []):
            asset_refs.add(parse_asset_ref(revision["model_asset"]))
            runtime_names.add(revision["runtime"])
    usernames = {name for e in doc.teams for name in e.get("members", [])}

    User = get_user_model()
    run.users = {
        user.get_username(): user
        for user in User.objects.filter(**{f"{User.USERNAME_FIELD}__in": usernames})
    }
    run.teams = {team.slug: team for team in Team.objects.filter(slug__in=team_slugs)}
    run.licenses = {lic.spdx_id: lic for lic in License.objects.filter(spdx_id__in=license_ids)}
    run.assets = {
        (asset.name, asset.revision): asset
        for asset in ModelAsset.objects.select_related("team", "license", "derived_from").filter(
            name__in={name for name, _ in asset_refs}
        )
        if (asset.name, asset.revision) in asset_refs
    }
    run.runtimes = {
        runtime.name: runtime
        for runtime in Runtime.objects.select_related("team").filter(name__in=runtime_names)
    }
    service_slugs = [e["slug"] for e in doc.services]
    run.services = {
        service.slug: service
        for service in Service.objects.select_related("team", "live_revision").filter(
            slug__in=service_slugs
        )
    }
    for revision in Revision.objects.select_related(
        "service", "model_asset", "runtime", "based_on"
    ).filter(service__slug__in=service_slugs):
        run.revisions[(revision.service.slug, revision.number)] = revision
    for policy in GatewayPolicy.objects.select_related("service").filter(
        service__slug__in=service_slugs
    ):
        run.policies[(policy.service.slug, policy.version)] = policy
    for capability in Capability.objects.filter(
        revision__in=[revision.pk for revision in run.revisions.values()]
    ):
        run.capabilities.setdefault(capability.revision_id, {})[capability.kind] = capability


def _check(run: Run) -> None:
    doc = run.doc
    User = get_user_model()
    asset_entries = {entry.identity: entry for entry in doc.model_assets}
    for entry in doc.teams:
        for index, name in enumerate(entry.get("members", [])):
            if name not in run.users:
                _unknown(
                    run,
                    (*entry.path, "members"),
                    f"item {index}: no user named {name!r}",
                    name,
                    User.objects.values_list(User.USERNAME_FIELD, flat=True),
                    "Users are not managed by this document; create the account first.",
                )
    declared_teams = {e["slug"] for e in doc.teams} | set(run.teams)
    for entry in [*doc.model_assets, *doc.runtimes, *doc.services]:
        _check_ref(run, entry, "team", "team", declared_teams, "teams", Team, "slug")
    declared_licenses = {e["spdx_id"] for e in doc.licenses} | set(run.licenses)
    declared_assets = set(asset_entries) | set(run.assets)
    declared_runtimes = {e["name"] for e in doc.runtimes} | set(run.runtimes)
    for entry in doc.model_assets:
        _check_ref(
            run, entry, "license", "license", declared_licenses, "licenses", License, "spdx_id"
        )
        if entry.get("derived_from"):
            _check_asset_ref(run, entry, "derived_from", declared_assets)
    _check_lineage(run, asset_entries)
    _check_lifecycle_dates(run)
    for entry in doc.services:
        _check_policies(run, entry)
        _check_revisions(run, entry, declared_assets, declared_runtimes, asset_entries)


def _check_lifecycle_dates(run: Run) -> None:
    for entry in run.doc.model_assets:
        stored = run.assets.get(entry.identity)
        for state, key in (
            (ModelAsset.Lifecycle.DEPRECATED, "deprecated_on"),
            (ModelAsset.Lifecycle.RETIRED, "retired_on"),
        ):
            if entry.get("lifecycle") != state or entry.get(key):
                continue
            if stored is not None and getattr(stored, key) and not entry.has(key):
                continue
            run.problems.append(
                Problem(
                    (*entry.path, key),
                    f"a {state} asset says since when, e.g. {key}: 2026-03-31",
                )
            )


def _unknown(run: Run, path: Path, what: str, value: str, candidates, advice: str) -> None:
    close = suggest(value, list(candidates))
    hint = f"; did you mean {close}?" if close else "."
    run.problems.append(Problem(path, f"{what}{hint} {advice}"))


def _check_ref(run: Run, entry, key, noun, declared, section, model, field_name) -> None:
    value = entry[key]
    if value in declared:
        return
    candidates = set(declared) | set(model.objects.values_list(field_name, flat=True))
    _unknown(
        run,
        (*entry.path, key),
        f"no {noun} {value!r} in this document or the registry",
        value,
        candidates,
        f"Declare it under `{section}` or name one that exists.",
    )


def _check_asset_ref(run: Run, entry: Entry, key: str, declared: set) -> None:
    ref = parse_asset_ref(entry[key])
    if ref in declared:
        return
    names = {f"{name}@{revision}" for name, revision in declared}
    names |= {
        f"{name}@{revision}"
        for name, revision in ModelAsset.objects.values_list("name", "revision")
    }
    _unknown(
        run,
        (*entry.path, key),
        f"no model asset {entry[key]!r} in this document or the registry",
        entry[key],
        names,
        "Declare it under `model_assets` (name and revision) or name one that exists.",
    )


def _check_lineage(run: Run, asset_entries: dict[tuple[str, str], Entry]) -> None:
    for ref, entry in asset_entries.items():
        seen = {ref}
        current: Entry | None = entry
        while current is not None and current.get("derived_from"):
            parent = parse_asset_ref(current["derived_from"])
            if parent in seen:
                run.problems.append(
                    Problem(
                        (*entry.path, "derived_from"),
                        f"{ref[0]}@{ref[1]} would derive from itself through "
                        f"{current['derived_from']}; lineage must lead back to a base asset",
                    )
                )
                break
            seen.add(parent)
            current = asset_entries.get(parent)


def _check_policies(run: Run, service: Entry) -> None:
    """Versions count up from the registry's; a label of its own is a version known by
    name only; each label names one version."""
    slug = service["slug"]
    stored = {version: policy for (s, version), policy in run.policies.items() if s == slug}
    stored_versions = {policy.label: version for version, policy in stored.items()}
    expected = max(stored, default=0) + 1
    entries = sorted(service.children.get("gateway_policies", []), key=lambda e: e["version"])
    labels: dict[str, Entry] = {}
    for entry in entries:
        version = entry["version"]
        label = declared_label(entry)
        if label in labels:
            run.problems.append(
                Problem(
                    (*entry.path, "label"),
                    f"{label} is already declared at {format_path(labels[label].path)}",
                )
            )
        labels[label] = entry
        if version in stored:
            continue
        if version != expected:
            run.problems.append(
                Problem(
                    (*entry.path, "version"),
                    f"gateway policy versions of {slug} are numbered in order: the next "
                    + (f"after v{expected - 1} " if expected > 1 else "")
                    + f"is {expected}, not {version}",
                )
            )
            continue
        expected += 1
        if entry["document"] is not None and label != f"v{version}":
            run.problems.append(
                Problem(
                    (*entry.path, "label"),
                    f"a version with a document is named v{version}; leave label out (a label "
                    "of its own is for a version known by name only, with document: null)",
                )
            )
        elif entry["document"] is None and VERSION_LABEL.match(label):
            run.problems.append(
                Problem(
                    (*entry.path, "label" if entry.has("label") else "document"),
                    f"a version without a document is known by the name revisions gave it "
                    f"before policies were versioned (label: gw-2026.01), not {label}; give "
                    "its document to record it as a version",
                )
            )
        elif label in stored_versions:
            run.problems.append(
                Problem(
                    (*entry.path, "label"),
                    f"{label} is already recorded as version {stored_versions[label]} of "
                    f"{slug}'s gateway policy",
                )
            )
    versions = set(stored) | {entry["version"] for entry in entries}
    run.next_policy_version[slug] = max(versions, default=0) + 1


def _check_revisions(
    run: Run,
    service: Entry,
    declared_assets: set,
    declared_runtimes: set,
    asset_entries: dict[tuple[str, str], Entry],
) -> None:
    slug = service["slug"]
    revisions = service.children.get("revisions", [])
    stored = sorted(number for s, number in run.revisions if s == slug)
    top = stored[-1] if stored else 0
    expected = top + 1
    numbers = set(stored)
    for entry in sorted(revisions, key=lambda e: e["number"]):
        number = entry["number"]
        if number not in numbers:
            if number != expected:
                if expected == 1:
                    rule = f"the first revision of {slug} is number 1, not {number}"
                else:
                    rule = (
                        f"revisions of {slug} are numbered in order: the next after "
                        f"r{expected - 1} is {expected}, not {number}"
                    )
                run.problems.append(Problem((*entry.path, "number"), rule))
                continue
            numbers.add(number)
            expected += 1
            asset_entry = asset_entries.get(parse_asset_ref(entry["model_asset"]))
            stored_asset = run.assets.get(parse_asset_ref(entry["model_asset"]))
            if (
                asset_entry is not None
                and stored_asset is not None
                and asset_entry.get("lifecycle") == _RETIRED
                and stored_asset.lifecycle != _RETIRED
            ):
                run.problems.append(
                    Problem(
                        (*entry.path, "model_asset"),
                        f"this document retires {entry['model_asset']} "
                        f"({format_path(asset_entry.path)}.lifecycle); a retired asset cannot go "
                        "into a new revision. Choose an active asset.",
                    )
                )
        based_on = entry.get("based_on")
        if based_on is not None and (based_on >= number or based_on not in numbers):
            run.problems.append(
                Problem(
                    (*entry.path, "based_on"),
                    f"expected the number of an earlier revision of {slug}, got {based_on}",
                )
            )
        _check_asset_ref(run, entry, "model_asset", declared_assets)
        _check_policy_ref(run, service, entry)
        if entry["runtime"] not in declared_runtimes:
            _check_ref(
                run, entry, "runtime", "runtime", declared_runtimes, "runtimes", Runtime, "name"
            )
    run.next_number[slug] = expected
    live = service.get("live_revision")
    if live is not None and live not in numbers:
        listed = f"r1 to r{max(numbers)}" if numbers else "none"
        run.problems.append(
            Problem(
                (*service.path, "live_revision"),
                f"{slug} has no revision {live} (revisions: {listed}); "
                "list it under `revisions` or name an existing one",
            )
        )


def _check_policy_ref(run: Run, service: Entry, entry: Entry) -> None:
    """`v<n>` must be declared; any other name is recorded by name on first use."""
    slug = service["slug"]
    label = entry["gateway_policy_version"]
    if not VERSION_LABEL.match(label):
        return
    declared = {policy.label: version for (s, version), policy in run.policies.items() if s == slug}
    declared |= {
        declared_label(e): e["version"] for e in service.children.get("gateway_policies", [])
    }
    if label in declared:
        return
    have = ", ".join(sorted(declared, key=declared.__getitem__)) or "none yet"
    run.problems.append(
        Problem(
            (*entry.path, "gateway_policy_version"),
            f"no gateway policy {label} of {slug} in this document or the registry (it has "
            f"{have}). Declare it under {format_path((*service.path, 'gateway_policies'))} "
            "with its document, or name one that exists.",
        )
    )
