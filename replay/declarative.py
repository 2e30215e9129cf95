"""Backends and sample sets in the registry's YAML documents (`manage.py apply`).

Two top-level sections, applied after the registry's own (a backend names a revision
the same document may create), sample sets first (a backend's schedules name them)::

    sample_sets:
      - name: kb-smoke
        description: What the knowledge-base assistant must keep doing.
        file: replay/kb-smoke.jsonl        # JSONL beside the document, or inline:
        samples:
          - {key: capital, category: short_qa, messages: [{role: user, content: …}]}

    backends:
      - name: kb-assistant-vllm
        service: kb-assistant
        revision: 2
        base_url: http://10.0.0.5:8000
        model_name: kb-qwen2.5-7b-awq
        engine: vllm
        credential_env: LEDGER_BACKEND_KEY_KB_ASSISTANT
        concurrency_limit: 8
        schedules:
          - {sample_set: kb-smoke, crontab: "0 */6 * * *"}

Everything goes through `replay.services`, so each change appends its Event; a sample
set gets a new version only when its samples changed. Export writes the latest
version of each set inline. Nothing is deleted by apply.
"""

from __future__ import annotations

from decimal import Decimal
from functools import partial
from pathlib import Path as FilePath
from typing import Any

from django.core.exceptions import ValidationError

from ledger.declarative.document import Document, Path, Problem
from ledger.declarative.extensions import Extension, check_entries, register
from ledger.declarative.run import Change, Failed, Run, Skip, diff, same
from ledger.declarative.schema import Entry, Key, Section, suggest
from ledger.engines import Engine
from ledger.models import Revision
from replay import jsonl, services
from replay.models import Backend, SampleSet, Schedule
from replay.services.schedules import crontab_text, parse_crontab

# -- sample sets ------------------------------------------------------------------------

_SET_KEYS = ("name", "description", "file", "samples")


def _validate_sample_sets(
    value: Any, path: Path, document: Document, problems: list[Problem]
) -> list[dict[str, Any]] | None:
    if not isinstance(value, list):
        problems.append(Problem(path, "expected a list of sample sets"))
        return None
    sets: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    ok = True
    for index, item in enumerate(value):
        where = (*path, index)
        entry = _validate_sample_set(item, where, document, problems)
        if entry is None:
            ok = False
            continue
        if entry["name"] in seen:
            problems.append(
                Problem(
                    (*where, "name"),
                    f"{entry['name']!r} is already declared at sample_sets[{seen[entry['name']]}]",
                )
            )
            ok = False
            continue
        seen[entry["name"]] = index
        sets.append(entry)
    return sets if ok else None


def _validate_sample_set(
    item: Any, path: Path, document: Document, problems: list[Problem]
) -> dict[str, Any] | None:
    if not isinstance(item, dict):
        problems.append(Problem(path, "expected a mapping describing a sample set"))
        return None
    before = len(problems)
    for key in item:
        if key not in _SET_KEYS:
            close = suggest(str(key), _SET_KEYS)
            advice = f"did you mean {close}? " if close else ""
            problems.append(
                Problem(
                    (*path, str(key)),
                    f"unknown key for a sample set; {advice}Known keys: {', '.join(_SET_KEYS)}.",
                )
            )
    name = item.get("name")
    if not isinstance(name, str) or not name:
        problems.append(Problem((*path, "name"), "missing: a sample set needs a name"))
    description = item.get("description", "")
    if not isinstance(description, str):
        problems.append(Problem((*path, "description"), "expected text"))
    if ("file" in item) == ("samples" in item):
        problems.append(
            Problem(path, "give the samples inline under `samples` or in a JSONL `file`, not both")
        )
        return None
    if len(problems) > before:
        return None
    if "file" in item:
        specs = _samples_from_file(item["file"], (*path, "file"), document, problems)
    else:
        specs = _samples_inline(item["samples"], (*path, "samples"), problems)
    if specs is None:
        return None
    return {"path": path, "name": name, "description": description, "samples": specs}


