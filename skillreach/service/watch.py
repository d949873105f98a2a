"""What changed under the baselines: the catalog since its last snapshot, the model alias's snapshot.

Pure: the ``watch`` flow reads the snapshots from the store, calls :func:`diff_catalog` and
:func:`diff_model`, and emits the events :func:`events_for` describes. The resource ids are what the
``rebaseline-all`` deployment's triggers match (``skillreach.skill.*``, ``skillreach.model.*``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "CORPUS_CHANGED",
    "MODEL_SNAPSHOT_CHANGED",
    "PIN_EVENTS",
    "RUBRIC_CHANGED",
    "RUNTIME_VERSION_CHANGED",
    "SKILL_ADDED",
    "SKILL_CHANGED",
    "SKILL_REMOVED",
    "CatalogDiff",
    "ModelChange",
    "WatchEvent",
    "diff_catalog",
    "diff_model",
    "events_for",
    "pin_events",
    "pin_snapshot",
]

SKILL_ADDED = "skillreach.skill.added"
SKILL_CHANGED = "skillreach.skill.changed"
SKILL_REMOVED = "skillreach.skill.removed"
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

    @property
    def empty(self) -> bool:
        return not (self.added or self.changed or self.removed)


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
