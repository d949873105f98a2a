"""Issue 32's month, played end to end: live events written in the documented formats (Claude Code
transcripts, the OpenTelemetry Collector's file export), read through ``skillreach ingest`` into the
store; ``skillreach usage --gate`` and the ``ingest`` flow see the drop (``skillreach.live.dropped``);
the ``live-dropped`` flow re-runs the frozen set (the baseline's cases, the current catalog, the offline
``keyword`` runtime) and files the verdict as an alert.

- *routing change*: a neighbour is added whose description takes the skill's cases; the skill's live
  share falls; the frozen set breaches too, and the verdict names the neighbour and its addition.
- *request mix*: nothing changes in the catalog; other skills' prompts grow, so the skill's share falls;
  the frozen set holds: *request mix*, with the skills whose share rose.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.helpers.live_lines import cc_prompt, cc_skill_call, cc_skill_result, otlp_logs, otlp_record
from tests.helpers.merge_gate import STEAL, corpora_present, git, make_team_repo

pytestmark = pytest.mark.skipif(not corpora_present(), reason="../shared/corpora is not present")

T0 = datetime(2026, 10, 20, tzinfo=UTC)
"""Day 0 of the month played (six weeks: 28 reference days, 14 recent ones)."""
UNTIL = T0 + timedelta(days=42)
SKILL = "algorithmic-art"
NEIGHBOUR = "generative-sketches"
EXE = Path(sys.executable).with_name("skillreach")


def at(d: int, i: int = 0) -> datetime:
    return T0 + timedelta(days=d, hours=8, minutes=7 * i)


def dated(when: datetime) -> dict[str, str]:
    stamp = when.strftime("%Y-%m-%dT%H:%M:%S+00:00")
    return {"GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp}


def cli(repo: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("SKILLREACH_", "GITHUB_"))}
    full.update(SKILLREACH_HOME=str(repo / ".skillreach"), PREFECT_API_URL="", COLUMNS="200", **(env or {}))
    return subprocess.run(
        [str(EXE), *args], cwd=repo, env=full, capture_output=True, text=True, timeout=300, check=False
    )


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The team's skills repository, committed the day before the month, its baselines recorded (the
    keyword runtime) and committed."""
    saved = {k: os.environ.get(k) for k in ("GIT_AUTHOR_DATE", "GIT_COMMITTER_DATE")}
    os.environ.update(dated(T0 - timedelta(days=1)))
    try:
        repo = make_team_repo(tmp_path_factory.mktemp("live"))
        run = cli(
            repo,
            "run",
            "--skills",
            "skills",
            "--queries",
            "evals/queries.yaml",
            "--runtime",
            "keyword",
            "--out",
            "runs/base",
        )
        assert run.returncode == 0, run.stderr
        rec = cli(
            repo,
            "baseline",
            "record",
            "--artifact",
            "runs/base/artifact.json",
            "--all",
            "--commit",
            env=dated(T0 - timedelta(days=1)),
        )
        assert rec.returncode == 0, rec.stderr
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return repo


def clone(team: Path, dest: Path) -> Path:
    git(dest.parent, "clone", "-q", str(team), dest.name)
    return dest


def add_neighbour(repo: Path, when: datetime) -> None:
    """A new skill whose description covers algorithmic-art's work (the pull request that steals)."""
    folder = repo / "skills" / NEIGHBOUR
    folder.mkdir()
    (folder / "SKILL.md").write_text(
        f"---\nname: {NEIGHBOUR}\ndescription: Sketches for the team's creative coding.{STEAL}\n---\n\n"
        "# Generative sketches\n\nWrite the sketch.\n",
        encoding="utf-8",
    )
    env = {
        **os.environ,
        **dated(when),
        "GIT_AUTHOR_NAME": "team",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "team",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True, env=env)
    subprocess.run(["git", "commit", "-qm", f"add {NEIGHBOUR}"], cwd=repo, check=True, env=env)