def _samples_from_file(
    value: Any, path: Path, document: Document, problems: list[Problem]
) -> list[jsonl.SampleSpec] | None:
    if not isinstance(value, str) or not value:
        problems.append(Problem(path, "expected the path of a JSONL file"))
        return None
    file = FilePath(value)
    if not file.is_absolute() and document.source and document.source != "<stdin>":
        file = FilePath(document.source).parent / file
    try:
        text = file.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as error:
        problems.append(Problem(path, f"cannot read {file}: {error}"))
        return None
    try:
        return jsonl.parse_samples(text)
    except jsonl.JsonlError as error:
        problems.extend(Problem(path, f"{value} {message}") for message in error.errors)
        return None


def _samples_inline(value: Any, path: Path, problems: list[Problem]) -> list | None:
    if not isinstance(value, list) or not value:
        problems.append(Problem(path, "expected a non-empty list of samples"))
        return None
    specs: list[jsonl.SampleSpec] = []
    keys: dict[str, int] = {}
    ok = True
    for index, item in enumerate(value):
        try:
            spec = jsonl.sample_spec(item)
        except jsonl.SampleError as error:
            field = (*path, index, error.field) if error.field else (*path, index)
            problems.append(Problem(field, str(error).removeprefix(f"{error.field}: ")))
            ok = False
            continue
        if spec["key"] in keys:
            problems.append(
                Problem(
                    (*path, index, "key"),
                    f"{spec['key']!r} is already used by samples[{keys[spec['key']]}]",
                )
            )
            ok = False
            continue
        keys[spec["key"]] = index
        specs.append(spec)
    return specs if ok else None


def _apply_sample_sets(run: Run, sets: list[dict[str, Any]]) -> None:
    for entry in sets:
        path, name = entry["path"], entry["name"]
        try:
            sample_set, created = run.call(
                path,
                services.import_sample_set,
                actor=run.actor,
                name=name,
                jsonl=jsonl.dump_samples(entry["samples"]),
                description=entry["description"],
                error_paths={"jsonl": ("samples",), "name": ("name",)},
            )
        except Failed:
            run.failed.add(("sample set", name))
            continue
        if not created:
            run.record("sample set", name, None)
        elif sample_set.version == 1:
            run.record("sample set", name, Change("create", "sample set", str(sample_set), path))
        else:
            fields = [("version", sample_set.version - 1, sample_set.version)]
            run.record("sample set", name, Change("update", "sample set", name, path, fields))


def _export_sample_sets() -> list[dict[str, Any]]:
    entries = []
    for name in SampleSet.objects.order_by("name").values_list("name", flat=True).distinct():
        latest = services.get_sample_set(name)
        if latest is None:  # deleted since the names were read
            continue
        entry: dict[str, Any] = {"name": name}
        if latest.description:
            entry["description"] = latest.description
        entry["samples"] = [
            jsonl.compact({field: getattr(s, field) for field in jsonl.FIELDS})
            for s in latest.samples.order_by("key")
        ]
        entries.append(entry)
    return entries


# -- backends ---------------------------------------------------------------------------

