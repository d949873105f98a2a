"""``retriever``: BM25 top-k pre-selection of the catalog per query, then an inner runtime on it.

Models the "retrieve, then route" design of large skill libraries: only the ``k`` skills whose name and
description match the query best (:func:`skillreach.skills.bm25.rank`) are shown to the inner runtime. The
probe records ``retrieved`` (the names shown, best first), so a report can tell a retrieval miss (the
expected skill was never shown) from a routing miss; :func:`retrieval_missed` says which.
"""

from __future__ import annotations

from typing import Any, ClassVar

from skillreach.errors import ConfigError
from skillreach.models import Catalog, Query
from skillreach.skills.bm25 import rank
from skillreach.study.contract import Outcome, Runtime, RuntimeOptions, Tracker

__all__ = ["RetrieverRuntime", "retrieval_missed"]


def retrieval_missed(query: Query, retrieved: list[str] | tuple[str, ...] | None) -> bool:
    """True when the query has an expected skill and the retriever did not show it."""
    expected = query.expected_skill
    return retrieved is not None and expected is not None and expected not in retrieved


class RetrieverOptions(RuntimeOptions):
    """``runtime_options`` of the retriever runtime (``inner_options`` are checked by the inner one)."""

    inner: str = "keyword"
    k: int = 5
    inner_options: dict[str, Any] | None = None


class RetrieverRuntime:
    name: ClassVar[str] = "retriever"
    Options: ClassVar[type[RuntimeOptions]] = RetrieverOptions
    paid: ClassVar[bool] = False
    cached_listing: ClassVar[bool] = False
    batch_mode: ClassVar[bool] = False
    wants_all_probes: bool = False

    def __init__(
        self,
        inner: str | Runtime = "keyword",
        *,
        k: int = 5,
        inner_options: dict[str, Any] | None = None,
        model: str | None = None,
        settings: object | None = None,
    ) -> None:
        if k < 1:
            raise ConfigError(f"retriever: k must be at least 1 (got {k})")
        if isinstance(inner, str):
            if inner == self.name:
                raise ConfigError("retriever: the inner runtime cannot be the retriever itself")
            from skillreach.runtimes import get_runtime

            options = dict(inner_options or {})
            if model is not None:
                options.setdefault("model", model)
            inner = get_runtime(inner, **options)
        self.inner = inner
        self.k = k
        self.missed: list[str] = []
        """Ids of queries whose expected skill was not retrieved (this runtime's lifetime)."""

    def retrieve(self, query: Query, catalog: Catalog) -> Catalog:
        ranked = rank(query.text, catalog.skills)
        keep = {name for name, _ in ranked[: self.k]}
        order = [name for name, _ in ranked[: self.k]]
        skills = sorted((s for s in catalog.skills if s.name in keep), key=lambda s: order.index(s.name))
        return Catalog(
            id=f"{catalog.id}/bm25-top{self.k}",
            strategy=f"{catalog.strategy}+retriever",
            skills=tuple(skills),
            target=catalog.target,
        )

    async def select(self, query: Query, catalog: Catalog, tracker: Tracker) -> Outcome:
        sub = self.retrieve(query, catalog)
        retrieved = sub.names
        if retrieval_missed(query, retrieved):
            self.missed.append(query.id)
        outcome = await self.inner.select(query, sub, tracker)
        outcome.retrieved = retrieved
        return outcome

    async def resolve_model(self) -> str | None:
        resolve = getattr(self.inner, "resolve_model", None)
        return await resolve() if resolve is not None else None

    async def version(self) -> str | None:
        """The inner runtime's version (the retrieval is skillreach's own code)."""
        inner = getattr(self.inner, "version", None)
        return await inner() if inner is not None else None

    async def aclose(self) -> None:
        await self.inner.aclose()
