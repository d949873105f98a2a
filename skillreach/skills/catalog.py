"""Catalog assembly: which skills are resident for a probe.

Strategies:

- ``full`` — every skill given (id ``full``).
- ``singleton`` — the target alone (id ``singleton:<target>``): activation with no competition.
- ``neighborhood`` — the target, its ``k`` nearest rivals by asymmetric BM25 overlap (the target's name
  + description as the query; only rivals with a positive score), then a filler drawn at random with
  ``random.Random(seed)`` from the remaining skills (taken in name order, so the draw does not depend
  on the order skills were discovered) until the catalog holds ``size`` skills (or every skill).
  Id ``neighborhood:<target>:k<k>:n<size>:s<seed>``. Deterministic for a seed.

Resident skills keep the order in which they were given. ``Catalog.digest`` covers names, descriptions
and bodies, so any edit of a resident skill changes it.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence

from skillreach.errors import InputError
from skillreach.models import Catalog, Skill
from skillreach.skills.bm25 import SkillRivals, rivals

__all__ = ["STRATEGIES", "build_catalog", "catalog_id", "catalogs_for"]

STRATEGIES = ("full", "singleton", "neighborhood")


def catalog_id(
    strategy: str, target: str | None = None, *, k: int = 10, size: int = 20, seed: int = 0
) -> str:
    if strategy == "full":
        return "full"
    if strategy == "singleton":
        return f"singleton:{target}"
    return f"neighborhood:{target}:k{k}:n{size}:s{seed}"


def _check(skills: Sequence[Skill], strategy: str, target: str | None, k: int, size: int) -> None:
    if strategy not in STRATEGIES:
        raise InputError(f"--catalog: unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
    if not skills:
        raise InputError("no skills to build a catalog from; pass --skills DIR")
    if strategy == "full":
        return
    if target is None:
        raise InputError(f"--catalog {strategy} needs --target NAME (the skill under test)")
    if target not in {s.name for s in skills}:
        known = sorted(s.name for s in skills)
        shown = ", ".join(known[:12]) + (", …" if len(known) > 12 else "")
        raise InputError(f"--target: no skill named {target!r} among the {len(known)} found ({shown})")
    if strategy == "neighborhood":
        if k < 0:
            raise InputError(f"--neighborhood-k must be ≥ 0, not {k}")
        if size < 1:
            raise InputError(f"--neighborhood-size must be ≥ 1, not {size}")
        if size < k + 1:
            raise InputError(
                f"--neighborhood-size {size} cannot hold the target and its {k} rivals; "
                f"raise it to at least {k + 1} or lower --neighborhood-k"
            )


def _neighborhood(
    skills: Sequence[Skill], target: str, *, k: int, size: int, seed: int, target_rivals: SkillRivals
) -> Catalog:
    chosen = {target} | {r.name for r in target_rivals.rivals[:k]}
    rest = sorted(s.name for s in skills if s.name not in chosen)
    fill = min(size - len(chosen), len(rest))
    chosen |= set(random.Random(seed).sample(rest, fill)) if fill > 0 else set()
    return Catalog(
        id=catalog_id("neighborhood", target, k=k, size=size, seed=seed),
        strategy="neighborhood",
        skills=tuple(s for s in skills if s.name in chosen),
        target=target,
    )


def _unique(skills: Iterable[Skill]) -> list[Skill]:
    out: list[Skill] = []
    seen: set[str] = set()
    for s in skills:
        if s.name in seen:
            raise InputError(
                f"two skills are named {s.name!r} ({s.path or '?'}); a catalog holds each name once — "
                "rename one, or load them through discovery, which keeps the first"
            )
        seen.add(s.name)
        out.append(s)
    return out


def build_catalog(
    skills: Sequence[Skill],
    strategy: str = "full",
    *,
    target: str | None = None,
    k: int = 10,
    size: int = 20,
    seed: int = 0,
) -> Catalog:
    """The catalog for one strategy (see the module docstring). Bad options raise :class:`InputError`."""
    skill_list = _unique(skills)
    _check(skill_list, strategy, target, k, size)
    if strategy == "full":
        return Catalog(id="full", strategy="full", skills=tuple(skill_list), target=target)
    assert target is not None
    if strategy == "singleton":
        return Catalog(
            id=catalog_id("singleton", target),
            strategy="singleton",
            skills=tuple(s for s in skill_list if s.name == target),
            target=target,
        )
    target_rivals = _rivals_of(skill_list, [target], k)[target]
    return _neighborhood(skill_list, target, k=k, size=size, seed=seed, target_rivals=target_rivals)


def _rivals_of(skills: Sequence[Skill], targets: Sequence[str], k: int) -> dict[str, SkillRivals]:
    wanted = set(targets)
    return {r.name: r for r in rivals(skills, top=k, only=wanted)}


def catalogs_for(
    skills: Sequence[Skill],
    strategy: str,
    targets: Sequence[str] | None = None,
    *,
    k: int = 10,
    size: int = 20,
    seed: int = 0,
) -> list[Catalog]:
    """One catalog per target (``targets=None``: every skill), or the single ``full`` catalog.

    For ``neighborhood`` the overlap is computed once for all targets.
    """
    skill_list = _unique(skills)
    if strategy == "full":
        _check(skill_list, strategy, None, k, size)
        return [Catalog(id="full", strategy="full", skills=tuple(skill_list))]
    names = list(targets) if targets is not None else [s.name for s in skill_list]
    if not names:
        raise InputError(f"--catalog {strategy} needs at least one --target NAME")
    for name in names:
        _check(skill_list, strategy, name, k, size)
    if strategy == "singleton":
        return [build_catalog(skill_list, "singleton", target=name) for name in names]
    by_name = _rivals_of(skill_list, names, k)
    return [
        _neighborhood(skill_list, name, k=k, size=size, seed=seed, target_rivals=by_name[name])
        for name in names
    ]