SCHEDULE = Section(
    "schedule",
    {
        "sample_set": Key("text", required=True),
        "crontab": Key("text", required=True),
        "purpose": Key("choice", choices=tuple(Schedule.Purpose.values)),
        "enabled": Key("bool"),
    },
)
BACKEND = Section(
    "backend",
    {
        "name": Key("text", required=True),
        "service": Key("text", required=True),
        "revision": Key("int", required=True),
        "base_url": Key("text", required=True),
        "model_name": Key("text", required=True),
        "engine": Key("choice", choices=tuple(Engine.values)),
        "credential_env": Key("text"),
        "concurrency_limit": Key("int"),
        "connect_timeout_s": Key("decimal"),
        "first_token_timeout_s": Key("decimal"),
        "idle_timeout_s": Key("decimal"),
        "total_timeout_s": Key("decimal"),
        "enabled": Key("bool"),
        "routed": Key("bool"),
        "metrics_matcher": Key("text"),
        "schedules": Key("entries", section=SCHEDULE),
    },
    identity=("name",),
)
BACKEND_FIELDS = [name for name in BACKEND.keys if name not in ("name", "schedules")]
DEFAULTS: dict[str, Any] = {
    "credential_env": "",
    "concurrency_limit": 8,
    "connect_timeout_s": 5,
    "first_token_timeout_s": 30,
    "idle_timeout_s": 30,
    "total_timeout_s": 300,
    "enabled": True,
    "routed": True,
    "metrics_matcher": "",
    "schedules": [],
}
_TIMEOUTS = ("connect_timeout_s", "first_token_timeout_s", "idle_timeout_s", "total_timeout_s")


def _number(value: float) -> int | float:
    return int(value) if float(value).is_integer() else float(value)


def backend_view(backend: Backend) -> dict[str, Any]:
    """Every key of a backend in document terms (revision and service loaded)."""
    view: dict[str, Any] = {
        "name": backend.name,
        "service": backend.revision.service.slug,
        "revision": backend.revision.number,
        "base_url": backend.base_url,
        "model_name": backend.model_name,
        "engine": backend.engine,
        "credential_env": backend.credential_env,
        "concurrency_limit": backend.concurrency_limit,
        "enabled": backend.enabled,
        "routed": backend.routed,
        "metrics_matcher": backend.metrics_matcher,
    }
    for name in _TIMEOUTS:
        view[name] = _number(getattr(backend, name))
    return view


def _validate_backends(
    value: Any, path: Path, document: Document, problems: list[Problem]
) -> list[Entry] | None:
    entries = check_entries(value, BACKEND, path, problems)
    for entry in entries or []:
        seen: dict[tuple[str, str], int] = {}
        for index, schedule in enumerate(entry.children.get("schedules", [])):
            key = (schedule["sample_set"], schedule.get("purpose", Schedule.Purpose.REGULAR))
            if key in seen:
                problems.append(
                    Problem(
                        (*schedule.path, "sample_set"),
                        f"{key[0]} ({key[1]}) is already scheduled at schedules[{seen[key]}]",
                    )
                )
            seen[key] = index
            try:
                parse_crontab(schedule["crontab"])
            except ValidationError as error:
                problems.append(Problem((*schedule.path, "crontab"), " ".join(error.messages)))
    return entries


def _revision(run: Run, entry: Entry) -> Revision:
    key = (entry["service"], entry["revision"])
    if ("revision", key) in run.failed or ("service", key[0]) in run.failed:
        raise Skip
    revision = run.revisions.get(key)
    if revision is None:
        revision = (
            Revision.objects.select_related("service__team")
            .filter(service__slug=key[0], number=key[1])
            .first()
        )
    if revision is None:
        run.problems.append(
            Problem(
                (*entry.path, "revision"),
                f"service {key[0]} has no revision {key[1]} in this document or the registry",
            )
        )
        raise Failed
    return revision


def _values(entry: Entry, revision: Revision) -> dict[str, Any]:
    values = {name: entry[name] for name in BACKEND_FIELDS if entry.has(name)}
    values.pop("service")
    values["revision"] = revision
    for name in _TIMEOUTS:
        if isinstance(values.get(name), Decimal):
            values[name] = float(values[name])
    return values


