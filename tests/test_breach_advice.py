"""A breach's next step names the SKILL.md files that changed since the baseline's revision among the
skill that lost its cases and the skills that took them — read from git, never a guess (issue 39,
problem 7: "else fix …/incident-triage/SKILL.md" when the edit was oncall-handoff's)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.gitworld import BRANCH, git, git_world
from tests.helpers.world import SKILLS, cfg, make_skills, run, store_of


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    world = git_world(tmp_path)
    from skillreach.flows.service import rebaseline_all

    run(rebaseline_all, cfg(world, "r0"), reason="manual")  # the bar, recorded on the service branch
    assert "revision: " in git(tmp_path, "log", "-1", "--format=%B", BRANCH)  # the commit it measured
    return world


def _alpha_goes_to(world: dict[str, Path], taker: list[str]) -> None:
    """The agent now answers alpha's four cases with ``taker`` (nothing: no skill at all)."""
    data = json.loads(world["good"].read_text())
    data.update({f"alpha-{i}": taker for i in range(4)})
    world["good"].write_text(json.dumps(data))


def _edit(world: dict[str, Path], name: str) -> None:
    make_skills(world["skills"], {name: SKILLS[name] + " Also handles the odd request."})
    git(world["root"], "commit", "-q", "-am", f"edit {name}")


def _next_step(world: dict[str, Path]) -> str:
    from skillreach.flows.service import nightly_compliance

    night = run(nightly_compliance, cfg(world, "n1"))
    assert night["statuses"]["alpha"] == "breach", night["statuses"]
    with store_of(world) as store:
        [alert] = [a for a in store.alerts() if a.event == "skillreach.gate.breached" and a.skill == "alpha"
                   and a.metric == "activation"]
    step: Any = alert.payload["next_step"]
    return str(step)


def test_the_edited_thief_is_named(repo: dict[str, Path]) -> None:
    _edit(repo, "beta")
    _alpha_goes_to(repo, ["beta"])
    step = _next_step(repo)
    beta = repo["skills"] / "beta" / "SKILL.md"
    assert step.startswith(f"skillreach baseline accept alpha if this is intended, else fix {beta} "
                           "(changed since the baseline's revision "), step
    assert "alpha/SKILL.md" not in step


def test_an_edit_elsewhere_is_never_blamed_on_the_victim(repo: dict[str, Path]) -> None:
    """The problem's case: beta was edited, alpha's cases now go to no skill. The old advice fixed alpha's
    file (the victim's own, a guess); the step says what git says instead."""
    _edit(repo, "beta")
    _alpha_goes_to(repo, [])
    step = _next_step(repo)
    assert "else fix" not in step, step
    assert "no SKILL.md of alpha changed since the baseline's revision " in step
    assert f"changed since then: {repo['skills'] / 'beta' / 'SKILL.md'}" in step


def test_the_edited_victim_is_named_not_the_unchanged_taker(repo: dict[str, Path]) -> None:
    _edit(repo, "alpha")
    _alpha_goes_to(repo, ["gamma"])
    step = _next_step(repo)
    assert f"else fix {repo['skills'] / 'alpha' / 'SKILL.md'} (changed since" in step, step
    assert "gamma/SKILL.md" not in step


def test_nothing_changed_names_no_file(repo: dict[str, Path]) -> None:
    _alpha_goes_to(repo, ["gamma"])  # the model moved, say: no SKILL.md changed
    step = _next_step(repo)
    assert "else fix" not in step
    assert "(no SKILL.md of alpha, gamma changed since the baseline's revision " in step
