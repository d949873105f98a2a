"""What changed under the baselines: the catalog since its last snapshot, the model alias's snapshot.

Pure: the ``watch`` flow reads the snapshots from the store, calls :func:`diff_catalog` and
:func:`diff_model`, and emits the events :func:`events_for` describes. The resource ids are what the
``rebaseline-all`` deployment's triggers match (``skillreach.skill.*``, ``skillreach.model.*``).

- The first watch of a service that already has baselines compares the catalog with them
  (:func:`diff_recorded`: a skill added before it is ``skill.added``), not with nothing.
- A skill removed and one added with the same description and body in one change is a rename
  (:func:`find_renames`): one ``skill.renamed`` event (the re-baselining carries the baseline history).
- Cases whose skill is gone from the catalog (:func:`gone_cases`) are left out of the service's studies,
  with one alert per skill (``skill.gone``), instead of failing every study.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "BASELINE_CARRIED",
    "CORPUS_CHANGED",
    "MODEL_SNAPSHOT_CHANGED",
    "PIN_EVENTS",
    "RUBRIC_CHANGED",
    "RUNTIME_VERSION_CHANGED",
    "SKILL_ADDED",
    "SKILL_CHANGED",
    "SKILL_GONE",
    "SKILL_REMOVED",
    "SKILL_RENAMED",
    "CatalogDiff",
    "ModelChange",
    "WatchEvent",
    "body_digest",
    "diff_catalog",
    "diff_model",
    "diff_recorded",
    "events_for",
    "find_renames",
    "gone_cases",
    "pin_events",
    "pin_snapshot",
]

SKILL_ADDED = "skillreach.skill.added"
SKILL_CHANGED = "skillreach.skill.changed"
SKILL_REMOVED = "skillreach.skill.removed"
SKILL_RENAMED = "skillreach.skill.renamed"
SKILL_GONE = "skillreach.skill.gone"
"""The alert of a skill gone from the catalog while cases of the query set still expect it."""
BASELINE_CARRIED = "skillreach.baseline.carried"
"""The notice of a rename whose baseline history the re-baselining carried to the new name."""
MODEL_SNAPSHOT_CHANGED = "skillreach.model.snapshot.changed"
CORPUS_CHANGED = "skillreach.corpus.changed"
RUBRIC_CHANGED = "skillreach.rubric.changed"
RUNTIME_VERSION_CHANGED = "skillreach.runtime.version.changed"

PIN_EVENTS = {"corpus": CORPUS_CHANGED, "rubric": RUBRIC_CHANGED, "runtime": RUNTIME_VERSION_CHANGED}
"""The pins of a baseline besides the model (the snapshot has its own event), by the key prefix under
which :func:`pin_snapshot` keeps them."""


@dataclass(frozen=True)
class CatalogDiff:
    added: dict[str, str] = field(default_factory=dict)
    """name → new content digest"""
    changed: dict[str, tuple[str, str]] = field(default_factory=dict)
    """name → (old digest, new digest)"""
    removed: dict[str, str] = field(default_factory=dict)
    """name → last known digest"""
    first: bool = False
    """No earlier snapshot: nothing to compare with (no events; this snapshot becomes the reference)."""
    renamed: dict[str, str] = field(default_factory=dict)
    """new name → old name: removed and added in one change with the same description and body."""
    from_baselines: bool = False
    """No earlier snapshot, but recorded baselines: the catalog was compared with them."""

    @property
    def empty(self) -> bool:
        return not (self.added or self.changed or self.removed or self.renamed)


@dataclass(frozen=True)
class ModelChange:
    runtime: str
    alias: str
    previous: str
    current: str


@dataclass(frozen=True)
class WatchEvent:
    event: str
    resource: dict[str, str]
    payload: dict[str, Any]


def diff_catalog(previous: Mapping[str, str] | None, current: Mapping[str, str]) -> CatalogDiff:
    """Compare two snapshots (skill name → content digest)."""
    if previous is None:
        return CatalogDiff(first=True)
    return CatalogDiff(
        added={k: current[k] for k in sorted(current.keys() - previous.keys())},
        changed={
            k: (previous[k], current[k])
            for k in sorted(current.keys() & previous.keys())
            if previous[k] != current[k]
        },
        removed={k: previous[k] for k in sorted(previous.keys() - current.keys())},
    )


def diff_recorded(recorded: Mapping[str, str], current: Mapping[str, str]) -> CatalogDiff:
    """The first watch of a service with baselines: the catalog (skill → its version now, as a record
    pins it) against the recorded baselines (skill → the version its record pins). A skill without a
    record is added (unless no skill has one: then there is nothing to compare with, ``first``)."""
    if not recorded:
        return CatalogDiff(first=True)
    return CatalogDiff(
        added={k: current[k] for k in sorted(current.keys() - recorded.keys())},
        changed={k: (recorded[k], current[k]) for k in sorted(current.keys() & recorded.keys())
                 if recorded[k] != current[k]},
        removed={k: recorded[k] for k in sorted(recorded.keys() - current.keys())},
        from_baselines=True,
    )


def body_digest(description: str, body: str) -> str:
    """``sha256:<hex>`` of what a rename keeps: the description and the body (not the name)."""
    import hashlib
    import json

    payload = json.dumps({"description": description, "body": body}, sort_keys=True, separators=(",", ":"),
                         ensure_ascii=False)
    return "sha256:" + hashlib.sha256(payload.encode("utf-8")).hexdigest()


def find_renames(diff: CatalogDiff, before: Mapping[str, str], now: Mapping[str, str]) -> CatalogDiff:
    """``diff`` with each removed skill whose description and body (:func:`body_digest`: ``before`` for
    the old names, ``now`` for the new) are those of exactly one added skill, and no other's, turned into
    a rename (new → old)."""
    if not diff.added or not diff.removed:
        return diff
    gone: dict[str, list[str]] = {}
    for old in diff.removed:
        if old in before:
            gone.setdefault(before[old], []).append(old)
    came: dict[str, list[str]] = {}
    for new in diff.added:
        if new in now:
            came.setdefault(now[new], []).append(new)
    renamed = {came[d][0]: olds[0] for d, olds in gone.items()
               if len(olds) == 1 and len(came.get(d, [])) == 1}
    if not renamed:
        return diff
    return CatalogDiff(
        added={k: v for k, v in diff.added.items() if k not in renamed},
        changed=dict(diff.changed),
        removed={k: v for k, v in diff.removed.items() if k not in renamed.values()},
        first=diff.first, renamed=renamed, from_baselines=diff.from_baselines,
    )


def gone_cases(
    cases: Iterable[tuple[str, str | None, Iterable[str]]], names: Iterable[str]
) -> dict[str, list[str]]:
    """Skill → the ids of the cases (``(id, expected skill, acceptable skills)``) that name it although it
    is not in the catalog (``names``)."""
    resident = set(names)
    out: dict[str, list[str]] = {}
    for qid, expected, acceptable in cases:
        for skill in ([expected] if expected else []) + list(acceptable):
            if skill not in resident and qid not in out.setdefault(skill, []):
                out[skill].append(qid)
    return dict(sorted(out.items()))


def diff_model(runtime: str, alias: str, previous: str | None, current: str | None) -> ModelChange | None:
    """A change when both snapshots are known and differ (the first sighting is not a change)."""
    if previous is None or current is None or previous == current:
        return None
    return ModelChange(runtime, alias, previous, current)


def pin_snapshot(
    corpus_digest: str, rubrics: Mapping[str, str | None], runtime: str, runtime_version: str | None
) -> dict[str, str]:
    """What a baseline is pinned to besides the skills and the model, as one snapshot (key → value):
    ``corpus`` → the query set's digest, ``rubric:<skill>`` → its rubric version, ``runtime:<name>`` → the
    runtime's version (when known)."""
    snap = {"corpus": corpus_digest}
    snap.update({f"rubric:{skill}": v for skill, v in rubrics.items() if v})
    if runtime_version:
        snap[f"runtime:{runtime}"] = runtime_version
    return snap