def _apply_backend(run: Run, entry: Entry) -> None:
    name = entry["name"]
    revision = _revision(run, entry)
    backend = Backend.objects.select_related("revision__service").filter(name=name).first()
    if backend is None:
        backend = run.call(
            entry.path,
            services.create_backend,
            actor=run.actor,
            name=name,
            **_values(entry, revision),
        )
        run.record("backend", name, Change("create", "backend", name, entry.path))
    else:
        differences = diff(entry, backend_view(backend), BACKEND_FIELDS)
        if differences:
            changes = {key: after for key, _, after in differences}
            changes.pop("service", None)
            if "revision" in changes or "service" in {d[0] for d in differences}:
                changes["revision"] = revision
            for key in _TIMEOUTS:
                if key in changes:
                    changes[key] = float(changes[key])
            run.call(entry.path, services.update_backend, backend, actor=run.actor, **changes)
        run.changed("backend", name, name, entry.path, differences)
    for schedule in entry.children.get("schedules", []):
        run.each(
            schedule,
            "schedule",
            partial(_apply_schedule, run, backend),
            identity=(name, schedule["sample_set"], schedule.get("purpose", "regular")),
        )


def _apply_schedule(run: Run, backend: Backend, entry: Entry) -> None:
    purpose = entry.get("purpose", Schedule.Purpose.REGULAR)
    set_name = entry["sample_set"]
    identity = (backend.name, set_name, purpose)
    label = f"{set_name} on {backend.name} ({purpose})"
    if ("sample set", set_name) in run.failed:
        raise Skip
    schedule = (
        Schedule.objects.select_related("periodic_task__crontab")
        .filter(backend=backend, sample_set_name=set_name, purpose=purpose)
        .first()
    )
    if schedule is None:
        run.call(
            entry.path,
            services.create_schedule,
            actor=run.actor,
            backend=backend,
            sample_set_name=set_name,
            crontab=entry["crontab"],
            purpose=purpose,
        )
        if entry.get("enabled", True) is False:
            created = Schedule.objects.get(
                backend=backend, sample_set_name=set_name, purpose=purpose
            )
            run.call(entry.path, services.update_schedule, created, actor=run.actor, enabled=False)
        run.record("schedule", identity, Change("create", "schedule", label, entry.path))
        return
    view = {"crontab": crontab_text(schedule), "enabled": schedule.periodic_task.enabled}
    wanted = " ".join(parse_crontab(entry["crontab"]).values())
    differences = (
        [("crontab", view["crontab"], entry["crontab"])] if wanted != view["crontab"] else []
    )
    if entry.has("enabled") and not same(view["enabled"], entry["enabled"]):
        differences.append(("enabled", view["enabled"], entry["enabled"]))
    if differences:
        run.call(
            entry.path,
            services.update_schedule,
            schedule,
            actor=run.actor,
            **{key: after for key, _, after in differences},
        )
    run.changed("schedule", identity, label, entry.path, differences)


def _apply_backends(run: Run, entries: list[Entry]) -> None:
    for entry in entries:
        run.each(entry, "backend", lambda e: _apply_backend(run, e))


def _export_backends() -> list[dict[str, Any]]:
    entries = []
    backends = Backend.objects.select_related("revision__service").prefetch_related(
        "schedules__periodic_task__crontab"
    )
    for backend in backends.order_by("name"):
        view = backend_view(backend)
        view["schedules"] = []
        for schedule in sorted(
            backend.schedules.all(), key=lambda s: (s.sample_set_name, s.purpose)
        ):
            item: dict[str, Any] = {
                "sample_set": schedule.sample_set_name,
                "crontab": crontab_text(schedule),
            }
            if schedule.purpose != Schedule.Purpose.REGULAR:
                item["purpose"] = schedule.purpose
            if not schedule.periodic_task.enabled:
                item["enabled"] = False
            view["schedules"].append(item)
        entries.append(
            {key: value for key, value in view.items() if DEFAULTS.get(key, object()) != value}
        )
    return entries


register(
    Extension(
        "sample_sets",
        validate=_validate_sample_sets,
        apply=_apply_sample_sets,
        export=_export_sample_sets,
    )
)
register(
    Extension(
        "backends",
        validate=_validate_backends,
        apply=_apply_backends,
        export=_export_backends,
    )
)
