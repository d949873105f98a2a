"""``skillreach ingest``: Claude Code transcripts and OpenTelemetry file exports, read incrementally into
the store, with the skill versions of the time (issue 32). Fixtures are written from the formats'
public documentation (tests/helpers/live_lines.py)."""

from __future__ import annotations

import json
import os
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from skillreach.cli import main
from skillreach.live import EventKind, LiveEvent
from skillreach.live.ingest import ingest_sources
from skillreach.store.database import Store
from skillreach.store.live import count_events, load_events
from tests.helpers.live_lines import (
    cc_assistant_text,
    cc_base_dir,
    cc_other_tool,
    cc_prompt,
    cc_skill_call,
    cc_skill_result,
    otlp_logs,
    otlp_record,
    otlp_spans,
    tool_span,
)

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def _t(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def _session(
    session: str = "sess-1",
    *,
    start: float = 0,
    skill: str = "pdf-forms",
    n: int = 1,
    branch: str | None = "main",
) -> list[str]:
    """A session: a prompt, assistant text, a Bash call and result, a Skill call, its result and the
    loaded skill's text, per turn."""
    lines = []
    for i in range(n):
        m = start + i * 10
        lines += [
            cc_prompt(session, _t(m), f"{session}-u{i}", f"fill in the form number {i}", branch=branch),
            cc_assistant_text(session, _t(m + 0.1), f"{session}-a{i}", "Let me look at the files first."),
            cc_other_tool(session, _t(m + 0.2), f"{session}-b{i}", f"toolu_{session}_bash{i}", result=False),
            cc_other_tool(session, _t(m + 0.3), f"{session}-r{i}", f"toolu_{session}_bash{i}", result=True),
            cc_skill_call(
                session, _t(m + 1), f"{session}-s{i}", f"toolu_{session}_{i}", skill, branch=branch
            ),
            cc_skill_result(
                session, _t(m + 1.1), f"{session}-t{i}", f"toolu_{session}_{i}", skill, branch=branch
            ),
            cc_base_dir(
                session, _t(m + 1.1), f"{session}-m{i}", f"/home/dev/.claude/skills/{skill}", branch=branch
            ),
        ]
    return lines


def _write(path: Path, lines: list[str], *, end: str = "\n", mode: str = "w") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, mode, encoding="utf-8") as fh:
        fh.write("\n".join(lines) + end)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SKILLREACH_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def _store(home: Path) -> Store:
    return Store(f"sqlite:///{home / 'skillreach.db'}")