def transcripts(folder: Path, plan: dict[int, list[str | None]]) -> int:
    """One Claude Code session a day (``~/.claude/projects/<project>/<session>.jsonl``): per prompt, the
    skill it activated (a Skill tool_use and its tool_result) or ``None``. Returns the lines written."""
    project = folder / "-work-app"
    project.mkdir(parents=True)
    lines = 0
    for d, skills in plan.items():
        session = f"sess-{d:02d}"
        out = []
        for i, skill in enumerate(skills):
            uid = f"{session}-{i}"
            out.append(cc_prompt(session, at(d, i), f"u-{uid}", f"request {i} of day {d}"))
            if skill:
                out.append(
                    cc_skill_call(
                        session,
                        at(d, i) + timedelta(seconds=5),
                        f"a-{uid}",
                        f"toolu_{uid}",
                        skill,
                        parent=f"u-{uid}",
                    )
                )
                out.append(
                    cc_skill_result(
                        session,
                        at(d, i) + timedelta(seconds=6),
                        f"r-{uid}",
                        f"toolu_{uid}",
                        skill,
                        parent=f"a-{uid}",
                    )
                )
        (project / f"{session}.jsonl").write_text("\n".join(out) + "\n", encoding="utf-8")
        lines += len(out)
    return lines


def otlp_export(path: Path, plan: dict[int, list[str | None]]) -> int:
    """The Collector's file exporter: per day one export of Claude Code's ``user_prompt`` and
    ``skill_activated`` log records (``OTEL_LOG_TOOL_DETAILS=1``: the skill named)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    out = []
    for d, skills in plan.items():
        records = []
        for i, skill in enumerate(skills):
            attrs = {"session.id": f"otel-{d:02d}", "prompt.id": f"p-{d:02d}-{i}", "prompt_length": 40}
            records.append(otlp_record("claude_code.user_prompt", at(d, i), attrs))
            if skill:
                records.append(
                    otlp_record(
                        "claude_code.skill_activated",
                        at(d, i) + timedelta(seconds=5),
                        {**attrs, "skill.name": skill},
                    )
                )
        out.append(otlp_logs(records))
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    return len(out)


def day_plan(
    d: int, *, skill_before: int, skill_after: int, neighbour_after: int = 0, grown: int = 0
) -> list[str | None]:
    """Twelve prompts a day: ``SKILL`` on the first ones (``skill_before`` a day before day 28,
    ``skill_after`` from then), the neighbour on the next ones after day 28, canvas-design on two, the
    rest no skill; from day 28 ``grown`` more prompts a day, all systematic-debugging."""
    late = d >= 28
    mine = skill_after if late else skill_before
    theirs = neighbour_after if late else 0
    day: list[str | None] = [SKILL] * mine + [NEIGHBOUR] * theirs + ["canvas-design"] * 2
    day += [None] * (12 - len(day))
    return day + (["systematic-debugging"] * grown if late else [])


def study_config(repo: Path) -> object:
    from skillreach.study import StudyConfig

    return StudyConfig.build(
        skills=(repo / "skills",),
        queries=repo / "evals" / "queries.yaml",
        runtime="keyword",
        home=repo / ".skillreach",
    )


def run_flow(flow: object, *args: object, **kwargs: object) -> dict[str, object]:
    import asyncio

    from prefect.logging import disable_run_logger

    with disable_run_logger():
        return asyncio.run(flow.fn(*args, **kwargs))  # type: ignore[attr-defined]


def stored_alerts(repo: Path) -> list[dict[str, object]]:
    from skillreach.store import Store

    with Store(f"sqlite:///{repo / '.skillreach' / 'skillreach.db'}") as store:
        return [dict(a.payload or {}) for a in store.alerts()]


def test_a_neighbour_added_takes_the_skills_cases_routing_change(
    team: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = clone(team, tmp_path / "routing")
    add_neighbour(repo, at(28) - timedelta(hours=3))
    plan = {d: day_plan(d, skill_before=5, skill_after=1, neighbour_after=4) for d in range(42)}
    lines = transcripts(tmp_path / "claude" / "projects", plan)
    assert lines > 1000
    read = cli(repo, "ingest", str(tmp_path / "claude" / "projects"), "--skills", "skills", "--json")
    assert read.returncode == 0, read.stderr
    assert json.loads(read.stdout)["events_added"] == sum(len(p) for p in plan.values()) + sum(
        1 for p in plan.values() for s in p if s
    )
    again = cli(repo, "ingest", str(tmp_path / "claude" / "projects"), "--json")
    assert json.loads(again.stdout)["events_added"] == 0  # nothing new: nothing added

    # the live number: 5 of 12 prompts a day before the neighbour, 1 of 12 after — past the gate
    gate = cli(
        repo,
        "usage",
        "--until",
        UNTIL.date().isoformat(),
        "--gate",
        "--skills",
        "skills",
        "--html",
        "usage.html",
    )
    assert gate.returncode == 1, gate.stdout + gate.stderr
    [line] = [x for x in gate.stdout.splitlines() if x.startswith(f"live gate: {SKILL}:")]
    assert f"live gate: {SKILL}: live activation share 41.7% → 8.3% (-80% relative; gate -25%)" in line
    html = (repo / "usage.html").read_text(encoding="utf-8")
    assert f'data-mark="added" data-skill="{NEIGHBOUR}"' in html  # the addition marked on the lines

    # the service: the ingest flow sees the drop (it emits skillreach.live.dropped in a Prefect run) …
    from skillreach.flows.live import ingest, live_dropped

    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    cfg = study_config(repo)
    seen = run_flow(ingest, cfg, sources=[str(tmp_path / "claude" / "projects")], until=UNTIL.isoformat())
    assert seen["ingested"]["events_added"] == 0  # type: ignore[index]
    assert SKILL in seen["dropped"]  # type: ignore[operator]
    # … and live-dropped, the deployment that event triggers, re-runs the frozen set and files the verdict
    verdict = run_flow(live_dropped, SKILL, until=UNTIL.isoformat(), config=cfg)
    assert verdict["verdict"] == "routing change", verdict["message"]
    assert verdict["takers"][0] == NEIGHBOUR  # type: ignore[index]
    assert verdict["nearest_change"]["skill"] == NEIGHBOUR  # type: ignore[index]
    assert verdict["nearest_change"]["how"] == "added"  # type: ignore[index]
    message = str(verdict["message"])
    assert f"its cases now go to {NEIGHBOUR} (" in message
    assert f"nearest catalog change: {NEIGHBOUR} added on 2026-11-17 05:00 UTC" in message
    [alert] = [a for a in stored_alerts(repo) if a.get("event") == "skillreach.live.verdict"]
    assert alert["skill"] == SKILL
    assert alert["verdict"] == "routing change"
    assert alert["takers"][0] == NEIGHBOUR  # type: ignore[index]
    from skillreach.store import alert_key

    assert alert_key(alert) == f"live.verdict:{SKILL}:live_share:routing-change"  # one word a mute can name


def test_the_mix_moved_the_frozen_set_holds_request_mix(
    team: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = clone(team, tmp_path / "mix")
    plan = {d: day_plan(d, skill_before=5, skill_after=5, grown=12) for d in range(42)}
    export = tmp_path / "otel" / "claude-code-logs.jsonl"
    otlp_export(export, plan)
    read = cli(repo, "ingest", str(export), "--json")
    assert read.returncode == 0, read.stderr
    assert json.loads(read.stdout)["events_added"] > 0

    # the same five activations a day; from day 28 the prompts double (systematic-debugging's requests)
    gate = cli(repo, "usage", "--until", UNTIL.date().isoformat(), "--gate", "--skills", "skills")
    assert gate.returncode == 1, gate.stdout + gate.stderr
    assert (
        f"live gate: {SKILL}: live activation share 41.7% → 20.8% (-50% relative; gate -25%)" in gate.stdout
    )

    from skillreach.flows.live import ingest, live_dropped

    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    cfg = study_config(repo)
    seen = run_flow(ingest, cfg, sources=[str(export)], until=UNTIL.isoformat())
    assert SKILL in seen["dropped"]  # type: ignore[operator]
    verdict = run_flow(live_dropped, SKILL, until=UNTIL.isoformat(), config=cfg)
    assert verdict["verdict"] == "request mix", verdict["message"]
    message = str(verdict["message"])
    assert "routing holds, the requests moved" in message
    assert "live share of the skills that rose: systematic-debugging 0.0% → 50.0%" in message
    [alert] = [a for a in stored_alerts(repo) if a.get("event") == "skillreach.live.verdict"]
    assert alert["verdict"] == "request mix"
    assert alert["rose"][0]["skill"] == "systematic-debugging"  # type: ignore[index]
    # a skill that is not past the gate is not re-run
    quiet = run_flow(live_dropped, "canvas-design", until=(T0 + timedelta(days=20)).isoformat(), config=cfg)
    assert quiet["verdict"] is None
    shutil.rmtree(repo / ".skillreach" / "live", ignore_errors=True)
