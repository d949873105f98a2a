"""One sealed query set across agents: the matrix of ``skillreach run --runtime a,b,…`` (one study per
agent, the same catalog and query set).

Per skill and agent: **activation** (the skill's recall on its own queries, with the artifact's clustered
interval) and **false activation** (the share of the other scored probes that routed to it, Wilson
interval). Per pair of agents, the skills whose routing differs significantly: :func:`diff_arms` between
the two studies, as ``skillreach diff`` does (Newcombe's paired interval of Δ recall, the paired bootstrap
of Δ precision; significant when the interval excludes 0). And each agent's collisions.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

from pydantic import BaseModel, ConfigDict

from skillreach.author.diff import Arm, Delta, diff_arms
from skillreach.scoring.intervals import wilson

__all__ = ["AgentCell", "AgentCollision", "AgentMatrix", "RoutingGap", "agent_matrix"]

Interval = tuple[float, float]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class AgentCell(_Frozen):
    activation: float | None
    activation_ci: Interval | None
    false_activation: float | None
    false_activation_ci: Interval | None
    support: int
    fp: int


class RoutingGap(_Frozen):
    """A skill routed significantly differently by agents ``a`` and ``b`` (B − A)."""

    skill: str
    a: str
    b: str
    recall: Delta
    precision: Delta


class AgentCollision(_Frozen):
    agent: str
    expected: str
    predicted: str
    count: int


class AgentMatrix(_Frozen):
    agents: list[str]
    versions: dict[str, str | None]
    skills: list[str]
    cells: dict[str, dict[str, AgentCell]]
    """skill → agent → cell."""
    gaps: list[RoutingGap]
    collisions: list[AgentCollision]
    warnings: list[str]


def _significant(d: Delta) -> bool:
    return d.ci95 is not None and (d.ci95[0] > 0 or d.ci95[1] < 0)


def agent_matrix(arms: Sequence[Arm], *, resamples: int = 2000, seed: int = 0, top: int = 5) -> AgentMatrix:
    """The matrix of ``arms`` (one study per agent, named after its runtime)."""
    skills = sorted({s for arm in arms for s in arm.artifact.catalog.skills})
    cells: dict[str, dict[str, AgentCell]] = {s: {} for s in skills}
    for arm in arms:
        art = arm.artifact
        scored = [o for o in art.outcomes if o.error is None]
        classes = {c.label: c for c in art.classes}
        for skill in skills:
            others = [o for o in scored if o.truth != skill]
            fp = sum(1 for o in others if o.predicted == skill)
            c = classes.get(skill)
            cells[skill][arm.name] = AgentCell(
                activation=c.recall if c is not None else None,
                activation_ci=c.recall_ci if c is not None else None,
                false_activation=fp / len(others) if others else None,
                false_activation_ci=wilson(fp, len(others)) if others else None,
                support=c.support if c is not None else 0,
                fp=fp,
            )
    gaps: list[RoutingGap] = []
    warnings: list[str] = []
    for a, b in combinations(arms, 2):
        if a.artifact.digest is not None and a.artifact.digest == b.artifact.digest:
            continue  # two agents that routed every probe alike (same artifact): no gap, nothing to diff
        result = diff_arms(a, b, vary="runtime", force=True, resamples=resamples, seed=seed)
        for s in result.skills:
            if _significant(s.recall) or _significant(s.precision):
                gaps.append(
                    RoutingGap(skill=s.skill, a=a.name, b=b.name, recall=s.recall, precision=s.precision)
                )
        if result.unpaired:
            warnings.append(f"{a.name} vs {b.name}: {len(result.unpaired)} queries unpaired (errors)")
    collisions = [
        AgentCollision(agent=arm.name, expected=c.expected, predicted=c.predicted, count=c.count)
        for arm in arms
        for c in arm.artifact.collisions[:top]
    ]
    return AgentMatrix(
        agents=[a.name for a in arms],
        versions={a.name: a.runtime_version for a in arms},
        skills=skills,
        cells=cells,
        gaps=gaps,
        collisions=collisions,
        warnings=warnings,
    )
