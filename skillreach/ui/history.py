"""A skill's history: its points (one per study that measured it) cut into segments at every change of a
pin — the model snapshot, the corpus version, the rubric version, the runtime or its version — and the
catalog's markers (each edit of the skill, each skill added to the catalog).

A line never runs across pins: two studies under different pins measure different things (the gate
refuses to compare them), so the chart starts a new segment, labelled with what changed. Returning to
an earlier set of pins starts a new segment too.

Pure: rows in, segments out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

__all__ = [
    "METRICS",
    "METRIC_TITLES",
    "HistoryPoint",
    "Marker",
    "Pins",
    "Segment",
    "markers_for",
    "point_of",
    "segments",
    "short_digest",
]

METRICS = ("activation", "false_activation", "compliance", "task_quality")
METRIC_TITLES = {
    "activation": "Activation",
    "false_activation": "False activation",
    "compliance": "Compliance",
    "task_quality": "Task quality",
}


def short_digest(value: str | None, n: int = 8) -> str:
    """``sha256:0123abcd…`` → ``0123abcd``; other values as they are (``none`` for ``None``)."""
    if not value:
        return "none"
    head, sep, tail = value.partition(":")
    return tail[:n] if sep and head in ("sha256", "git") else value


@dataclass(frozen=True)
class Pins:
    """What a point was measured under; two points compare only when these are equal."""

    model: str
    corpus: str
    rubric: str | None
    runtime: str
    runtime_version: str | None

    @property
    def runtime_text(self) -> str:
        return f"{self.runtime} {self.runtime_version}" if self.runtime_version else self.runtime

    def items(self) -> list[tuple[str, str]]:
        """(pin, shown value), in the order the page lists them."""
        return [("model", self.model), ("corpus", short_digest(self.corpus)),
                ("rubric", short_digest(self.rubric)), ("runtime", self.runtime_text)]

    def changes_from(self, before: Pins) -> list[str]:
        """What changed from ``before``, one phrase per pin (``model a → b``)."""
        now, then = dict(self.items()), dict(before.items())
        return [f"{k} {then[k]} → {now[k]}" for k, _ in self.items() if now[k] != then[k]]

    def short_changes_from(self, before: Pins) -> list[str]:
        """The same, naming only the new value (``model → b``): a chart's label."""
        now, then = dict(self.items()), dict(before.items())
        return [f"{k} → {now[k]}" for k, _ in self.items() if now[k] != then[k]]


@dataclass(frozen=True)
class HistoryPoint:
    """One study's measure of the skill."""

    at: datetime
    study_id: str
    kind: str
    pins: Pins
    metrics: Mapping[str, Any]
    """metric → ``{value, ci95, n, cases}`` or ``None``."""
    verdict: str | None = None
    baseline_id: str | None = None
    lost: tuple[Any, ...] = ()

    def value(self, metric: str) -> tuple[float | None, tuple[float, float] | None, int]:
        """(value, 95 % interval, probes) of ``metric`` (``None``: not measured by this study)."""
        m = self.metrics.get(metric)
        if not isinstance(m, Mapping) or m.get("value") is None:
            return None, None, 0
        ci = m.get("ci95")
        interval = (float(ci[0]), float(ci[1])) if isinstance(ci, list | tuple) and len(ci) == 2 else None
        return float(m["value"]), interval, int(m.get("n") or 0)


def point_of(row: Any) -> HistoryPoint:
    """A :class:`HistoryPoint` from a ``skill_points`` row."""
    return HistoryPoint(
        at=row.at, study_id=row.study_id, kind=row.kind,
        pins=Pins(model=row.model, corpus=row.corpus_version, rubric=row.rubric_version,
                  runtime=row.runtime, runtime_version=row.runtime_version),
        metrics=row.metrics or {}, verdict=row.verdict, baseline_id=row.baseline_id,
        lost=tuple(row.lost or ()),
    )


@dataclass(frozen=True)
class Segment:
    """Consecutive points under the same pins."""

    index: int
    pins: Pins
    points: tuple[HistoryPoint, ...]
    change: tuple[str, ...] = field(default_factory=tuple)
    """What changed at its start (empty for the first segment)."""

    @property
    def start(self) -> datetime:
        return self.points[0].at

    @property
    def end(self) -> datetime:
        return self.points[-1].at

    @property
    def label(self) -> str:
        return "; ".join(self.change) if self.change else "first measured"


def segments(points: Iterable[HistoryPoint]) -> list[Segment]:
    """``points`` (any order) cut at every pin change, oldest first."""
    ordered = sorted(points, key=lambda p: (p.at, p.study_id))
    out: list[Segment] = []
    run: list[HistoryPoint] = []
    change: list[str] = []
    for p in ordered:
        if run and p.pins != run[-1].pins:
            out.append(Segment(len(out) + 1, run[-1].pins, tuple(run), tuple(change)))
            change = p.pins.changes_from(run[-1].pins)
            run = []
        run.append(p)
    if run:
        out.append(Segment(len(out) + 1, run[-1].pins, tuple(run), tuple(change)))
    return out


@dataclass(frozen=True)
class Marker:
    """A change of the catalog drawn on the chart: this skill edited (or added, removed), another added."""

    at: datetime
    skill: str
    how: str
    commit: str | None = None

    @property
    def own(self) -> bool:
        return self.how != "neighbour added"

    @property
    def label(self) -> str:
        what = {"edited": "description or body edited", "added": "added to the catalog",
                "removed": "removed from the catalog", "neighbour added": "added to the catalog"}[self.how]
        sha = f" ({self.commit[:10]})" if self.commit else ""
        return f"{self.at:%Y-%m-%d %H:%M} {self.skill}: {what}{sha}"


def markers_for(skill: str, changes: Sequence[Any]) -> list[Marker]:
    """The markers of ``skill``'s chart from the catalog's history (``skillreach.live.catalog``): each of
    its own changes, and every other skill added."""
    out: list[Marker] = []
    for c in changes:
        if c.skill == skill:
            out.append(Marker(c.at, c.skill, c.how, c.commit))
        elif c.how == "added":
            out.append(Marker(c.at, c.skill, "neighbour added", c.commit))
    return sorted(out, key=lambda m: (m.at, m.skill))
