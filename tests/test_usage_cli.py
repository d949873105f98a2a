"""``skillreach usage`` through the command a user types: the table, ``--json``, ``--html``, ``--stale``,
``--gate`` (exit 1 past the live gate) and bad input (one line, exit 2), over a store of live events."""

from __future__ import annotations

import json
import os
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from skillreach.live.events import LiveEvent
from tests.helpers import hang
from tests.test_live_usage import month

SKILLREACH = str(Path(sys.executable).parent / "skillreach")
T0 = datetime(2026, 11, 2, tzinfo=UTC)


def usage(cwd: Path, *args: str) -> hang.Outcome:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKILLREACH_")}
    env.update(SKILLREACH_HOME=str(cwd / "home"), PREFECT_API_URL="", COLUMNS="200")
    return hang.finish([SKILLREACH, "usage", *args], limit_s=120, cwd=cwd, env=env)


@pytest.fixture
def world(tmp_path: Path) -> Path:
    """A store with six weeks of events (pdf's share halves in the last two), a subagent's calls and a
    hidden-name call; a catalog of pdf, docx and pptx."""
    from skillreach.settings import load_settings
    from skillreach.store import open_store
    from skillreach.store.live import save_events

    events = month(6, 3)
    side = LiveEvent(
        source="t",
        event_id="side-1",
        kind="skill",
        at=T0 + timedelta(days=30),
        agent="claude-code",
        session_id="sub",
        skill="pdf",
        skill_ran="pdf",
        sidechain=True,
    )
    hidden = LiveEvent(
        source="t",
        event_id="hid-1",
        kind="skill",
        at=T0 + timedelta(days=30),
        agent="claude-code",
        session_id="s30",
        skill=None,
        hidden=True,
    )
    asked = LiveEvent(
        source="t",
        event_id="mm-1",
        kind="skill",
        at=T0 + timedelta(days=31),
        agent="claude-code",
        session_id="s31",
        skill="docx",
        skill_ran="pdf",
    )
    with open_store(load_settings(home=tmp_path / "home")) as store:
        assert save_events(store, [*events, side, hidden, asked]) == len(events) + 3
    for name in ("pdf", "docx", "pptx"):
        folder = tmp_path / "skills" / name
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: Handles {name} files.\n---\nBody.\n", encoding="utf-8"
        )
    return tmp_path


WINDOW = ("--since", "2026-11-02", "--until", "2026-12-14")


def test_the_table_counts_per_skill_and_week(world: Path) -> None:
    res = usage(world, *WINDOW, "--by", "week", "--skills", "skills", "--stale", "30d")
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert (
        out.splitlines()[0]
        == "420 main-agent prompts in 6 week(s); 1 call(s) with a hidden skill name, counted apart"
    )
    # the week of 30 Nov: 70 prompts, pdf ran on 3 a day (21) at version git:b, plus the mismatched call
    # that ran it (its version unknown); the subagent's call is apart
    rows = [line.split() for line in out.splitlines()]
    assert ["pdf", "2026-11-30", "git:b", "70", "21", "30.0%", "7", "1"] in rows, out
    assert ["pdf", "2026-11-30", "unknown", "70", "1", "1.4%", "1", "1"] in rows, out
    assert ["pdf", "all", "420", "211", "50.2%"] in rows, out
    assert "stale (30d without an activation): pptx — never activated" in out
    assert "asked for docx, ran pdf: 1 call(s)" in out
    assert (
        "versions live: pdf: git:a (2026-11-02–2026-11-21, 120); git:b (2026-11-22–2026-12-13, 90); "
        "unknown (2026-12-03–2026-12-03, 1)"
    ) in out


def test_json_and_html(world: Path) -> None:
    page = world / "out" / "usage.html"
    res = usage(world, *WINDOW, "--json", "--html", str(page), "--skills", "skills")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["usage"]["by"] == "day"
    assert len(data["usage"]["periods"]) == 42
    assert {r["skill"] for r in data["usage"]["rows"]} == {"pdf", "docx"}
    assert data["live_gate"] is None
    assert data["catalog_changes"] == []  # the skills folder is not in git
    html = page.read_text(encoding="utf-8")
    assert html.count("<polyline") == 2
    assert "What a live share is." in html


def test_the_gate_exits_1_naming_the_skill(world: Path) -> None:
    res = usage(world, "--until", "2026-12-14", "--gate", "--skills", "skills")
    assert res.returncode == 1, res.stdout + res.stderr
    [line] = [x for x in res.stdout.splitlines() if x.startswith("live gate:")]
    assert line == (
        "live gate: pdf: live activation share 60.0% → 30.7% (-49% relative; gate -25%) over "
        "2026-11-30–2026-12-14 against 2026-11-02–2026-11-30 (140 and 280 prompts)"
    )
    ok = usage(world, "--until", "2026-11-20", "--gate")  # before the fall (and too few prompts to judge)
    assert ok.returncode == 0, ok.stderr
    assert "live gate: no skill past it" in ok.stdout


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (("--by", "month"), "--by 'month': pass day or week"),
        (
            ("--since", "last tuesday"),
            "--since 'last tuesday': not a date; write 2026-11-01, 2026-11-01T12:00 or a "
            "span back from now such as 30d",
        ),
        (("--stale", "30d"), "--stale needs the catalog: pass --skills DIR"),
        (("--skills", "nowhere"), "nowhere: no such folder of skills; pass --skills DIR"),
        (
            ("--since", "2026-12-01", "--until", "2026-11-01"),
            "--since 2026-12-01 is not before --until 2026-11-01",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(world: Path, args: tuple[str, ...], line: str) -> None:
    res = usage(world, *args)
    assert res.returncode == 2
    assert res.stderr.strip() == f"skillreach: error: {line}"


@pytest.mark.parametrize(
    ("toml", "line"),
    [
        (
            "[live_gates]\nactivation_share = 0.3\n",
            "live_gates.activation_share: Input should be less than or equal to 0",
        ),
        (
            '[live_gates]\nrecent = "soon"\n',
            "live_gates.recent: Value error, 'soon' is not a duration; write e.g. 30m, 24h, 7d",
        ),
        ('[live_gates]\nwindow = "14d"\n', "live_gates.window: unknown setting"),
    ],
)
def test_a_bad_live_gate_setting_is_refused_naming_the_file(world: Path, toml: str, line: str) -> None:
    cfg = world / "gates.toml"
    cfg.write_text(toml, encoding="utf-8")
    res = usage(world, "--gate", "--config", str(cfg))
    assert res.returncode == 2, res.stdout + res.stderr
    assert res.stderr.strip().startswith(f"skillreach: error: {cfg}: {line}")
