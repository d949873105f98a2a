"""``keyword``: a literal mention of a skill name wins, else the BM25 best match, else no skill.

A name counts as mentioned when it appears in the query as a whole word (case-insensitive; ``-`` and
``_`` in the name also match a space). When several names are mentioned the longest wins (``pdf-forms``
over ``pdf``), then the earliest. Otherwise the best BM25 match of the query against each resident
skill's name and description (:func:`skillreach.skills.bm25.rank`) is invoked if its score is positive.
Deterministic, offline, free: the baseline every real agent should beat.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import ClassVar

from skillreach.models import Catalog, Query
from skillreach.runtimes._version import own_version
from skillreach.skills.bm25 import rank
from skillreach.study.contract import Outcome, RuntimeOptions, Tracker

__all__ = ["KeywordRuntime", "mentioned_skill"]


def _name_pattern(name: str) -> re.Pattern[str]:
    parts = [re.escape(p) for p in re.split(r"[-_\s]+", name) if p]
    return re.compile(r"(?<![\w-])" + r"[-_\s]+".join(parts) + r"(?![\w-])", re.IGNORECASE)


@lru_cache(maxsize=8)
def _name_patterns(names: tuple[str, ...]) -> tuple[tuple[str, re.Pattern[str]], ...]:
    """Every name's pattern, compiled once per catalog (``re``'s own cache holds 512: a catalog of
    5,000 skills compiled every pattern again for every query, ~1.3 s a probe)."""
    return tuple((name, _name_pattern(name)) for name in names)


def mentioned_skill(text: str, names: list[str] | tuple[str, ...]) -> str | None:
    """The skill the text names outright, if any (longest name, then earliest mention)."""
    best: tuple[int, int, str] | None = None
    for name, pattern in _name_patterns(tuple(names)):
        m = pattern.search(text)
        if m is None:
            continue
        key = (-len(name), m.start(), name)
        if best is None or key < best:
            best = key
    return best[2] if best else None


class KeywordOptions(RuntimeOptions):
    """The keyword runtime takes no options."""


class KeywordRuntime:
    name: ClassVar[str] = "keyword"
    Options: ClassVar[type[RuntimeOptions]] = KeywordOptions
    paid: ClassVar[bool] = False
    cached_listing: ClassVar[bool] = False
    batch_mode: ClassVar[bool] = False
    wants_all_probes: bool = False

    def __init__(self, *, model: str | None = None, settings: object | None = None) -> None:
        self.model = model

    async def version(self) -> str | None:
        """This runtime is skillreach's own code: skillreach's version."""
        return own_version()

    def choose(self, query: Query, catalog: Catalog) -> str | None:
        named = mentioned_skill(query.text, catalog.names)
        if named is not None:
            return named
        ranked = rank(query.text, catalog.skills)
        if ranked and ranked[0][1] > 0:
            return ranked[0][0]
        return None

    async def select(self, query: Query, catalog: Catalog, tracker: Tracker) -> Outcome:
        choice = self.choose(query, catalog)
        if choice is not None:
            tracker.invoke(choice)
        return Outcome.from_tracker(tracker, turns=1 if choice else 0, cost_usd=0.0)

    async def aclose(self) -> None:
        return None
