"""The small world most flow tests share: three skills, 13 labelled queries, fake-runtime scripts, a
home for the store; and how a test runs a flow in-process."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prefect.logging import disable_run_logger

from skillreach.store.database import Store
from skillreach.study import StudyConfig

__all__ = ["SKILLS", "cfg", "make_queries", "make_skills", "run", "script", "store_of", "world"]

SKILLS = {
    "alpha": "Convert spreadsheets and CSV tables into charts. Use when the user wants a chart from data.",
    "beta": "Write and fix Dockerfiles and container images. Use for docker build problems.",
    "gamma": "Translate text between human languages. Use when the user asks for a translation.",
}


def make_skills(root: Path, names: dict[str, str] = SKILLS) -> Path:
    for name, desc in names.items():
        d = root / name
        d.mkdir(parents=True, exist_ok=True)
        (d / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {desc}\n---\n# {name}\n\nSteps.\n")
    return root


def make_queries(path: Path) -> Path:
    queries = []
    for name in SKILLS:
        for i in range(4):
            queries.append({"id": f"{name}-{i}", "text": f"please help with {name} task {i}",
                            "expected_skill": name, "kind": "implicit"})
    queries.append({"id": "oos-0", "text": "what's the weather", "expected_skill": None,
                    "kind": "out_of_scope"})
    path.write_text(json.dumps({"catalog_id": "all", "queries": queries}), encoding="utf-8")
    return path


def script(path: Path, *, broken: str | None = None) -> Path:
    """A fake runtime that activates the expected skill, except for ``broken``'s queries."""
    entries: dict[str, Any] = {"*": [], **{f"canary-{i}": list(SKILLS) for i in (1, 2, 3)}}
    for name in SKILLS:
        for i in range(4):
            entries[f"{name}-{i}"] = [] if name == broken else [name]
    path.write_text(json.dumps(entries), encoding="utf-8")
    return path


def cfg(world: dict[str, Path], out: str, runtime_script: str = "good", **kw: Any) -> StudyConfig:
    """Resolved as the CLI resolves it (flags > environment > defaults)."""
    kw.setdefault("attempts", 2)
    return StudyConfig.build(None, skills=(world["skills"],), queries=world["queries"], runtime="fake",
                             runtime_options={"script": str(world[runtime_script])}, out=world["root"] / out,
                             home=world["home"], **kw)


def run(flow: Any, *args: Any, **kwargs: Any) -> Any:
    with disable_run_logger():
        return asyncio.run(flow.fn(*args, **kwargs))


def store_of(world: dict[str, Path]) -> Store:
    return Store(f"sqlite:///{world['home'] / 'skillreach.db'}")


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    return {
        "skills": make_skills(tmp_path / "skills"),
        "queries": make_queries(tmp_path / "queries.json"),
        "good": script(tmp_path / "good.json"),
        "bad": script(tmp_path / "bad.json", broken="alpha"),
        "home": tmp_path / "home",
        "root": tmp_path,
    }


@contextlib.contextmanager
def fake_charging(cost_usd: float = 1.0) -> Iterator[None]:
    """The fake runtime charging ``cost_usd`` a probe (cost-cap tests)."""
    from skillreach.runtimes.fake import FakeRuntime

    original = FakeRuntime.select

    async def priced(self: Any, query: Any, catalog: Any, tracker: Any) -> Any:
        outcome = await original(self, query, catalog, tracker)
        outcome.cost_usd = cost_usd
        return outcome

    mp = pytest.MonkeyPatch()
    mp.setattr(FakeRuntime, "select", priced)
    try:
        yield
    finally:
        mp.undo()
