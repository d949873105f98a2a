"""Helpers the runtime tests share: skill folders on disk, queries, one probe, the stand-in CLIs' knobs."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from skillreach.models import Catalog, Query, QueryKind, Skill
from skillreach.study.contract import Outcome, ProbeOptions, Runtime, Tracker

__all__ = ["THREE_SKILLS", "assert_ended_live", "folder_catalog", "probe", "query", "stub_knobs"]

THREE_SKILLS = (("pdf", "Fill PDF forms."), ("rollback", "Roll back a deploy."), ("secrets", "Rotate keys."))


def folder_catalog(
    root: Path,
    skills: Sequence[tuple[str, str]] = THREE_SKILLS,
    *,
    body: Callable[[str], str] = lambda name: f"{name.upper()} BODY",
    references: bool = False,
    with_path: bool = False,
) -> Catalog:
    """A catalog whose skills are real folders under ``root/src/<name>/`` (``references/notes.md`` too
    with ``references=True``; ``Skill.path`` set with ``with_path=True``)."""
    out = []
    for name, description in skills:
        folder = root / "src" / name
        folder.mkdir(parents=True)
        text = body(name)
        end = "" if text.endswith("\n") else "\n"
        (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\n\n{text}{end}")
        if references:
            (folder / "references").mkdir()
            (folder / "references" / "notes.md").write_text("more")
        out.append(
            Skill(
                name=name,
                description=description,
                body=text,
                folder=str(folder),
                path=str(folder / "SKILL.md") if with_path else "",
            )
        )
    return Catalog(id="t", skills=tuple(out))


def query(text: str, expected: str | None, acceptable: tuple[str, ...] = (), **kw: Any) -> Query:
    """Query ``q1``: implicit when it has an expected skill, else out of scope."""
    kind = QueryKind.implicit if expected else QueryKind.out_of_scope
    return Query(id="q1", text=text, expected_skill=expected, acceptable_skills=acceptable, kind=kind, **kw)


async def probe(rt: Runtime, catalog: Catalog, q: Query, **opts: Any) -> tuple[Outcome, Tracker]:
    """One probe of ``q`` with ``ProbeOptions(**opts)``; the outcome and the tracker."""
    tracker = Tracker.for_query(q, ProbeOptions(**opts))
    return await rt.select(q, catalog, tracker), tracker


def stub_knobs(tmp_path: Path, prefix: str, catalog: Catalog) -> dict[str, Any]:
    """The knobs of a stand-in CLI (``<PREFIX>_STUB_PLAN``, ``<PREFIX>_STUB_LOG``), passed through the
    runtime's ``env=`` (a runtime passes only what it chooses to its agent process): ``plan(mapping)``
    writes the script, ``log`` is the stand-in's log folder, ``env`` the variables, ``catalog`` the skills."""
    plan_file = tmp_path / "plan.json"
    log = tmp_path / "log"

    def plan(mapping: dict[str, list[Any]]) -> None:
        plan_file.write_text(json.dumps(mapping))

    env = {f"{prefix}_STUB_PLAN": str(plan_file), f"{prefix}_STUB_LOG": str(log)}
    return {"plan": plan, "log": log, "env": env, "catalog": catalog}


def assert_ended_live(log: Path) -> None:
    """The stand-in CLI was stopped mid-run (live early exit): it never finished and its process is gone."""
    assert not (log / "finished").exists()
    pid = int((log / "pid").read_text())
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return
    raise AssertionError(f"the agent process {pid} is still running")
