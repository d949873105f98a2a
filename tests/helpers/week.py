"""A week in the life of the service, as a scenario both the in-process test and the tracked (real
Prefect server) test play: see tests/test_service_week.py."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from skillreach.cli import main
from skillreach.flows.service import nightly_compliance, rebaseline_all, watch
from skillreach.service.watch import MODEL_SNAPSHOT_CHANGED, SKILL_ADDED
from tests.fakes.messages_api import MessagesAPI, Reply, ScriptResponder
from tests.helpers.webhooks import WebhookSink

__all__ = ["make_week", "play_week"]

ALIAS = "claude-week"
OLD, NEW = "claude-week-20260101", "claude-week-20270101"
SKILLS = {
    "alpha": "Convert spreadsheets and CSV tables into charts. Use when the user wants a chart from data.",
    "beta": "Write and fix Dockerfiles and container images. Use for docker build problems.",
    "gamma": "Translate text between human languages. Use when the user asks for a translation.",
}
THIEF = ("delta", "Build, fix and optimise Docker containers and images; use for any container problem.")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


def write_skill(root: Path, name: str, desc: str, body: str = "Steps.") -> None:
    (root / name).mkdir(parents=True, exist_ok=True)
    text = f"---\nname: {name}\ndescription: {desc}\n---\n# {name}\n\n{body}\n"
    (root / name / "SKILL.md").write_text(text)


class Agent:
    """The agent behind the stand-in: it reaches the skill a query is about — unless the thief is in the
    listing (it takes beta's queries), or the new snapshot is served (it misses gamma's)."""

    def __init__(self) -> None:
        self.api: MessagesAPI | None = None

    def __call__(self, body: dict[str, Any]) -> Reply:
        listing = json.dumps({"system": body.get("system"), "tools": body.get("tools")})
        new_model = self.api is not None and self.api.aliases[ALIAS] == NEW
        script: dict[str, list[Any]] = {f"the {n} skill": [n] for n in [*SKILLS, THIEF[0]]}
        for name in SKILLS:
            target = name
            if name == "beta" and THIEF[0] in listing:
                target = THIEF[0]
            if name == "gamma" and new_model:
                target = None  # type: ignore[assignment]
            script[f"help with {name} task"] = [target] if target else []
        return ScriptResponder(script)(body)


def skills_repo(repo: Path) -> Path:
    """A git repository of the three skills and their 13 queries (four each, one out of scope) at
    ``repo``, committed on ``main``; returns its skills folder."""
    skills = repo / "skills"
    for name, desc in SKILLS.items():
        write_skill(skills, name, desc)
    queries = [{"id": f"{n}-{i}", "text": f"please help with {n} task {i}", "expected_skill": n,
                "kind": "implicit"} for n in SKILLS for i in range(4)]
    queries.append({"id": "oos-0", "text": "what is the weather", "expected_skill": None,
                    "kind": "out_of_scope"})
    (repo / "evals").mkdir(parents=True)
    (repo / "evals" / "queries.json").write_text(json.dumps({"catalog_id": "all", "queries": queries}))
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "team@example.invalid")
    git(repo, "config", "user.name", "Team")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "skills and queries")
    return skills


class Stealing:
    """An agent behind the stand-in: each query reaches its skill, except beta's case 0 once delta is
    listed (one case of four: an undecided drop), and gamma's cases once delta's description says
    "multilingual" (all four: a breach)."""

    def __call__(self, body: dict[str, Any]) -> Reply:
        listing = json.dumps({"system": body.get("system"), "tools": body.get("tools")})
        script: dict[str, list[Any]] = {f"the {n} skill": [n] for n in [*SKILLS, THIEF[0]]}
        script.update({f"help with {n} task": [n] for n in SKILLS})
        if THIEF[0] in listing:
            script["help with beta task 0"] = [THIEF[0]]
        if "multilingual" in listing:
            script["help with gamma task"] = [THIEF[0]]
        return ScriptResponder(script)(body)


def make_week(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A git repository of three skills and their queries; the provider key the stand-in wants."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-a-secret")
    repo = tmp_path / "repo"
    return {"repo": repo, "skills": skills_repo(repo), "tmp": tmp_path}


def service_config(world: dict[str, Any], api: MessagesAPI, sink: WebhookSink, out: str) -> Path:
    path = world["tmp"] / f"{out}.toml"
    path.write_text(
        f'skills = ["{world["skills"]}"]\nqueries = "{world["repo"] / "evals" / "queries.json"}"\n'
        f'runtime = "anthropic"\nmodel = "{ALIAS}"\nattempts = 2\nconcurrency = 4\n'
        f'home = "{world["tmp"] / "home"}"\nout = "{world["tmp"] / "runs" / out}"\n'
        f'alert_webhooks = ["{sink.base_url}/services/T0/B0/SECRET"]\n'
        f'[runtime_options]\nbase_url = "{api.base_url}"\nmax_retries = 0\n'
        f'[prices."claude-week"]\ninput = 1.0\noutput = 5.0\ncache_write = 1.25\ncache_read = 0.1\n'
    )
    return path


def alerts(sink: WebhookSink) -> list[str]:
    texts = [r["body"]["text"] for r in sink.requests]
    sink.requests.clear()
    return texts


def branch_files(repo: Path, rev: str = "skillreach/baselines") -> list[str]:
    return sorted(git(repo, "show", "--name-only", "--format=", rev).splitlines())


def play_week(world: dict[str, Any], run: Callable[..., Any], capsys: pytest.CaptureFixture[str]) -> None:
    """The week (module doc); ``run(flow, **parameters)`` runs a flow in-process or as a tracked run."""
    repo = world["repo"]
    agent = Agent()
    with MessagesAPI(agent, aliases={ALIAS: OLD}) as api, WebhookSink() as sink:
        agent.api = api
        # ---- day 0: the first watch takes its snapshots; the baselines are recorded in one commit
        cfg0 = service_config(world, api, sink, "day0")
        first = run(watch, config_file=str(cfg0))
        assert first["first_snapshot"] is True
        assert first["events"] == []
        day0 = run(rebaseline_all, config_file=str(cfg0), reason="manual")
        assert day0["statuses"] == {"alpha": "no baseline", "beta": "no baseline", "gamma": "no baseline"}
        assert git(repo, "rev-list", "--count", "main..skillreach/baselines") == "1"
        assert branch_files(repo) == ["baselines/alpha.json", "baselines/beta.json", "baselines/gamma.json"]
        assert git(repo, "status", "--porcelain") == ""  # the team's working tree untouched
        assert alerts(sink) == []

        # ---- day 1: a skill that steals beta's traffic is added
        write_skill(world["skills"], *THIEF)
        git(repo, "add", ".")
        git(repo, "commit", "-q", "-m", "add delta")
        cfg1 = service_config(world, api, sink, "day1")
        seen = run(watch, config_file=str(cfg1))
        assert seen["added"] == ["delta"]
        assert SKILL_ADDED in seen["events"]
        day1 = run(rebaseline_all, config_file=str(cfg1), reason=SKILL_ADDED, skill="delta")
        assert day1["statuses"] == {"alpha": "ok", "beta": "breach", "delta": "no queries", "gamma": "ok"}
        texts = alerts(sink)
        assert [t for t in texts if " beta " in t or "beta:" in t] == [
            t for t in texts if t.startswith("skillreach gate breach: beta activation")]
        assert len([t for t in texts if "beta" in t]) == 1, texts  # exactly one alert names the neighbour
        [told] = [t for t in texts if t.startswith("skillreach gate breach: beta activation")]
        # the cause: the skill that took beta's traffic, from the new study's probes of beta's cases; the
        # next step: accept the new bar, or fix the thief's description
        assert "; lost 4 of 4 cases to delta; next: skillreach baseline accept beta if this is intended, " \
               f"else fix {world['skills'] / 'delta' / 'SKILL.md'}" in told, told
        assert any(t.startswith("skillreach skillreach.skill.no_queries: delta") for t in texts)
        assert all("SECRET" not in t for t in texts)
        assert git(repo, "rev-list", "--count", "main..skillreach/baselines") == "2"  # one more commit
        assert branch_files(repo) == ["baselines/alpha.json", "baselines/candidates/beta.json",
                                      "baselines/gamma.json"]
        assert "skill.added (delta)" in git(repo, "log", "-1", "--format=%B", "skillreach/baselines")
        # the team looks, decides delta may take docker work, and accepts beta's candidate
        assert main(["baseline", "status", "--baselines", str(repo / "baselines")]) == 0
        assert "candidates waiting" in capsys.readouterr().out
        assert main(["baseline", "accept", "beta", "--baselines", str(repo / "baselines")]) == 0
        assert git(repo, "rev-list", "--count", "main..skillreach/baselines") == "3"

        # ---- day 2: nothing changed: every skill with queries ok; beta's breach (its bar accepted) is
        # closed, said once; nothing else
        cfg2 = service_config(world, api, sink, "day2")
        assert run(watch, config_file=str(cfg2))["events"] == []
        night = run(nightly_compliance, config_file=str(cfg2))
        assert night["statuses"] == {"alpha": "ok", "beta": "ok", "delta": "no queries", "gamma": "ok"}
        assert night["breaches"] == 0
        [closed] = alerts(sink)
        assert closed.startswith("skillreach skillreach.verdict.closed: beta: activation is back within")

        # ---- day 3: the alias resolves to a new snapshot, under which gamma is missed
        api.aliases[ALIAS] = NEW
        cfg3 = service_config(world, api, sink, "day3")
        seen = run(watch, config_file=str(cfg3))
        assert MODEL_SNAPSHOT_CHANGED in seen["events"]
        day3 = run(rebaseline_all, config_file=str(cfg3), reason=MODEL_SNAPSHOT_CHANGED, model_snapshot=NEW)
        assert day3["statuses"] == {"alpha": "ok", "beta": "ok", "delta": "no queries", "gamma": "drift"}
        texts = alerts(sink)
        drifted = [t for t in texts if t.startswith("skillreach drift:")]
        assert len(drifted) == 1  # one alert, for the skill that moved
        assert drifted[0].startswith("skillreach drift: gamma activation changed -1.000")
        assert git(repo, "rev-list", "--count", "main..skillreach/baselines") == "4"
        changed = git(repo, "show", "--name-only", "--format=", "skillreach/baselines").splitlines()
        assert sorted(changed) == ["baselines/alpha.json", "baselines/beta.json", "baselines/gamma.json"]
        gamma = json.loads(git(repo, "show", "skillreach/baselines:baselines/gamma.json"))
        assert gamma["model"] == NEW

        # ---- CI: the team merges the service's branch; a later change to alpha is checked against it
        git(repo, "merge", "-q", "--no-edit", "skillreach/baselines")
        write_skill(world["skills"], "alpha", SKILLS["alpha"], body="Steps, now with an example.")
        git(repo, "commit", "-q", "-am", "alpha: an example")
        ci = world["tmp"] / "ci.toml"
        ci.write_text(f'[runtime_options]\nbase_url = "{api.base_url}"\nmax_retries = 0\n'
                      '[prices."claude-week"]\ninput = 1.0\noutput = 5.0\ncache_write = 1.25\n'
                      'cache_read = 0.1\n')
        os.chdir(repo)
        code = main(["check", "--changed", "--since", "HEAD~1", "--skills", "skills", "--config", str(ci),
                     "--in-process", "--json"])
        captured = capsys.readouterr()
        assert code == 0, captured.err
        [result] = json.loads(captured.out)["results"]
        assert result["skill"] == "alpha"
        assert result["status"] == "ok"