def _ingest_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    assert main(["ingest", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


# ------------------------------------------------------------------------------------- transcripts


def test_a_transcript_folder_gives_prompts_and_skill_calls(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    projects = tmp_path / "projects"
    _write(projects / "-work-app" / "sess-1.jsonl", _session(n=2))
    sub = [
        cc_prompt("sess-1", _t(3), "side-u", "subagent task", sidechain=True),
        cc_skill_call("sess-1", _t(3.5), "side-s", "toolu_side", "pdf-forms", sidechain=True),
    ]
    _write(projects / "-work-app" / "sess-1" / "subagents" / "agent-a1.jsonl", sub)
    out = _ingest_json(capsys, str(projects))
    assert out["events_added"] == 6  # 2 prompts + 2 calls, and the subagent's prompt and call
    assert out["files"] == 2
    assert out["skipped"] == 0
    with _store(home) as store:
        events = load_events(store)
        assert [e.kind for e in events] == ["prompt", "skill", "prompt", "skill"]
        call = events[1]
        assert (call.skill, call.skill_ran, call.success) == ("pdf-forms", "pdf-forms", True)
        assert (call.session_id, call.model, call.cwd, call.git_branch) == (
            "sess-1",
            "claude-sonnet-4-5-20250929",
            "/work/app",
            "main",
        )
        assert call.event_id == "toolu_sess-1_0"
        assert call.prompt_id == events[0].prompt_id == "prompt-sess-1-u0"
        assert call.skill_dir == "/home/dev/.claude/skills/pdf-forms"
        assert call.agent == "claude-code"
        assert call.at == _t(1)
        assert call.skill_version == "unknown"  # no --skills and the folder is not here: never guessed
        assert events[0].prompt_text is None  # ids and counts only by default
        assert call.source == f"claude-code:{projects}"
        side = [e for e in load_events(store, include_sidechain=True) if e.sidechain]
        assert [(e.kind, e.event_id) for e in side] == [("prompt", "side-u"), ("skill", "toolu_side")]


def test_a_rerun_reads_only_new_bytes_and_a_torn_line_waits(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "projects" / "p" / "s.jsonl"
    _write(f, _session(n=1))
    first = _ingest_json(capsys, str(f.parent))
    assert first["events_added"] == 2
    assert first["bytes_read"] == f.stat().st_size
    again = _ingest_json(capsys, str(f.parent))
    assert (again["events_added"], again["bytes_read"]) == (0, 0)
    # a second turn, its last line torn (the writer is mid-line)
    more = _session(n=2)[7:]
    whole = "\n".join(more) + "\n"
    torn_at = len(whole) - 40
    size_before = f.stat().st_size
    with open(f, "a", encoding="utf-8") as fh:
        fh.write(whole[:torn_at])
    third = _ingest_json(capsys, str(f.parent))
    assert third["bytes_read"] == f.stat().st_size - size_before  # only the new bytes
    assert third["events_added"] == 2  # the prompt and the call; the torn meta line waits
    with open(f, "a", encoding="utf-8") as fh:
        fh.write(whole[torn_at:])
    fourth = _ingest_json(capsys, str(f.parent))
    assert fourth["skipped"] == 0  # the torn line was read whole, not as a bad fragment
    with _store(home) as store:
        calls = [e for e in load_events(store) if e.kind == EventKind.SKILL]
        assert [c.skill_dir for c in calls] == ["/home/dev/.claude/skills/pdf-forms"] * 2


def test_a_result_read_in_a_later_run_completes_the_stored_call(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "t" / "s.jsonl"
    lines = _session(n=1)
    _write(f, lines[:5])  # up to the Skill call
    _ingest_json(capsys, str(f))
    with _store(home) as store:
        (call,) = [e for e in load_events(store) if e.kind == EventKind.SKILL]
        assert (call.skill_ran, call.success) == (None, None)
    failed = cc_skill_result("sess-1", _t(1.1), "x", "toolu_sess-1_0", "pdf-forms", success=False)
    _write(f, [failed, lines[6]], mode="a")
    assert _ingest_json(capsys, str(f))["events_added"] == 0
    with _store(home) as store:
        (call,) = [e for e in load_events(store) if e.kind == EventKind.SKILL]
        assert (call.skill_ran, call.success, call.skill_dir) == (
            "pdf-forms",
            False,
            "/home/dev/.claude/skills/pdf-forms",
        )


def test_a_rotated_or_truncated_file_is_read_again_from_the_start(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "t" / "s.jsonl"
    _write(f, _session("a", n=2))
    assert _ingest_json(capsys, str(f))["events_added"] == 4
    # rotated: a new file under the old name (a new inode), shorter than what was read
    f.rename(f.with_suffix(".old"))
    _write(f, _session("b", n=1))
    out = _ingest_json(capsys, str(f))
    assert out["events_added"] == 2
    assert out["sources"][0]["reread"] == 1
    # truncated in place and rewritten longer, with other first bytes: same inode, read from the start
    with open(f, "r+", encoding="utf-8") as fh:
        fh.truncate(0)
        fh.write("\n".join(_session("c", n=3)) + "\n")
    out = _ingest_json(capsys, str(f))
    assert out["events_added"] == 6
    assert out["sources"][0]["reread"] == 1
    with _store(home) as store:
        assert count_events(store) == 12


def test_bad_lines_are_counted_and_named_never_stopping_the_rest(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import skillreach.live.files as files

    monkeypatch.setattr(files, "MAX_LINE_BYTES", 4096)
    good = _session(n=2)
    deep = '{"type":"user","message":' + "[" * 200 + "]" * 200 + "}"
    huge_int = '{"type":"user","sessionId":"s","n":' + "9" * 400 + "}"
    long_line = '{"type":"user","message":{"content":"' + "x" * 20_000 + '"}}'
    lines = [
        good[0],
        '{"type":"user","message":{"role":"us',
        "plain text, not JSON",
        deep,
        huge_int,
        long_line,
        *good[1:],
    ]
    f = tmp_path / "t" / "s.jsonl"
    f.parent.mkdir()
    f.write_bytes(("\n".join(lines) + "\n").encode() + b'{"type":"user","x":"\xff\xfe"}\n')
    assert main(["ingest", str(f)]) == 0
    out = capsys.readouterr().out
    assert f"skipped 1 line(s): not JSON (first: {f}:2)" in out
    assert f"skipped 1 line(s): not a JSON object (first: {f}:3)" in out
    assert f"skipped 1 line(s): nested too deeply (first: {f}:4)" in out
    assert f"skipped 1 line(s): number too large (first: {f}:5)" in out
    assert f"skipped 1 line(s): line longer than 16 MiB (first: {f}:6)" in out
    assert f"(first: {f}:{len(lines) + 1})" in out  # the bytes that are not UTF-8
    assert "Traceback" not in out
    with _store(home) as store:
        assert count_events(store) == 4  # every good line around them was read


# ------------------------------------------------------------------------------------------- OTLP


def test_otlp_exports_of_claude_code_codex_and_genai_spans(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cc = "claude_code."
    export = [
        otlp_logs(
            [
                otlp_record(
                    cc + "user_prompt", _t(0), {"session.id": "s1", "prompt.id": "p1", "prompt_length": 42}
                ),
                otlp_record(
                    cc + "api_request",
                    _t(0.1),
                    {"session.id": "s1", "prompt.id": "p1", "model": "claude-opus-4-1", "cost_usd": 0.01},
                ),
                otlp_record(
                    cc + "skill_activated",
                    _t(0.2),
                    {"session.id": "s1", "prompt.id": "p1", "skill.name": "pdf-forms"},
                ),
                otlp_record(
                    cc + "tool_result",
                    _t(0.3),
                    {
                        "session.id": "s1",
                        "prompt.id": "p1",
                        "tool_name": "Skill",
                        "success": "true",
                        "duration_ms": 12,
                        "tool_parameters": json.dumps({"skill_name": "pdf-forms"}),
                    },
                ),
                otlp_record(
                    cc + "tool_result",
                    _t(0.4),
                    {"session.id": "s1", "prompt.id": "p1", "tool_name": "Bash", "success": "true"},
                ),
            ]
        ),
        # no OTEL_LOG_TOOL_DETAILS: the names hidden
        otlp_logs(
            [
                otlp_record(cc + "user_prompt", _t(1), {"session.id": "s2", "prompt.id": "p2"}),
                otlp_record(
                    cc + "skill_activated",
                    _t(1.1),
                    {"session.id": "s2", "prompt.id": "p2", "skill.name": "custom_skill"},
                ),
                otlp_record(
                    cc + "tool_result",
                    _t(1.2),
                    {"session.id": "s2", "prompt.id": "p2", "tool_name": "Skill", "success": "true"},
                ),
            ]
        ),
        otlp_logs(
            [
                otlp_record("codex.user_prompt", _t(2), {"conversation.id": "c1", "event.sequence": 1}),
                otlp_record(
                    "codex.skill_invocation",
                    _t(2.1),
                    {
                        "conversation.id": "c1",
                        "skill.name": "git-changelog",
                        "skill.scope": "repo",
                        "skill.invocation_type": "implicit",
                    },
                ),
            ],
            service="codex_exec",
        ),
        json.dumps({"resourceMetrics": []}),  # other signals in the same file: passed over
        otlp_spans(
            [
                tool_span("00f067aa0ba902b7", _t(3), "Skill", {"skill": "xlsx-report"}),
                tool_span("00f067aa0ba902b8", _t(3.1), "Bash", {"command": "ls"}),
                tool_span("00f067aa0ba902b9", _t(3.2), "Skill", {"skill": "pdf-forms"}, error=True),
            ]
        ),
    ]
    _write(tmp_path / "otel" / "logs.jsonl", export)
    assert main(["ingest", str(tmp_path / "otel")]) == 0
    out = capsys.readouterr().out
    hidden = [ln for ln in out.splitlines() if "hidden" in ln]
    assert len(hidden) == 1  # said once
    assert hidden[0].startswith("1 skill call(s) with the skill's name hidden")
    assert "OTEL_LOG_TOOL_DETAILS=1" in hidden[0]
    with _store(home) as store:
        events = load_events(store)
    prompts = [e for e in events if e.kind == EventKind.PROMPT]
    calls = [e for e in events if e.kind == EventKind.SKILL]
    assert [(p.agent, p.session_id) for p in prompts] == [
        ("claude-code", "s1"),
        ("claude-code", "s2"),
        ("codex", "c1"),
    ]
    # skill_activated and the Skill tool_result of one call: one call, with its outcome and the model
    named = [(c.agent, c.skill, c.success, c.hidden, c.invocation, c.model) for c in calls]
    assert named == [
        ("claude-code", "pdf-forms", True, False, None, "claude-opus-4-1"),
        ("claude-code", None, True, True, None, None),
        ("codex", "git-changelog", None, False, "implicit", None),
        ("my-agent", "xlsx-report", None, False, None, None),
        ("my-agent", "pdf-forms", False, False, None, None),
    ]
    assert load_events(store_of(home), skills={"pdf-forms"})[-1].success is False


def store_of(home: Path) -> Store:
    return _store(home)


# ------------------------------------------------------------------------------------------ versions


def _git(repo: Path, *args: str, when: datetime | None = None) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@x",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@x",
    }
    if when is not None:
        env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = when.strftime("%Y-%m-%dT%H:%M:%S+0000")
    return subprocess.run(
        ["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True
    ).stdout.strip()


def _skill(repo: Path, name: str, description: str) -> None:
    folder = repo / "skills" / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\n\n# {name}\n")


def test_skill_versions_are_the_folder_in_force_at_the_events_time(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from skillreach.baselines.records import skill_version

    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    _skill(repo, "pdf-forms", "Fill in PDF forms.")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "pdf", when=_t(-60))
    v1 = "git:" + _git(repo, "rev-parse", "HEAD:skills/pdf-forms")
    _skill(repo, "pdf-forms", "Fill in and sign PDF forms.")
    _git(repo, "commit", "-qam", "edit", when=_t(30))
    v2 = "git:" + _git(repo, "rev-parse", "HEAD:skills/pdf-forms")
    assert skill_version(repo / "skills" / "pdf-forms") == (v2, "git")  # baselines pin the same format
    _git(repo, "checkout", "-qb", "feature")
    _skill(repo, "pdf-forms", "Feature branch wording.")
    _git(repo, "commit", "-qam", "feature", when=_t(35))
    v3 = "git:" + _git(repo, "rev-parse", "HEAD:skills/pdf-forms")
    _git(repo, "checkout", "-q", "main")

    lines = [
        *_session("early", start=-120, n=1),  # before the skill's first commit
        *_session("before", start=0, n=1),
        *_session("after", start=40, n=1),
        *_session("feat", start=50, n=1, branch="feature"),
        *_session("gone", start=50, n=1, branch="deleted-branch"),
        *_session("ghost", start=50, n=1, skill="never-existed"),
    ]
    _write(tmp_path / "t" / "s.jsonl", lines)
    assert main(["ingest", str(tmp_path / "t"), "--skills", str(repo / "skills")]) == 0
    capsys.readouterr()
    with _store(home) as store:
        calls = {e.session_id: e.skill_version for e in load_events(store) if e.kind == EventKind.SKILL}
    assert calls == {
        "early": "unknown",
        "before": v1,
        "after": v2,
        "feat": v3,
        "gone": "unknown",
        "ghost": "unknown",
    }


def test_a_base_directory_outside_git_gives_the_folders_content_hash(home: Path, tmp_path: Path) -> None:
    from skillreach.baselines.records import skill_version

    folder = tmp_path / "plain" / "pdf-forms"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: pdf-forms\ndescription: d\n---\n")
    lines = _session(n=1)
    lines[6] = cc_base_dir("sess-1", _t(1.1), "m", str(folder))
    _write(tmp_path / "t" / "s.jsonl", lines)
    with _store(home) as store:
        ingest_sources([tmp_path / "t"], store)
        (call,) = [e for e in load_events(store) if e.kind == EventKind.SKILL]
    assert call.skill_version == skill_version(folder)[0]
    assert call.skill_version.startswith("sha256:")


# ------------------------------------------------------------------------------------ privacy, CLI


def test_prompt_text_only_with_keep_prompts_and_then_redacted(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-ant-api03-" + "Q" * 40
    monkeypatch.setenv("ANTHROPIC_API_KEY", secret)
    lines = [cc_prompt("s", _t(0), "u1", f"deploy with key {secret} please")]
    _write(tmp_path / "a" / "s.jsonl", lines)
    _write(tmp_path / "b" / "s.jsonl", lines)
    _ingest_json(capsys, str(tmp_path / "a"))
    _ingest_json(capsys, str(tmp_path / "b"), "--keep-prompts")
    with _store(home) as store:
        by_source = {e.source.rsplit("/", 1)[-1]: e.prompt_text for e in load_events(store)}
    assert by_source["a"] is None
    assert by_source["b"] is not None
    assert by_source["b"].startswith("deploy with key ")
    assert secret not in by_source["b"]
    assert (home / "skillreach.db").read_bytes().find(secret.encode()) == -1


def test_paths_default_to_live_sources_and_none_is_one_line(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert main(["ingest"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "SKILLREACH_LIVE_SOURCES" in err
    _write(tmp_path / "a" / "s.jsonl", _session("a", n=1))
    _write(tmp_path / "b" / "s.jsonl", _session("b", n=1))
    monkeypatch.setenv("SKILLREACH_LIVE_SOURCES", os.pathsep.join([str(tmp_path / "a"), str(tmp_path / "b")]))
    out = _ingest_json(capsys)
    assert out["events_added"] == 4
    assert len(out["sources"]) == 2
    assert main(["ingest", str(tmp_path / "missing")]) == 2
    assert "missing: no such file or folder" in capsys.readouterr().err


def test_save_events_and_ingest_share_the_record() -> None:
    """The dict rows the readers build are the LiveEvent record's fields, no more, no less."""
    from skillreach.live.readers import _event as event_row

    row = event_row("src", "id", "prompt", T0, "claude-code")
    assert set(row) == set(LiveEvent.model_fields)
    LiveEvent.model_validate(row)


def test_small_blocks_read_the_same_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Lines split across read blocks, and a long line across several, are read as whole lines."""
    import skillreach.live.files as files

    lines = _session("a", n=3)
    lines.insert(4, '{"type":"user","message":{"content":"' + "y" * 3000 + '"}}')
    _write(tmp_path / "t" / "s.jsonl", lines)
    whole = Store(f"sqlite:///{tmp_path / 'a.db'}")
    ref = ingest_sources([tmp_path / "t"], whole)
    monkeypatch.setattr(files, "BLOCK", 97)
    monkeypatch.setattr(files, "MAX_LINE_BYTES", 2000)
    small = Store(f"sqlite:///{tmp_path / 'b.db'}")
    got = ingest_sources([tmp_path / "t"], small)
    assert got.events_added == ref.events_added == 6
    assert got.sources[0].skipped == {"line longer than 16 MiB": 1}
    assert got.sources[0].first_skipped["line longer than 16 MiB"].endswith("s.jsonl:5")
    assert [e.event_id for e in load_events(small)] == [e.event_id for e in load_events(whole)]
    whole.close()
    small.close()


def test_depth_told_from_the_bytes_agrees_with_the_bounded_reader() -> None:
    """The byte-level depth test the readers use before decoding agrees with skillreach._io.json's rule
    (strings holding brackets, escaped quotes and backslashes do not fool it)."""
    import orjson

    from skillreach._io.json import MAX_DEPTH, check_values
    from skillreach.live.readers import _shallow

    tricky = 'a "quoted" [[[ {{ \\ ]] } \\"' * 20
    for depth in (1, 2, MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, 200):
        for wrap in ("list", "dict"):
            value: object = tricky
            for level in range(depth - 1):
                value = [value, {"k": tricky}] if wrap == "list" or level % 2 else {"v": value, "s": "]]}}"}
            obj = {"wide": [[i] for i in range(80)], "deep": value}
            line = orjson.dumps(obj)
            expected = check_values(orjson.loads(line)) != "deep"
            assert _shallow(line) == expected, (depth, wrap)



def test_otlp_exports_of_the_wrong_shape_are_passed_over(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``scopeLogs``/``logRecords``/``scopeSpans`` that are numbers, strings or null: no event, no crash."""
    src = tmp_path / "otel"
    src.mkdir()
    lines = [
        {"resourceLogs": [{"scopeLogs": 5}]},
        {"resourceLogs": [{"scopeLogs": [{"logRecords": "x"}]}, 7]},
        {"resourceSpans": [{"resource": [], "scopeSpans": [{"spans": 3}]}]},
        {"resourceLogs": None, "resourceSpans": {"a": 1}},
    ]
    (src / "export.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    assert main(["ingest", str(src)]) == 0
    assert "Traceback" not in capsys.readouterr().err
    assert count_events(_store(home)) == 0
