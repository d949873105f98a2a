"""Live events and read cursors in the store (migration 0003), on SQLite and PostgreSQL alike."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from skillreach.live import EventKind, LiveEvent
from skillreach.store.database import HEAD, Store
from skillreach.store.live import (
    FileCursor,
    SkillCallUpdate,
    count_events,
    load_cursors,
    load_events,
    save_cursors,
    save_events,
    update_skill_calls,
)

PG_URL = os.environ.get("SKILLREACH_TEST_PG_URL")
T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'store.db'}"
    else:
        if not PG_URL:
            if os.environ.get("CI", "").lower() == "true":
                pytest.fail("SKILLREACH_TEST_PG_URL is unset under CI=true")
            pytest.skip("no PostgreSQL: set SKILLREACH_TEST_PG_URL")
        engine = create_engine(PG_URL)
        with engine.begin() as conn:
            conn.execute(text("DROP SCHEMA public CASCADE"))
            conn.execute(text("CREATE SCHEMA public"))
        engine.dispose()
        url = PG_URL
    s = Store(url)
    yield s
    s.close()


def _prompt(i: int, *, session: str = "s1", at: datetime = T0, source: str = "claude:/x") -> LiveEvent:
    return LiveEvent(
        source=source,
        event_id=f"p{i}",
        kind=EventKind.PROMPT,
        at=at + timedelta(minutes=i),
        agent="claude-code",
        session_id=session,
    )


def _call(
    i: int, skill: str, *, sidechain: bool = False, at: datetime = T0, hidden: bool = False
) -> LiveEvent:
    return LiveEvent(
        source="claude:/x",
        event_id=f"t{i}",
        kind=EventKind.SKILL,
        at=at + timedelta(minutes=i),
        agent="claude-code",
        session_id="s1",
        skill=skill,
        sidechain=sidechain,
        hidden=hidden,
        model="claude-sonnet-4-5",
        cwd="/repo",
        git_branch="main",
        skill_version="git:" + "a" * 40,
    )


def test_saving_twice_adds_nothing_and_events_come_back_whole(store: Store) -> None:
    assert store.revision() == HEAD
    events = [_prompt(1), _call(2, "pdf"), _call(3, "docx"), _prompt(4, source="otel:/y")]
    assert save_events(store, events) == 4
    assert save_events(store, events) == 0
    assert save_events(store, [*events, _prompt(5)]) == 1  # only the new one
    back = load_events(store)
    assert [e.event_id for e in back] == ["p1", "t2", "t3", "p4", "p5"]  # oldest first
    assert back[1] == events[1]  # every field kept, the time timezone-aware
    assert back[1].at.tzinfo is not None
    assert count_events(store) == 5
    assert count_events(store, "otel:/y") == 1


def test_load_filters_time_skills_and_sidechains(store: Store) -> None:
    save_events(
        store, [_prompt(1), _call(2, "pdf"), _call(3, "docx"), _call(4, "pdf", sidechain=True), _prompt(10)]
    )
    assert [e.event_id for e in load_events(store, skills={"pdf"})] == ["p1", "t2", "p10"]  # prompts stay
    assert [e.event_id for e in load_events(store, skills=["pdf"], include_sidechain=True)] == [
        "p1",
        "t2",
        "t4",
        "p10",
    ]
    assert [
        e.event_id
        for e in load_events(store, since=T0 + timedelta(minutes=2), until=T0 + timedelta(minutes=10))
    ] == ["t2", "t3"]
    assert load_events(store, skills=()) == [e for e in load_events(store) if e.kind == EventKind.PROMPT]


def test_later_lines_fill_in_a_stored_skill_call(store: Store) -> None:
    save_events(store, [_call(1, "pdf")])
    n = update_skill_calls(
        store,
        "claude:/x",
        [SkillCallUpdate("t1", skill_ran="pdf", success=True), SkillCallUpdate("nope", success=False)],
    )
    assert n == 1
    (e,) = load_events(store)
    assert (e.skill_ran, e.success, e.skill_version) == ("pdf", True, "git:" + "a" * 40)


def test_cursors_are_replaced_not_duplicated(store: Store) -> None:
    long_path = "/data/" + "d" * 3000 + "/a.jsonl"
    save_cursors(
        store,
        [
            FileCursor("/data/a.jsonl", "1:2", "sha256:x", 10, 100, 3),
            FileCursor(long_path, "1:3", "sha256:y", 5, 2**40, 2**33),
        ],
    )
    save_cursors(store, [FileCursor("/data/a.jsonl", "1:2", "sha256:x", 10, 250, 7)])
    got = load_cursors(store, ["/data/a.jsonl", long_path, "/data/unknown.jsonl"])
    assert got["/data/a.jsonl"].offset == 250
    assert got["/data/a.jsonl"].lines == 7
    assert got[long_path].offset == 2**40  # past 32 bits
    assert "/data/unknown.jsonl" not in got


def test_an_ingest_stores_the_same_events_on_either_backend(store: Store, tmp_path: Path) -> None:
    """save_batch's two paths (SQLite's executemany, PostgreSQL's RETURNING) and the later-line updates."""
    from skillreach.live.ingest import ingest_sources
    from tests.helpers.live_lines import cc_base_dir, cc_prompt, cc_skill_call, cc_skill_result

    f = tmp_path / "t" / "s.jsonl"
    f.parent.mkdir()
    f.write_text(
        cc_prompt("s", T0, "u1", "fill the form")
        + "\n"
        + cc_skill_call("s", T0, "a1", "toolu_1", "pdf")
        + "\n"
    )
    first = ingest_sources([f.parent], store)
    assert first.events_added == 2
    with open(f, "a", encoding="utf-8") as fh:
        fh.write(cc_skill_result("s", T0, "r1", "toolu_1", "pdf", success=False) + "\n")
        fh.write(cc_base_dir("s", T0, "m1", "/skills/pdf") + "\n")
    again = ingest_sources([f.parent], store)
    assert (again.events_added, again.sources[0].files) == (0, 1)
    assert ingest_sources([f.parent], store).bytes_read == 0
    prompt, call = load_events(store)
    assert (prompt.kind, prompt.at, prompt.session_id) == (EventKind.PROMPT, T0, "s")
    assert (call.skill, call.skill_ran, call.success, call.skill_dir, call.hidden, call.sidechain) == (
        "pdf",
        "pdf",
        False,
        "/skills/pdf",
        False,
        False,
    )