def pin_events(source: str, diff: CatalogDiff, *, grown_for: str | None = None) -> list[WatchEvent]:
    """One event per changed pin of a :func:`pin_snapshot` diff (a new or dropped rubric is a change
    too); the first snapshot is no change. ``grown_for``: the query set changed because the service
    grew it for that skill (its records were made from the grown set): neither the corpus change nor
    that skill's rubric is an event."""
    events: list[WatchEvent] = []
    if diff.first:
        return events
    changes = {k: (old, new) for k, (old, new) in diff.changed.items()}
    changes.update({k: ("", new) for k, new in diff.added.items()})
    changes.update({k: (old, "") for k, old in diff.removed.items()})
    if grown_for is not None:
        changes.pop("corpus", None)
        changes.pop(f"rubric:{grown_for}", None)
    for key, (old, new) in sorted(changes.items()):
        kind, _, name = key.partition(":")
        event = PIN_EVENTS.get(kind)
        if event is None:
            continue
        rid = f"skillreach.{kind}.{name or 'queries'}"
        payload: dict[str, Any] = {"source": source, "previous": old or None, "current": new or None}
        if kind == "rubric":
            payload["skill"] = name
        if kind == "runtime":
            payload["runtime"] = name
        events.append(WatchEvent(event, {"prefect.resource.id": rid, "prefect.resource.name": name or kind,
                                         "skillreach.source": source}, payload))
    return events


def events_for(
    source: str, diff: CatalogDiff, model_changes: list[ModelChange] | tuple[ModelChange, ...] = ()
) -> list[WatchEvent]:
    """The events to emit, one per skill added/changed/removed and one per model snapshot change."""
    events: list[WatchEvent] = []

    def skill_event(name: str, event: str, **payload: Any) -> WatchEvent:
        return WatchEvent(
            event,
            {"prefect.resource.id": f"skillreach.skill.{name}", "prefect.resource.name": name,
             "skillreach.source": source},
            {"skill": name, "source": source, **payload},
        )

    for name, digest in diff.added.items():
        events.append(skill_event(name, SKILL_ADDED, digest=digest))
    for name, (old, new) in diff.changed.items():
        events.append(skill_event(name, SKILL_CHANGED, previous_digest=old, digest=new))
    for name, digest in diff.removed.items():
        events.append(skill_event(name, SKILL_REMOVED, previous_digest=digest))
    for new, old in diff.renamed.items():
        events.append(skill_event(new, SKILL_RENAMED, previous=old))
    for ch in model_changes:
        events.append(
            WatchEvent(
                MODEL_SNAPSHOT_CHANGED,
                {"prefect.resource.id": f"skillreach.model.{ch.alias}", "prefect.resource.name": ch.alias,
                 "skillreach.runtime": ch.runtime},
                {"runtime": ch.runtime, "alias": ch.alias, "previous": ch.previous, "current": ch.current},
            )
        )
    return events
