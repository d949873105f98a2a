"""What every report shows, computed once from an artifact (no formatting of markup here)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from skillreach.artifacts import RUN_METRICS, Artifact, ClassStats
from skillreach.models import NO_SKILL
from skillreach.reports._format import METRIC_HELP, METRIC_TITLES, fmt_rate

__all__ = ["ErrorGroup", "Headline", "class_rows", "error_groups", "headlines"]

HEADLINE_ORDER = (*RUN_METRICS, "macro_precision", "macro_recall", "macro_f1")


@dataclass(frozen=True)
class Headline:
    name: str
    title: str
    help: str
    value: float | None
    ci: tuple[float, float] | None
    n: int | None
    text: str
    is_rate: bool
    """A proportion in [0, 1] (redundancy is a count per probe)."""


def headlines(artifact: Artifact) -> list[Headline]:
    out = []
    for name in HEADLINE_ORDER:
        value = artifact.metric(name)
        ci = artifact.intervals.get(name)
        out.append(
            Headline(
                name=name,
                title=METRIC_TITLES[name],
                help=METRIC_HELP[name],
                value=value,
                ci=ci,
                n=artifact.denominators.get(name),
                text=fmt_rate(value, ci),
                is_rate=name != "redundancy",
            )
        )
    return out


def class_rows(artifact: Artifact) -> tuple[list[ClassStats], list[ClassStats]]:
    """(active classes worst-first by F1 with NO_SKILL last, inactive catalog skills by name)."""
    active = [c for c in artifact.classes if c.active and c.label != NO_SKILL]
    active.sort(key=lambda c: (c.f1 if c.f1 is not None else 2.0, c.recall or 0.0, c.label))
    none = [c for c in artifact.classes if c.label == NO_SKILL and c.active]
    inactive = [c for c in artifact.classes if not c.active and c.label != NO_SKILL]
    return [*active, *none], inactive


@dataclass
class ErrorGroup:
    message: str
    count: int = 0
    probes: list[str] = field(default_factory=list)


def error_groups(artifact: Artifact, samples: int = 5) -> list[ErrorGroup]:
    """Errored probes grouped by message, most frequent first, with a few ``query#attempt`` samples."""
    groups: dict[str, ErrorGroup] = defaultdict(lambda: ErrorGroup(""))
    for row in sorted(artifact.outcomes.errors):
        o = artifact.outcomes[row]
        assert o.error is not None
        g = groups[o.error]
        g.message = o.error
        g.count += 1
        if len(g.probes) < samples:
            g.probes.append(f"{o.query_id}#{o.attempt}")
    return sorted(groups.values(), key=lambda g: (-g.count, g.message))
