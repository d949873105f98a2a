"""Communities of skills over the BM25 similarity graph: how to split a large catalog into subagent
scopes, each small enough to stay below the capacity knee.

The graph: one node per skill; an edge between two skills when either is among the other's ``top``
lexical rivals (:func:`skillreach.skills.bm25.rivals`, asymmetric BM25 of name + description), weighted by the
mean of the two directions' ratios to the self-score (a missing direction counts 0), kept when the
weight is at least ``min_ratio``.

The communities: networkx's Louvain modularity communities (``louvain_communities``, seeded). A
community larger than ``target_size`` is split again — Louvain on its subgraph at a doubled resolution,
or when that does not split it, networkx's Kernighan–Lin bisection — until every community fits. Then
small communities (under half the target) join the community they share the most weight with when the
union still fits; skills with no edge at all are packed, in name order, into ``misc`` scopes of at most
``target_size``. Deterministic for a seed and independent of the order skills are given.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Literal

import networkx as nx
from pydantic import BaseModel, ConfigDict

from skillreach.errors import InputError
from skillreach.models import Skill
from skillreach.skills.bm25 import rivals, skill_text, tokenize

__all__ = ["Clustering", "Community", "Leak", "cluster_skills", "similarity_graph"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Leak(_Frozen):
    """The strongest edge from a community to another one: where routing across scopes may still blur."""

    skill: str
    other: str
    other_community: int
    weight: float


class Community(_Frozen):
    id: int
    kind: Literal["community", "misc"]
    skills: list[str]
    terms: list[str]
    """The words that set the community apart (tf-idf of its skills' names and descriptions)."""
    cohesion: float | None
    """Internal edge weight / all edge weight touching the community (``None`` without edges)."""
    leaks: list[Leak]

    @property
    def size(self) -> int:
        return len(self.skills)


class Clustering(_Frozen):
    skills: int
    target_size: int
    seed: int
    resolution: float
    top: int
    min_ratio: float
    edges: int
    modularity: float
    communities: list[Community]

    def community_of(self) -> dict[str, int]:
        return {s: c.id for c in self.communities for s in c.skills}


def similarity_graph(skills: Sequence[Skill], *, top: int = 10, min_ratio: float = 0.05) -> nx.Graph:
    """The undirected BM25 similarity graph described in the module docstring."""
    ratio: dict[tuple[str, str], float] = {}
    for sr in rivals(skills, top=top):
        for r in sr.rivals:
            if r.ratio is not None and r.ratio > 0:
                ratio[(sr.name, r.name)] = r.ratio
    graph = nx.Graph()
    graph.add_nodes_from(sorted(s.name for s in skills))
    for a, b in sorted({tuple(sorted(pair)) for pair in ratio}):
        w = (ratio.get((a, b), 0.0) + ratio.get((b, a), 0.0)) / 2
        if w >= min_ratio:
            graph.add_edge(a, b, weight=round(w, 9))
    return graph


def _louvain(graph: nx.Graph, resolution: float, seed: int) -> list[set[str]]:
    parts = nx.community.louvain_communities(graph, weight="weight", resolution=resolution, seed=seed)
    return [set(p) for p in parts]


def _split(graph: nx.Graph, part: set[str], target: int, resolution: float, seed: int) -> list[set[str]]:
    """``part`` cut into communities of at most ``target`` skills."""
    if len(part) <= target:
        return [part]
    sub = graph.subgraph(sorted(part))
    pieces: list[set[str]] = []
    gamma = resolution
    for _ in range(6):
        gamma *= 2
        if sub.number_of_edges():
            pieces = [p for p in _louvain(sub, gamma, seed) if p]
        if len(pieces) > 1:
            break
    if len(pieces) <= 1:
        left, right = nx.community.kernighan_lin_bisection(sub, weight="weight", seed=seed)
        pieces = [set(left), set(right)]
    out: list[set[str]] = []
    for p in pieces:
        out.extend(_split(graph, p, target, resolution, seed))
    return out


def _link(graph: nx.Graph, a: set[str], b: set[str]) -> float:
    return sum(float(d["weight"]) for u, v, d in graph.edges(a, data=True) if (v in b) or (u in b))


def _merge_small(graph: nx.Graph, parts: list[set[str]], target: int) -> list[set[str]]:
    parts = sorted(parts, key=lambda p: (len(p), min(p)))
    changed = True
    while changed:
        changed = False
        for i, small in enumerate(parts):
            if len(small) * 2 >= target:
                continue
            best, best_w = -1, 0.0
            for j, other in enumerate(parts):
                if j == i or len(small) + len(other) > target:
                    continue
                w = _link(graph, small, other)
                if w > best_w or (w == best_w > 0 and best >= 0 and min(other) < min(parts[best])):
                    best, best_w = j, w
            if best >= 0:
                parts[best] = parts[best] | small
                del parts[i]
                parts.sort(key=lambda p: (len(p), min(p)))
                changed = True
                break
    return parts


def _terms(
    skills: dict[str, list[str]], members: Sequence[str], df: Counter[str], n: int, k: int = 4
) -> list[str]:
    tf: Counter[str] = Counter()
    for name in members:
        tf.update(set(skills[name]))
    scored = {t: c / len(members) * math.log(n / df[t]) for t, c in tf.items() if c > 1 or len(members) == 1}
    return [t for t, _ in sorted(scored.items(), key=lambda kv: (-kv[1], kv[0]))[:k]]


def cluster_skills(
    skills: Sequence[Skill],
    *,
    target_size: int = 20,
    seed: int = 0,
    resolution: float = 1.0,
    top: int = 10,
    min_ratio: float = 0.05,
    leaks: int = 3,
) -> Clustering:
    """Split ``skills`` into communities of at most ``target_size`` (see the module docstring)."""
    if target_size < 2:
        raise InputError(f"--target-size {target_size}: a community holds at least 2 skills")
    if resolution <= 0:
        raise InputError(f"--resolution {resolution}: must be > 0")
    if not skills:
        raise InputError("no skills to cluster; pass a folder of SKILL.md files")
    ordered = sorted(skills, key=lambda s: s.name)
    graph = similarity_graph(ordered, top=top, min_ratio=min_ratio)
    linked = graph.subgraph([n for n in graph if graph.degree(n) > 0])
    parts: list[set[str]] = []
    if linked.number_of_nodes():
        for p in _louvain(linked, resolution, seed):
            parts.extend(_split(graph, p, target_size, resolution, seed))
        parts = _merge_small(graph, parts, target_size)
    alone = sorted(n for n in graph if graph.degree(n) == 0)
    misc = [set(alone[i : i + target_size]) for i in range(0, len(alone), target_size)]
    ordered_parts = sorted(parts, key=lambda p: (-len(p), min(p))) + misc
    tokens = {s.name: tokenize(skill_text(s)) for s in ordered}
    df: Counter[str] = Counter()
    for toks in tokens.values():
        df.update(set(toks))
    index = {name: i for i, p in enumerate(ordered_parts) for name in p}
    communities: list[Community] = []
    for i, part in enumerate(ordered_parts):
        members = sorted(part)
        inside = sum(
            float(d["weight"]) for u, v, d in graph.edges(members, data=True) if u in part and v in part
        )
        touching = sum(float(d["weight"]) for _, _, d in graph.edges(members, data=True))
        cross = sorted(
            (
                (float(d["weight"]), u if u in part else v, v if u in part else u)
                for u, v, d in graph.edges(members, data=True)
                if (u in part) != (v in part)
            ),
            key=lambda x: (-x[0], x[1], x[2]),
        )
        communities.append(
            Community(
                id=i + 1,
                kind="misc" if i >= len(parts) else "community",
                skills=members,
                terms=_terms(tokens, members, df, len(ordered)),
                cohesion=None if touching == 0 else round(inside / touching, 6),
                leaks=[
                    Leak(skill=s, other=o, other_community=index[o] + 1, weight=round(w, 6))
                    for w, s, o in cross[:leaks]
                ],
            )
        )
    modularity = (
        nx.community.modularity(graph, ordered_parts, weight="weight") if graph.number_of_edges() else 0.0
    )
    return Clustering(
        skills=len(ordered),
        target_size=target_size,
        seed=seed,
        resolution=resolution,
        top=top,
        min_ratio=min_ratio,
        edges=graph.number_of_edges(),
        modularity=round(float(modularity), 6),
        communities=communities,
    )
