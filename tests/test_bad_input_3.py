"""Hostile input, round three (issue 40): the surfaces added last round — ``ingest``, ``usage``, ``init``,
``listing``, the store tools, ``PREFECT_API_URL`` — through the command a user runs.

As in ``tests/test_bad_input_2.py``, every case of the table is a real ``.venv/bin/skillreach …``
process with a time limit, run three at a time; each asserts its exit code, that no output holds a
Python traceback, the one ``skillreach: error:`` line (exit 2) and what it names, and what must not be
printed; a case may check more after it ran (the store holds what it should, no secret in it, nothing
written outside the folders the command owns, the folders it read unchanged).

Classes (the counts are asserted at the end of the table):

- ``hangs``: a FIFO, a socket, a link to a FIFO or to ``/dev/zero`` named ``*.jsonl`` in a transcript
  folder (skipped, counted and named; the rest stored), one named as the PATH (one line), a folder tree
  1,100 deep; through ``serve``'s hourly ingest deployment too (``test_the_ingest_deployment_…``);
- ``lines``: times out of range (``0001-01-01T00:00:00+01:00``, ``9999-12-31T23:59:59-01:00``, 1969,
  2500; OTLP ``event.timestamp``, ``timeUnixNano`` and a span's start) skip their line, counted and
  named, the rest stored; NUL in a skill name, a session or prompt text kept as U+FFFD (PostgreSQL:
  ``test_postgres_…``); a later run goes on (``test_a_bad_line_stops_no_later_run``);
- ``counting``: one transcript reached through a linked folder, an overlapping PATH, a hard link, two
  live sources naming one folder: stored once;
- ``writes``: ``init`` with a dangling ``skillreach.toml`` link, links out of the repository, a FIFO or
  a link as ``.gitignore``, a file where a folder goes, an existing file: one line, nothing written
  anywhere; a non-UTF-8 ``.gitignore`` kept byte for byte;
- ``secrets``: GitHub, AWS (key id and secret key), Slack and Stripe tokens, a PEM private key, a
  password in pasted config, in prompts kept with ``--keep-prompts`` (transcripts and OTLP): masked in
  the store;
- ``guards``: ``max_cost`` NaN, infinite, negative or 0 by flag, variable and file: one line naming it;
  an agent reporting a negative, NaN, infinite or absurd cost: an errored probe
  (``test_an_agent_reporting_…``);
- ``terminal``: ESC, BEL, NUL, U+202E and C1 codes in skill names (from transcripts) and descriptions
  reach no output raw: ``usage`` (table, JSON, weeks, stale, mismatches), ``listing`` (every agent,
  ``--full``, ``--json``), ``ingest``'s summary of a file named with them, ``lint``, an error line;
- ``durations``: ``--since/--stale 1e12d``, dates out of range, ``gc --keep``, ``alerts mute --for``,
  ``alert_repeat_after``, ``live_gates.recent/reference``: one line naming the flag or setting;
- ``schema``: a store written by a newer skillreach: ``db upgrade``, ``status``, ``usage``, ``ingest``,
  ``run``, ``alerts list``, ``gc``, ``db copy``: one line saying so and what to do, the store untouched;
- ``prefect-api``: ``PREFECT_API_URL`` unreadable, garbage, a port nothing listens on, and servers that
  answer 50 MB, JSON of the wrong shape, health alone, a drip, nothing, not HTTP: ``run`` falls back
  in-process (the docs' promise) or says one line, ``status`` says what it could not read; no hang;
- ``probe-logs``: a log mixing two models without one snapshot, two snapshots, runtimes or study
  fingerprints, a model that is not a string, ``turns`` negative, fractional, text, boolean, absurd:
  ``score`` names the file, the line and the field, writes no artifact; two aliases of one snapshot are
  scored with a warning; a log over 48 MB (the columnar reader) gives the same lines
  (``test_a_large_log_…``).
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import stat
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from skillreach.example import EXAMPLE_QUERIES
from tests.helpers import hang
from tests.helpers.hostile_http import MODES, HostileServer
from tests.helpers.live_lines import (
    cc_prompt,
    cc_skill_call,
    cc_skill_result,
    iso,
    otlp_logs,
    otlp_record,
    otlp_spans,
    tool_span,
)

EXE = Path(sys.executable).with_name("skillreach")
LIMIT_S = 90.0
"""No case takes more than a few seconds; a hang never ends. Judged by progress (:mod:`tests.helpers.hang`):
a case is hung past this many CPU seconds, or this many seconds without CPU or output."""
WORKERS = 3
AT = datetime(2026, 11, 3, 12, tzinfo=UTC)
RECENT = (datetime.now(UTC) - timedelta(days=2)).replace(microsecond=0)
UNSAFE = ("\x1b", "\x07", "\x00", "\u202e", "\x9b")
"""Characters that must never reach a terminal raw."""
EVIL = "pdf\x1b]0;owned\x07\u202eevil\x00x\x9b2J"
"""A skill name as a hostile transcript writes it: a title change, a bell, a right-to-left override,
a NUL and a C1 control sequence introducer."""
GH = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
AWS_ID = "AKIA" + "Q7XWERTY12345ABC"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYSECRETKEY1"
SLACK = "xoxb-" + "123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
STRIPE = "sk_live_" + "51HbQ2eKpZ8dWmY0cRtUvXyZa"
PEM_BODY = "MIIEowIBAAKCAQEAtopSECRETpemBODYlineABCDEFGHIJKLMNOPQRSTUVWXYZ012345"
PASSWORD = "Tr0ub4dor&3horse"


@dataclass(frozen=True)
class Case:
    """One invocation: ``args`` after ``skillreach``; ``{w}`` in an argument is the world folder."""

    category: str
    name: str
    args: tuple[str, ...]
    code: int | tuple[int, ...]
    needles: tuple[str, ...] = ()
    """Must all appear in the error line (exit 2), else anywhere in the output."""
    env: dict[str, str] = field(default_factory=dict)
    limit_s: float = LIMIT_S
    absent: tuple[str, ...] = ()
    """Must appear nowhere in the output."""
    check: Callable[[Path, Result], None] | None = None
    """More to assert once it ran (the world folder, the result)."""
    unchanged: tuple[str, ...] = ()
    """Folders (relative to the world) whose tree the command must leave as it was."""


@dataclass
class Result:
    code: int | None
    stdout: str
    stderr: str
    seconds: float
    hung: bool = False
    why: str = ""
    """Why it was judged hung (``spinning``, ``blocked``, ``wall``: :mod:`tests.helpers.hang`)."""
    cpu_s: float = 0.0


W = "{w}"


def _home(root: Path, name: str) -> Path:
    return root / "homes" / name


def _events(home: Path, where: str = "") -> list[dict[str, Any]]:
    db = home / "skillreach.db"
    if not db.is_file():
        return []
    with sqlite3.connect(db) as conn:
        conn.row_factory = sqlite3.Row
        return [dict(r) for r in conn.execute(f"SELECT * FROM live_events {where} ORDER BY id")]


def _store_bytes(home: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(home.glob("skillreach.db*")) if p.is_file())


def _tree(top: Path) -> list[tuple[str, str, int]]:
    """What a folder holds: each entry's relative path, kind and (files) size, links not followed."""
    out: list[tuple[str, str, int]] = []
    for dirpath, dirs, files in os.walk(top):
        for name in sorted(dirs + files):
            p = Path(dirpath, name)
            st = p.lstat()
            kind = (
                "link:" + os.readlink(p)
                if stat.S_ISLNK(st.st_mode)
                else "dir"
                if stat.S_ISDIR(st.st_mode)
                else "file"
                if stat.S_ISREG(st.st_mode)
                else "special"
            )
            out.append((str(p.relative_to(top)), kind, st.st_size if kind == "file" else 0))
    return sorted(out)


_DEEP: list[Path] = []
"""Trees :func:`_deep_tree` made (removed by :func:`_remove_deep_trees`: ``rmtree`` recurses once a
level, past Python's limit)."""


def _deep_tree(top: Path, levels: int, transcript: str) -> None:
    """``top/d/d/…/d/s.jsonl``, ``levels`` deep, made one level at a time relative to the last."""
    top.mkdir(parents=True)
    _DEEP.append(top)
    fd = os.open(top, os.O_RDONLY)
    try:
        for _ in range(levels):
            os.mkdir("d", dir_fd=fd)
            below = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = below
        out = os.open("s.jsonl", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(out, transcript.encode())
        os.close(out)
    finally:
        os.close(fd)


def _remove_deep_trees() -> None:
    while _DEEP:
        top = _DEEP.pop()
        if not top.exists():
            continue
        fds = [os.open(top, os.O_RDONLY)]
        try:
            while True:
                try:
                    fds.append(os.open("d", os.O_RDONLY, dir_fd=fds[-1]))
                except FileNotFoundError:
                    break
            for name in os.listdir(fds[-1]):
                os.unlink(name, dir_fd=fds[-1])
            while len(fds) > 1:
                os.close(fds.pop())
                os.rmdir("d", dir_fd=fds[-1])
        finally:
            for fd in fds:
                os.close(fd)


def _write(path: Path, lines: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


GOOD = 3
"""Events in :func:`_good`'s lines."""


def _good(tag: str, at: datetime = AT) -> list[str]:
    """Four lines, :data:`GOOD` events: a prompt, a skill call, its result (which completes the call),
    another prompt."""
    return [
        cc_prompt(f"s-{tag}", at, f"{tag}-p1", "Summarise the failing deploy logs"),
        cc_skill_call(f"s-{tag}", at, f"{tag}-a1", f"{tag}-c1", "log-search"),
        cc_skill_result(f"s-{tag}", at, f"{tag}-r1", f"{tag}-c1", "log-search"),
        cc_prompt(f"s-{tag}", at + timedelta(minutes=5), f"{tag}-p2", "And the one before it?"),
    ]


def _stamped(line: str, when: str) -> str:
    return line.replace(iso(AT), when)


# ----------------------------------------------------------------------------------------- the world


def _ingest_case(
    root: Path,
    add: Callable[[Case], None],
    category: str,
    name: str,
    paths: list[str],
    *,
    stored: int | None,
    needles: tuple[str, ...] = (),
    code: int = 0,
    extra: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
    more: Callable[[list[dict[str, Any]]], None] | None = None,
    unchanged: tuple[str, ...] = (),
) -> None:
    home = _home(root, name)

    def check(root: Path, res: Result) -> None:
        if stored is not None:
            got = _events(home)
            assert len(got) == stored, f"{name}: {len(got)} events stored, not {stored}: {got[:3]}"
            if more is not None:
                more(got)

    add(
        Case(
            category,
            name,
            ("ingest", *paths, *extra),
            code,
            needles,
            env={"SKILLREACH_HOME": str(home), **(env or {})},
            check=check,
            unchanged=unchanged,
        )
    )


def _hangs(root: Path, add: Callable[[Case], None]) -> None:
    t = root / "t"
    folder = t / "fifo"
    _write(folder / "a.jsonl", _good("fifo"))
    os.mkfifo(folder / "b.jsonl")  # no writer: an open() waits for ever
    _ingest_case(
        root,
        add,
        "hangs",
        "ingest-fifo-in-folder",
        [str(folder)],
        stored=GOOD,
        needles=("skipped 1 file(s): not a regular file", "b.jsonl"),
        unchanged=("t/fifo",),
    )
    _ingest_case(
        root,
        add,
        "hangs",
        "ingest-fifo-json",
        [str(folder)],
        stored=GOOD,
        extra=("--json",),
        needles=('"skipped_files": 1', "b.jsonl"),
    )
    _ingest_case(
        root,
        add,
        "hangs",
        "ingest-fifo-explicit-path",
        [str(folder / "b.jsonl")],
        stored=None,
        code=2,
        needles=("b.jsonl", "not a regular file or folder"),
    )
    _ingest_case(
        root,
        add,
        "hangs",
        "ingest-fifo-live-sources",
        [],
        stored=GOOD,
        env={"SKILLREACH_LIVE_SOURCES": str(folder)},
        needles=("not a regular file",),
    )
    sock_dir = t / "socket"
    _write(sock_dir / "a.jsonl", _good("sock"))
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(sock_dir / "s.ndjson"))  # the socket file stays when the socket is closed
    s.close()
    _ingest_case(
        root,
        add,
        "hangs",
        "ingest-socket-file",
        [str(sock_dir)],
        stored=GOOD,
        needles=("not a regular file", "s.ndjson"),
    )
    linked = t / "linked"
    _write(linked / "a.jsonl", _good("linked"))
    os.mkfifo(t / "elsewhere.fifo")
    (linked / "b.jsonl").symlink_to(t / "elsewhere.fifo")
    (linked / "zero.jsonl").symlink_to("/dev/zero")  # endless: read, it would fill the memory
    (linked / "random.json").symlink_to("/dev/urandom")
    (linked / "gone.jsonl").symlink_to(t / "no-such-file")
    _ingest_case(
        root,
        add,
        "hangs",
        "ingest-links-to-fifo-and-devices",
        [str(linked)],
        stored=GOOD,
        needles=("skipped 3 file(s): not a regular file", "skipped 1 file(s): unreadable"),
    )
    deep = t / "deep"
    _deep_tree(deep, 1100, "\n".join(_good("deep")) + "\n")
    _ingest_case(
        root,
        add,
        "hangs",
        "ingest-tree-1100-deep",
        [str(deep)],
        stored=GOOD,
        needles=(f"{GOOD} event(s) added",),
    )


def _lines(root: Path, add: Callable[[Case], None]) -> None:
    t = root / "l"
    for label, when in (
        ("year-1-plus-one-hour", "0001-01-01T00:00:00+01:00"),
        ("year-9999-minus-one-hour", "9999-12-31T23:59:59-01:00"),
        ("before-1970", "1969-12-31T23:59:59Z"),
        ("year-2500", "2500-01-01T00:00:00Z"),
    ):
        good = _good(label)
        bad = _stamped(cc_prompt(f"s-{label}", AT, f"{label}-bad", "a prompt with a broken clock"), when)
        bad_call = _stamped(cc_skill_call(f"s-{label}", AT, f"{label}-b2", f"{label}-cb", "pdf"), when)
        path = _write(t / label / "t.jsonl", [good[0], bad, *good[1:], bad_call])
        _ingest_case(
            root,
            add,
            "lines",
            f"ingest-time-{label}",
            [str(path.parent)],
            stored=GOOD,
            needles=("skipped 2 line(s): timestamp out of range", "t.jsonl:2"),
            more=_all_ids_good,
        )
    # OTLP: event.timestamp alone, out of range (no timeUnixNano); timeUnixNano past 2200; a span
    rec = otlp_record("claude_code.user_prompt", AT, {"prompt.id": "op1", "session.id": "os"})
    ok = otlp_record("claude_code.user_prompt", AT, {"prompt.id": "op2", "session.id": "os"})
    for key in ("timeUnixNano", "observedTimeUnixNano"):
        del rec[key]
    for a in rec["attributes"]:
        if a["key"] == "event.timestamp":
            a["value"] = {"stringValue": "9999-12-31T23:59:59-01:00"}
    late = otlp_record("claude_code.user_prompt", AT, {"prompt.id": "op3", "session.id": "os"})
    late["timeUnixNano"] = str(2**63)  # 2262: past the latest time an event may have
    span = tool_span("0123456789abcdef", AT, "activate_skill", {"skill_name": "pdf"})
    span["startTimeUnixNano"] = str(2**63 - 1)
    good_span = tool_span("fedcba9876543210", AT, "activate_skill", {"skill_name": "pdf"})
    path = _write(
        t / "otlp" / "otlp.jsonl",
        [otlp_logs([ok]), otlp_logs([rec]), otlp_logs([late]), otlp_spans([span]), otlp_spans([good_span])],
    )
    _ingest_case(
        root,
        add,
        "lines",
        "ingest-otlp-times-out-of-range",
        [str(path)],
        stored=2,
        needles=("skipped 3 line(s): timestamp out of range", "otlp.jsonl:2"),
    )
    nul = t / "nul"
    _write(
        nul / "t.jsonl",
        [
            cc_prompt("s-nul\u0000x", AT, "nul-p1", "a prompt \u0000 with a NUL"),
            cc_skill_call("s-nul", AT, "nul-a1", "nul-c1", "bad\u0000name"),
            *_good("nul2"),
        ],
    )

    def nul_kept(ev: list[dict[str, Any]]) -> None:
        assert {e["skill"] for e in ev if e["kind"] == "skill"} == {"bad\ufffdname", "log-search"}
        assert any(e["session_id"] == "s-nul\ufffdx" for e in ev)
        assert [e["prompt_text"] for e in ev if e["event_id"] == "nul-p1"] == ["a prompt \ufffd with a NUL"]

    _ingest_case(
        root,
        add,
        "lines",
        "ingest-nul-in-names-and-text",
        [str(nul)],
        stored=2 + GOOD,
        extra=("--keep-prompts",),
        needles=("cleaned 2 line(s): NUL characters",),
        more=nul_kept,
    )


def _all_ids_good(ev: list[dict[str, Any]]) -> None:
    assert all("bad" not in e["event_id"] and "-b2" not in e["event_id"] for e in ev), ev


def _counting(root: Path, add: Callable[[Case], None]) -> None:
    c = root / "c"
    real = c / "projects"
    _write(real / "app" / "s1.jsonl", _good("c1"))
    _write(real / "web" / "s2.jsonl", _good("c2"))
    (c / "projects-link").symlink_to(real)
    _ingest_case(
        root,
        add,
        "counting",
        "ingest-folder-and-its-link",
        [str(real), str(c / "projects-link")],
        stored=2 * GOOD,
        needles=("skipped 2 file(s): the same file reached again",),
    )
    _ingest_case(
        root,
        add,
        "counting",
        "ingest-overlapping-paths",
        [str(real), str(real / "app")],
        stored=2 * GOOD,
        needles=("the same file reached again",),
    )
    _ingest_case(
        root,
        add,
        "counting",
        "ingest-link-to-a-subfolder",
        [str(c / "projects-link" / "app"), str(real)],
        stored=2 * GOOD,
        needles=("the same file reached again",),
    )
    hard = c / "hard"
    _write(hard / "a.jsonl", _good("hard"))
    os.link(hard / "a.jsonl", hard / "b.jsonl")
    _ingest_case(
        root, add, "counting", "ingest-hard-link", [str(hard)], stored=GOOD, needles=("reached again",)
    )
    _ingest_case(
        root,
        add,
        "counting",
        "ingest-two-live-sources-one-folder",
        [],
        stored=2 * GOOD,
        env={"SKILLREACH_LIVE_SOURCES": f"{real}{os.pathsep}{c / 'projects-link'}"},
        needles=("reached again",),
    )


def _repo(root: Path, name: str) -> Path:
    repo = root / "w" / name / "repo"
    for skill, what in (("log-search", "Search logs"), ("pdf-documents", "Fill PDF forms")):
        d = repo / "skills" / skill
        d.mkdir(parents=True)
        (d / "SKILL.md").write_text(
            f"---\nname: {skill}\ndescription: {what} when the user asks.\n---\n\n# {skill}\n",
            encoding="utf-8",
        )
    (root / "w" / name / "outside").mkdir()
    return repo


def _writes(root: Path, add: Callable[[Case], None]) -> None:
    repo = ""

    def case(name: str, code: int, needles: tuple[str, ...], *extra: str, check: Any = None) -> None:
        """``init`` of the repository made last (``w/<repo>/repo``; ``w/<repo>/outside`` beside it)."""
        add(
            Case(
                "writes",
                name,
                ("init", str(root / "w" / repo / "repo"), *extra),
                code,
                needles,
                unchanged=() if code == 0 else (f"w/{repo}",),
                check=check,
            )
        )

    r = _repo(root, "dangling-toml")
    repo = "dangling-toml"
    (r / "skillreach.toml").symlink_to("../outside/planted.toml")
    case("init-dangling-toml-link", 2, ("skillreach.toml", "a link"))
    case("init-dangling-toml-link-force", 2, ("skillreach.toml", "a link"), "--force")
    r = _repo(root, "toml-link-out")
    repo = "toml-link-out"
    (root / "w" / "toml-link-out" / "outside" / "theirs.toml").write_text("mine = 1\n", encoding="utf-8")
    (r / "skillreach.toml").symlink_to("../outside/theirs.toml")
    case("init-toml-link-to-a-file-outside-force", 2, ("skillreach.toml", "a link"), "--force")
    r = _repo(root, "evals-out")
    repo = "evals-out"
    (r / "evals").symlink_to("../outside")
    case("init-evals-link-out", 2, ("evals", "a link out of"))
    r = _repo(root, "github-out")
    repo = "github-out"
    (r / ".github").symlink_to("../outside")
    case("init-github-link-out", 2, (".github", "a link out of"))
    r = _repo(root, "workflows-out")
    repo = "workflows-out"
    (r / ".github").mkdir()
    (r / ".github" / "workflows").symlink_to("../../outside")
    case("init-workflows-link-out", 2, ("workflows", "a link out of"))
    r = _repo(root, "gitignore-link")
    repo = "gitignore-link"
    (r / ".gitignore").symlink_to("../outside/gi")
    case("init-gitignore-dangling-link", 2, (".gitignore", "a link"))
    r = _repo(root, "gitignore-fifo")
    repo = "gitignore-fifo"
    os.mkfifo(r / ".gitignore")
    case("init-gitignore-fifo", 2, (".gitignore", "not a regular file"))
    r = _repo(root, "evals-file")
    repo = "evals-file"
    (r / "evals").write_text("not a folder\n", encoding="utf-8")
    case("init-evals-is-a-file", 2, ("evals", "not a folder", "nothing was written"))
    r = _repo(root, "one-exists")
    repo = "one-exists"
    (r / ".github" / "workflows").mkdir(parents=True)
    (r / ".github" / "workflows" / "skillreach.yml").write_text("name: mine\n", encoding="utf-8")
    case("init-one-file-exists", 2, ("skillreach.yml", "already there, nothing written"))
    r = _repo(root, "latin1")
    repo = "latin1"
    raw = b"# caf\xe9 \xff\xfe\nnode_modules"
    (r / ".gitignore").write_bytes(raw)

    def latin1_kept(root: Path, res: Result) -> None:
        data = (root / "w" / "latin1" / "repo" / ".gitignore").read_bytes()  # the repository "latin1"
        assert data == raw + b"\nruns/\n.skillreach/\n", data
        assert (root / "w" / "latin1" / "repo" / "skillreach.toml").is_file()
        assert _tree(root / "w" / "latin1" / "outside") == []

    case("init-gitignore-not-utf8", 0, ("added runs/, .skillreach/ to .gitignore",), check=latin1_kept)


def _secrets(root: Path, add: Callable[[Case], None]) -> None:
    s = root / "s"
    pem = f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n{PEM_BODY[::-1]}\n-----END RSA PRIVATE KEY-----"
    prompts = {
        "github-token": (f"My token is {GH}, why does the push fail?", GH),
        "aws-key-id": (f"The key {AWS_ID} gets AccessDenied on s3", AWS_ID),
        "aws-secret-key": (f'aws_secret_access_key = "{AWS_SECRET}" fails, why?', AWS_SECRET),
        "aws-credentials-file": (
            f"[default]\naws_access_key_id = {AWS_ID}\naws_secret_access_key = {AWS_SECRET}\nwhy?",
            AWS_SECRET,
        ),
        "slack-token": (f"Post with {SLACK} to #ops", SLACK),
        "stripe-key": (f"Refund with {STRIPE} please", STRIPE),
        "pem-private-key": (f"Is this key valid?\n{pem}\nthanks", PEM_BODY),
        "password-in-config": (f"db:\n  user: app\n  password: {PASSWORD}\nwhy no connect?", PASSWORD),
    }
    for label, (text, secret) in prompts.items():
        home = _home(root, f"ingest-secret-{label}")
        path = _write(s / label / "t.jsonl", [cc_prompt("s", AT, f"{label}-p", text)])

        def check(root: Path, res: Result, home: Path = home, secret: str = secret) -> None:
            stored = _events(home)
            assert len(stored) == 1, stored
            assert stored[0]["prompt_text"], stored
            assert "***" in stored[0]["prompt_text"], stored[0]["prompt_text"]
            for part in {secret, secret[4:20], secret[-12:]}:
                assert part.encode() not in _store_bytes(home), f"{part!r} stored"

        add(
            Case(
                "secrets",
                f"ingest-secret-{label}",
                ("ingest", str(path.parent), "--keep-prompts"),
                0,
                ("1 event(s) added",),
                env={"SKILLREACH_HOME": str(home)},
                absent=(secret,),
                check=check,
            )
        )
    home = _home(root, "ingest-secret-otlp-prompt")
    rec = otlp_record(
        "claude_code.user_prompt", AT, {"prompt.id": "sp", "session.id": "s", "prompt": f"use {GH}"}
    )
    path = _write(s / "otlp" / "o.jsonl", [otlp_logs([rec])])

    def otlp_check(root: Path, res: Result) -> None:
        assert GH[4:20].encode() not in _store_bytes(home)
        assert [e["prompt_text"] for e in _events(home)] == ["use ***"]

    add(
        Case(
            "secrets",
            "ingest-secret-otlp-prompt",
            ("ingest", str(path), "--keep-prompts"),
            0,
            ("1 event(s) added",),
            env={"SKILLREACH_HOME": str(home)},
            check=otlp_check,
        )
    )


def _guards(root: Path, add: Callable[[Case], None]) -> None:
    g = root / "g"
    g.mkdir()
    for label, value, needle in (
        ("nan", "nan", "finite"),
        ("inf", "inf", "finite"),
        ("minus-inf", "-inf", "max_cost"),
        ("negative", "-1", "greater than 0"),
        ("zero", "0", "greater than 0"),
    ):
        add(
            Case(
                "guards",
                f"run-max-cost-flag-{label}",
                ("run", "--max-cost", value, "--out", str(g / label)),
                2,
                ("max_cost", needle),
                check=_no_folder(g / label),
            )
        )
    for label, value in (("nan", "nan"), ("inf", "inf"), ("negative", "-0.5")):
        add(
            Case(
                "guards",
                f"run-max-cost-env-{label}",
                ("run", "--out", str(g / f"env-{label}")),
                2,
                ("SKILLREACH_MAX_COST_USD", "max_cost_usd"),
                env={"SKILLREACH_MAX_COST_USD": value},
                check=_no_folder(g / f"env-{label}"),
            )
        )
    for key in ("max_cost", "max_cost_usd"):
        for label, value in (("nan", "nan"), ("inf", "inf")):
            cfg = g / f"{key}-{label}.toml"
            cfg.write_text(f"{key} = {value}\n", encoding="utf-8")
            add(
                Case(
                    "guards",
                    f"run-config-{key}-{label}",
                    ("run", "--config", str(cfg), "--out", str(g / cfg.stem)),
                    2,
                    (cfg.name, key, "finite"),
                    check=_no_folder(g / cfg.stem),
                )
            )


def _no_folder(path: Path) -> Callable[[Path, Result], None]:
    def check(root: Path, res: Result) -> None:
        assert not path.exists() or not any(path.iterdir()), f"{path} written by a refused run"

    return check


def _terminal_store(home: Path, root: Path) -> None:
    """Live events whose skill names carry control characters, ingested through the core reader."""
    from skillreach.live.ingest import ingest_sources
    from skillreach.store import Store

    src = root / "x" / "transcripts"
    lines = []
    for i in range(3):
        at = RECENT - timedelta(hours=i)
        lines += [
            cc_prompt("sx", at, f"x-p{i}", "do it"),
            cc_skill_call("sx", at, f"x-a{i}", f"x-c{i}", EVIL),
            cc_skill_result("sx", at, f"x-r{i}", f"x-c{i}", "ran\x1b[2Jother\u202e"),
        ]
    _write(src / "t.jsonl", lines)
    home.mkdir(parents=True)
    with Store(f"sqlite:///{home / 'skillreach.db'}") as store:
        ingest_sources([src], store)


def _terminal(root: Path, add: Callable[[Case], None]) -> None:
    home = _home(root, "terminal-store")
    x = root / "x"
    skills = x / "skills"
    evil = (
        "Open \\e]0;pwned\\a files \\u202egnp.exe with \\x00 and \\x9b2J then \\e[2J clear "
        + "padding words " * 30
    )
    for name in ("evil", "fine"):
        d = skills / name
        d.mkdir(parents=True)
        desc = evil if name == "evil" else "A fine skill for reading logs."
        (d / "SKILL.md").write_text(
            f'---\nname: {name}\ndescription: "{desc}"\n---\n\nBody\n', encoding="utf-8"
        )
    env = {"SKILLREACH_HOME": str(home)}
    for label, extra in (
        ("table", ()),
        ("json", ("--json",)),
        ("week", ("--by", "week")),
        ("stale", ("--skills", str(skills), "--stale", "30d")),
    ):
        add(Case("terminal", f"usage-{label}", ("usage", *extra), 0, ("pdf",), env=env))
    for label, extra, needle in (
        ("codex", ("--agent", "codex"), "codex lists all 2 skills in full"),
        ("codex-small-window", ("--agent", "codex", "--context-window", "2000"), "evil"),
        ("claude-code-small", ("--agent", "claude-code", "--context-window", "8000"), "by name alone"),
        ("gemini-full", ("--agent", "gemini-cli", "--full"), "evil"),
        ("codex-full", ("--agent", "codex", "--full"), "evil"),
        ("json", ("--json",), "evil"),
    ):
        add(Case("terminal", f"listing-{label}", ("listing", str(skills), *extra), 0, (needle,)))
    add(Case("terminal", "lint-control-characters", ("lint", str(skills)), (0, 1), ("evil",)))
    named = x / "named"
    fname = "t\x1b]0;title\x07\u202e.jsonl"
    _write(named / fname, ["not json at all", *_good("named")])
    add(
        Case(
            "terminal",
            "ingest-a-file-named-with-escapes",
            ("ingest", str(named)),
            0,
            ("not a JSON object",),
            env={"SKILLREACH_HOME": str(_home(root, "terminal-named"))},
        )
    )
    add(
        Case(
            "terminal",
            "ingest-error-line-names-an-escape",
            ("ingest", str(x / "gone\x1b[2J\u202e")),
            2,
            ("no such file or folder",),
            env={"SKILLREACH_HOME": str(_home(root, "terminal-gone"))},
        )
    )


def _durations(root: Path, add: Callable[[Case], None]) -> None:
    d = root / "d"
    d.mkdir()
    for label, args, needles in (
        ("usage-since-1e12d", ("usage", "--since", "1e12d"), ("--since", "hundred years")),
        ("usage-since-1e400d", ("usage", "--since", "1e400d"), ("--since", "hundred years")),
        ("usage-since-5000-digits", ("usage", "--since", "9" * 5000 + "d"), ("--since",)),
        ("usage-until-year-1", ("usage", "--until", "0001-01-01"), ("--until", "out of range")),
        (
            "usage-until-9999-minus-1h",
            ("usage", "--until", "9999-12-31T23:59:59-01:00"),
            ("--until", "out of range"),
        ),
        (
            "usage-since-year-0-utc",
            ("usage", "--since", "0001-01-01T00:00:00+01:00"),
            ("--since", "out of range"),
        ),
        (
            "usage-stale-1e12d",
            ("usage", "--skills", str(root / "x" / "skills"), "--stale", "1e12d"),
            ("--stale", "hundred years"),
        ),
        ("gc-keep-1e12d", ("gc", "--keep", "1e12d", "--runs", str(d / "runs")), ("--keep", "hundred years")),
        ("gc-keep-nan", ("gc", "--keep", "nan", "--runs", str(d / "runs")), ("--keep", "not a duration")),
        ("mute-for-1e12d", ("alerts", "mute", "nightly:pdf", "--for", "1e12d"), ("--for", "hundred years")),
        ("mute-for-inf", ("alerts", "mute", "nightly:pdf", "--for", "inf"), ("--for", "hundred years")),
    ):
        add(Case("durations", label, args, 2, needles))
    add(
        Case(
            "durations",
            "alert-repeat-after-env-1e12d",
            ("alerts", "list"),
            2,
            ("SKILLREACH_ALERT_REPEAT_AFTER", "alert_repeat_after", "hundred years"),
            env={"SKILLREACH_ALERT_REPEAT_AFTER": "1e12d"},
        )
    )
    add(
        Case(
            "durations",
            "alert-repeat-after-config-1e12d",
            ("config", "show", "--config", str(_toml(d, "r", 'alert_repeat_after = "1e12d"'))),
            2,
            ("r.toml", "alert_repeat_after", "hundred years"),
        )
    )
    add(
        Case(
            "durations",
            "live-gates-recent-config-1e12d",
            ("usage", "--gate", "--config", str(_toml(d, "g", '[live_gates]\nrecent = "1e12d"'))),
            2,
            ("g.toml", "live_gates.recent", "hundred years"),
        )
    )
    add(
        Case(
            "durations",
            "live-gates-reference-env-1e12d",
            ("usage", "--gate"),
            2,
            ("SKILLREACH_LIVE_GATES", "live_gates.reference", "hundred years"),
            env={"SKILLREACH_LIVE_GATES": json.dumps({"reference": "1e12d"})},
        )
    )
    add(
        Case(
            "durations",
            "live-gates-longest-windows-at-1970",
            (
                "usage",
                "--gate",
                "--until",
                "1971-01-01",
                "--config",
                str(_toml(d, "longest", '[live_gates]\nrecent = "36500d"\nreference = "36500d"')),
            ),
            0,
            ("live gate: no skill past it",),
        )
    )


def _toml(folder: Path, name: str, text: str) -> Path:
    path = folder / f"{name}.toml"
    path.write_text(text + "\n", encoding="utf-8")
    return path


NEWER = "0999"


def newer_store(home: Path) -> Path:
    """A SQLite store whose schema revision is one this skillreach does not have."""
    from skillreach.store import Store

    home.mkdir(parents=True, exist_ok=True)
    db = home / "skillreach.db"
    Store(f"sqlite:///{db}").close()
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE alembic_version SET version_num = ?", (NEWER,))
    return db


def _schema(root: Path, add: Callable[[Case], None]) -> None:
    home = _home(root, "schema-newer")
    db = newer_store(home)
    env = {"SKILLREACH_HOME": str(home)}
    needles = ("schema 0999", "newer than this skillreach", "upgrade skillreach")

    def untouched(root: Path, res: Result) -> None:
        with sqlite3.connect(db) as conn:
            assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [(NEWER,)]

    (root / "sc").mkdir()
    _write(root / "sc" / "t" / "a.jsonl", _good("schema"))
    for label, args in (
        ("db-upgrade", ("db", "upgrade")),
        ("db-upgrade-url", ("db", "upgrade", f"sqlite:///{db}")),
        ("usage", ("usage",)),
        ("ingest", ("ingest", str(root / "sc" / "t"))),
        ("run", ("run", "--out", str(root / "sc" / "run"))),
        ("alerts-list", ("alerts", "list")),
        ("gc", ("gc", "--keep", "30d", "--runs", str(root / "sc" / "runs"))),
        ("db-copy", ("db", "copy", f"sqlite:///{db}", f"sqlite:///{root / 'sc' / 'copy.db'}")),
    ):
        add(Case("schema", f"newer-store-{label}", args, 2, needles, env=env, check=untouched))
    add(
        Case(
            "schema",
            "newer-store-status",
            ("status",),
            0,
            (f"store: the store sqlite:///{db} has schema 0999", "upgrade skillreach"),
            env=env,
            check=untouched,
        )
    )


def _prefect_api(root: Path, add: Callable[[Case], None]) -> None:
    p = root / "p"
    p.mkdir()
    fallback = ("no server answers there: running in-process",)
    for label, url, run_code, run_needles, status_needles in (
        ("garbage", "garbage", 0, fallback, ("no answer at",)),
        ("ipv6-unclosed", "http://[::1", 2, ("PREFECT_API_URL", "Prefect cannot read it"), ("no answer at",)),
        (
            "port-out-of-range",
            "http://127.0.0.1:99999999/api",
            2,
            ("PREFECT_API_URL", "Port out of range"),
            ("no answer at",),
        ),
        ("ftp", "ftp://127.0.0.1/api", 0, fallback, ("no answer at",)),
        ("nothing-listens", "http://127.0.0.1:9/api", 0, fallback, ("no answer at",)),
    ):
        add(
            Case(
                "prefect-api",
                f"run-url-{label}",
                ("run", "--out", str(p / label)),
                run_code,
                run_needles,
                env={"PREFECT_API_URL": url},
            )
        )
        add(
            Case(
                "prefect-api",
                f"status-url-{label}",
                ("status",),
                0,
                status_needles,
                env={"PREFECT_API_URL": url},
            )
        )
    for mode in MODES:
        reason = {
            "big": "more than",
            "wrong-shape": "another shape",
            "health-only": "another shape",
            "drip": "no whole answer",
            "silent": "no whole answer",
            "not-http": "no answer at",
        }[mode]
        add(
            Case(
                "prefect-api",
                f"run-server-{mode}",
                ("run", "--out", str(p / mode)),
                0,
                fallback,
                env={"PREFECT_API_URL": f"{{hostile:{mode}}}"},
                limit_s=60,
            )
        )
        status_needle = (
            ("healthy at", "cannot read 'skillreach'") if mode == "health-only" else ("no answer at", reason)
        )
        add(
            Case(
                "prefect-api",
                f"status-server-{mode}",
                ("status",),
                0,
                status_needle,
                env={"PREFECT_API_URL": f"{{hostile:{mode}}}"},
                limit_s=60,
            )
        )


def _probe_rows(n: int | None = None, **each: Any) -> list[dict[str, Any]]:
    """Lines of a probe log of the bundled example's queries (the first ``n``), each with ``each``."""
    queries = json.loads(EXAMPLE_QUERIES.read_text(encoding="utf-8"))["queries"][:n]
    return [
        {
            "query_id": q["id"],
            "attempt": 1,
            "invoked": [q["expected_skill"]] if q.get("expected_skill") else [],
            "runtime": "keyword",
            **each,
        }
        for q in queries
    ]


def _log(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in rows))
    return path


def _edited(rows: list[dict[str, Any]], at: int, **fields: Any) -> list[dict[str, Any]]:
    """``rows`` with line ``at`` (1-based) and every line after it given ``fields``."""
    return [{**r, **fields} if i + 1 >= at else r for i, r in enumerate(rows)]


def _no_artifact(folder: Path) -> Callable[[Path, Result], None]:
    def check(root: Path, res: Result) -> None:
        assert not (folder / "artifact.json").exists(), f"{folder}: an artifact of a refused log"

    return check


def _probe_logs(root: Path, add: Callable[[Case], None]) -> None:
    """A probe log mixing models, snapshots, runtimes or studies, or with impossible ``turns``: ``score``
    refuses it in one line naming the file, the line where it goes wrong and the field."""
    p = root / "probe-logs"
    base = _probe_rows(model="m-a", fingerprint="sha256:" + "a" * 64)
    bad: list[tuple[str, list[dict[str, Any]], tuple[str, ...]]] = [
        (
            "two-models",
            _edited(base, 6, model="m-b"),
            (":6:", "'model'", "'m-b'", "line 1", "--out per model"),
        ),
        (
            "two-models-no-fingerprint",
            _edited(_probe_rows(model="m-a"), 40, model="m-b"),
            (":40:", "'model'", "'m-a'", "score one"),
        ),
        (
            "a-model-from-line-three",
            _edited(_probe_rows(), 3, model="m-a")[:9] + _edited(_probe_rows(), 1, model="m-b")[9:],
            (":10:", "'model'", "'m-b'", "line 3"),
        ),
        (
            "two-snapshots",
            _edited(_probe_rows(model="m", resolved_model="m-1"), 8, resolved_model="m-2"),
            (":8:", "'resolved_model'", "'m-2'", "line 1", "snapshot"),
        ),
        (
            "two-models-two-snapshots",
            _edited(
                _probe_rows(model="m-a", resolved_model="m-a-1"), 12, model="m-b", resolved_model="m-b-1"
            ),
            (":12:", "'resolved_model'", "'m-b-1'"),
        ),
        ("two-runtimes", _edited(base, 4, runtime="claude-code"), (":4:", "'runtime'", "'claude-code'")),
        ("two-fingerprints", _edited(base, 10, fingerprint="sha256:" + "b" * 64), (":10:", "'fingerprint'")),
        ("model-not-a-string", _edited(base, 7, model=5), (":7:", "'model'", "must be a string")),
        ("turns-negative", _edited(base, 5, turns=-3)[:6] + base[6:], (":5:", "'turns'", "-3")),
        ("turns-fraction", _edited(base, 5, turns=2.5)[:5] + base[5:], (":5:", "'turns'", "2.5")),
        ("turns-text", _edited(base, 5, turns="3")[:5] + base[5:], (":5:", "'turns'", "'3'")),
        ("turns-true", _edited(base, 5, turns=True)[:5] + base[5:], (":5:", "'turns'", "True")),
        ("turns-absurd", _edited(base, 5, turns=10**12)[:5] + base[5:], (":5:", "'turns'", "1,000,000")),
        ("turns-past-int64", _edited(base, 5, turns=2**70)[:5] + base[5:], (":5:", "'turns'")),
    ]
    for name, rows, needles in bad:
        log = _log(p / f"{name}.jsonl", rows)
        add(
            Case(
                "probe-logs",
                f"score-{name}",
                ("score", "--queries", str(EXAMPLE_QUERIES), "--probes", str(log), "--out", f"{p / name}/"),
                2,
                (f"{name}.jsonl", *needles),
                check=_no_artifact(p / name),
            )
        )
    # two names of one snapshot (an alias and its full name share a study's fingerprint and folder):
    # one model measured, scored with a warning
    aliases = _edited(_probe_rows(model="sonnet", resolved_model="sonnet-1"), 30, model="sonnet-latest")
    log = _log(p / "aliases.jsonl", aliases)
    add(
        Case(
            "probe-logs",
            "score-two-aliases-of-one-snapshot",
            ("score", "--queries", str(EXAMPLE_QUERIES), "--probes", str(log), "--out", f"{p / 'aliases'}/"),
            0,
            ("2 different models",),
        )
    )


def build_world(root: Path) -> list[Case]:
    cases: list[Case] = []
    for part in (
        _hangs,
        _lines,
        _counting,
        _writes,
        _secrets,
        _guards,
        _terminal,
        _durations,
        _schema,
        _prefect_api,
        _probe_logs,
    ):
        part(root, cases.append)
    return cases


# -------------------------------------------------------------------------------------------- runner


def _env(root: Path, extra: dict[str, str]) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SKILLREACH_", "ANTHROPIC_", "OPENAI_", "PREFECT_API", "GITHUB_"))
    }
    env.update(
        SKILLREACH_HOME=str(root / "home"),
        PREFECT_HOME=str(root / "prefect"),
        COLUMNS="80",
        NO_COLOR="1",
        GITHUB_STEP_SUMMARY="",
    )
    env.update(extra)
    return env


def _run(case: Case, root: Path, servers: dict[str, str]) -> Result:
    """The case's command, judged hung by its progress (:mod:`tests.helpers.hang`: ``limit_s`` of CPU,
    or of wall time without CPU or output), not by a wall limit a loaded machine would trip."""
    args = [str(EXE), *(a.replace(W, str(root)) for a in case.args)]
    env = {k: (servers[v[9:-1]] if v.startswith("{hostile:") else v) for k, v in case.env.items()}
    res = hang.run(args, limit_s=case.limit_s, cwd=root / "cwd", env=_env(root, env))
    return Result(res.code, res.stdout, res.stderr, res.seconds, hung=res.hung, why=res.why, cpu_s=res.cpu_s)


def _index() -> list[tuple[str, str]]:
    import shutil
    import tempfile

    tmp = tempfile.mkdtemp()
    try:
        return [(c.name, c.category) for c in build_world(Path(tmp))]
    finally:
        _remove_deep_trees()
        shutil.rmtree(tmp, ignore_errors=True)


_CASE_INDEX = _index()


@pytest.fixture(scope="module")
def world(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[tuple[Path, dict[str, Case], dict[str, Result], dict[str, Any]]]:
    root = tmp_path_factory.mktemp("bad-input-3")
    (root / "cwd").mkdir()
    selected = {
        item.callspec.params["name"]
        for item in request.session.items
        if hasattr(item, "callspec") and "name" in item.callspec.params and item.module is request.module
    }
    cases = [c for c in build_world(root) if c.name in selected or not selected]
    if any(c.name.startswith("usage-") and c.category == "terminal" for c in cases):
        _terminal_store(_home(root, "terminal-store"), root)
    by_name = {c.name: c for c in cases}
    assert len(by_name) == len(cases), "case names must be unique"
    before = {(c.name, f): _tree(root / f) for c in cases for f in c.unchanged}
    modes = {
        c.env["PREFECT_API_URL"][9:-1]
        for c in cases
        if c.env.get("PREFECT_API_URL", "").startswith("{hostile:")
    }
    servers = [HostileServer(m) for m in sorted(modes)]
    for s in servers:
        s.__enter__()
    try:
        urls = {s.mode: s.url for s in servers}
        order = sorted(cases, key=lambda c: (c.args[0] != "run", c.name))
        with ThreadPoolExecutor(max_workers=WORKERS) as pool:
            ran = pool.map(lambda c: _run(c, root, urls), order)
            results = dict(zip([c.name for c in order], ran, strict=True))
    finally:
        for s in servers:
            s.__exit__()
    yield root, by_name, results, before
    _remove_deep_trees()


def _error_lines(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith("skillreach: error:")]


@pytest.mark.parametrize("name", [n for n, _ in _CASE_INDEX])
def test_case(world: tuple[Path, dict[str, Case], dict[str, Result], dict[Any, Any]], name: str) -> None:
    root, cases, results, before = world
    case, res = cases[name], results[name]
    _check(root, case, res)
    for folder in case.unchanged:
        assert _tree(root / folder) == before[(name, folder)], f"{name}: {folder} was changed"
    if case.check is not None:
        case.check(root, res)


def _check(root: Path, case: Case, res: Result) -> None:
    name = case.name
    shown = (
        f"{name}: exit {res.code} in {res.seconds:.1f} s\n--- stdout\n{res.stdout[-2000:]!r}\n"
        f"--- stderr\n{res.stderr[-2000:]!r}"
    )
    assert not res.hung, (
        f"{name}: a hang ({res.why}: {res.cpu_s:.1f} s CPU in {res.seconds:.1f} s, limit "
        f"{case.limit_s:.0f} s of CPU or of no progress)\n{shown}"
    )
    assert "Traceback" not in res.stdout + res.stderr, shown
    codes = case.code if isinstance(case.code, tuple) else (case.code,)
    assert res.code in codes, shown
    errors = _error_lines(res.stderr)
    if res.code == 2:
        assert len(errors) == 1, f"expected one error line\n{shown}"
        for needle in case.needles:
            assert needle.replace(W, str(root)) in errors[0], f"{needle!r} not in the error line\n{shown}"
    else:
        text = res.stdout + res.stderr
        for needle in case.needles:
            assert needle in text, f"{needle!r} not in the output\n{shown}"
        assert len(errors) <= 1, shown
    for secret in case.absent:
        assert secret not in res.stdout + res.stderr, f"{secret!r} was printed\n{shown}"
    for ch in UNSAFE:  # whatever the class: nothing printed drives the terminal
        assert ch not in res.stdout + res.stderr, f"{ch!r} printed raw\n{shown}"


MINIMUM = {
    "hangs": 7,
    "lines": 6,
    "counting": 5,
    "writes": 11,
    "secrets": 9,
    "guards": 12,
    "terminal": 13,
    "durations": 16,
    "schema": 9,
    "prefect-api": 22,
    "probe-logs": 15,
}


def test_enough_cases_in_every_class() -> None:
    counts = Counter(cat for _, cat in _CASE_INDEX)
    assert set(counts) == set(MINIMUM), counts
    for cat, n in MINIMUM.items():
        assert counts[cat] >= n, counts
    print("cases by class:", dict(sorted(counts.items())), "total", sum(counts.values()))


# ------------------------------------------------------------------------ beyond one invocation each


def _cli(root: Path, *args: str, env: dict[str, str] | None = None, limit_s: float = LIMIT_S) -> Result:
    (root / "cwd").mkdir(exist_ok=True)
    case = Case("-", "-", args, 0, env=env or {}, limit_s=limit_s)
    return _run(case, root, {})


def _ok(res: Result, code: int = 0) -> str:
    shown = f"exit {res.code} in {res.seconds:.1f} s\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    assert not res.hung, f"a hang ({res.why}, {res.cpu_s:.1f} s CPU)\n{shown}"
    assert "Traceback" not in res.stdout + res.stderr, shown
    assert res.code == code, shown
    for ch in UNSAFE:
        assert ch not in res.stdout + res.stderr, f"{ch!r} printed raw\n{shown}"
    return shown


def test_a_bad_line_stops_no_later_run(tmp_path: Path) -> None:
    """A file whose lines have times out of range and NUL: the first run stores the good lines and
    names the bad ones; lines appended later (bad and good) are read by the next run, from where the
    first stopped, the same way — nothing stored twice, nothing lost; then a run through a link to the
    folder reads nothing again."""
    home = tmp_path / "home"
    folder = tmp_path / "projects" / "app"
    env = {"SKILLREACH_HOME": str(home)}
    first = [*_good("r1"), _stamped(cc_prompt("s", AT, "r1-bad", "x"), "0001-01-01T00:00:00+01:00")]
    _write(folder / "t.jsonl", first)
    shown = _ok(_cli(tmp_path, "ingest", str(folder), env=env))
    assert "t.jsonl:5" in shown
    assert len(_events(home)) == GOOD
    with (folder / "t.jsonl").open("a", encoding="utf-8") as fh:
        for line in (
            _stamped(cc_prompt("s", AT, "r2-bad", "y"), "9999-12-31T23:59:59-01:00"),
            cc_skill_call("s", AT, "r2-a", "r2-c", "nul\u0000skill"),
            *_good("r2"),
        ):
            fh.write(line + "\n")
    shown = _ok(_cli(tmp_path, "ingest", str(folder), env=env))
    assert "timestamp out of range (1970 to 2200) (first: " in shown, shown
    assert "t.jsonl:6" in shown, shown
    assert "NUL characters" in shown
    events = _events(home)
    assert len(events) == 2 * GOOD + 1
    assert len({e["event_id"] for e in events}) == len(events)
    (tmp_path / "link").symlink_to(tmp_path / "projects")
    shown = _ok(_cli(tmp_path, "ingest", str(tmp_path / "link"), env=env))
    assert "0 bytes read, 0 event(s) added" in shown, shown
    assert len(_events(home)) == 2 * GOOD + 1


_COST_SHIM = '''#!{python}
"""claude, its result event's cost replaced (the canaries' left alone)."""
import os, subprocess, sys
prompt = " ".join(sys.argv[1:])
data = None if prompt.strip() else sys.stdin.read()
proc = subprocess.run([{stub!r}, *sys.argv[1:]], input=data, capture_output=True, text=True)
out = proc.stdout
import re
if not re.search(r"Use the [a-z0-9-]+ skill for this[.]", prompt + (data or "")):  # a canary
    out = re.sub(r'"total_cost_usd":\\s*[-0-9.eE]+', '"total_cost_usd": {cost}', out)
sys.stdout.write(out)
sys.stderr.write(proc.stderr)
sys.exit(proc.returncode)
'''


@pytest.mark.parametrize("cost", ["-0.5", "NaN", "Infinity", "1e300"])
def test_an_agent_reporting_an_impossible_cost_gives_errored_probes(tmp_path: Path, cost: str) -> None:
    """The real ``claude-code`` runtime over the ``claude`` stand-in whose result reports a cost of
    ``cost``: every probe is recorded, errored (the cost unknown), the run ends 0 with the scorecard —
    never a traceback — and the cost cap is not bypassed (no spend counted from those probes)."""
    stub = Path(__file__).parent / "fakes" / "claude_stub" / "claude"
    shim = tmp_path / "claude"
    shim.write_text(_COST_SHIM.format(python=sys.executable, stub=str(stub), cost=cost), encoding="utf-8")
    shim.chmod(0o755)
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"*": ["log-search"]}), encoding="utf-8")
    (tmp_path / "study.toml").write_text(
        f'[runtime_options]\nextra_env = {{ CLAUDE_STUB_SCRIPT = "{script}" }}\n', encoding="utf-8"
    )
    out = tmp_path / "out"
    res = _cli(
        tmp_path,
        "run",
        "--config",
        str(tmp_path / "study.toml"),
        "--runtime",
        "claude-code",
        "--max-cost",
        "5",
        "--out",
        str(out),
        env={"SKILLREACH_CLAUDE_PATH": str(shim), "ANTHROPIC_API_KEY": "sk-ant-api03-" + "x" * 24},
        limit_s=240,
    )
    shown = _ok(res)
    from skillreach.study.probe_log import read_probes

    records = read_probes(out / "probes.jsonl")
    assert len(records) == 71, shown
    errored = [r for r in records if r.error]
    # a probe ended early (its skill loaded) has no result event: its cost is counted from its usage
    assert len(errored) >= 60, shown
    assert all("invalid cost_usd" in str(r.error) and r.cost_usd is None for r in errored), errored[0]
    assert all(0 <= (r.cost_usd or 0) < 1 for r in records), shown
    assert f"{len(errored)} probes errored: the runtime reported an invalid cost_usd" in shown, shown


# ---------------------------------------------------------------------------------------- PostgreSQL


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh PostgreSQL database of its own (dropped after), from ``SKILLREACH_TEST_PG_URL``."""
    import uuid

    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    raw = os.environ.get("SKILLREACH_TEST_PG_URL")
    if not raw:
        if os.environ.get("CI") == "true":
            pytest.fail("SKILLREACH_TEST_PG_URL is unset under CI=true: .ci/run must start PostgreSQL")
        pytest.skip("no PostgreSQL: set SKILLREACH_TEST_PG_URL (bash .ci/run starts one)")
    base = make_url(raw)
    name = f"sr_bi3_{uuid.uuid4().hex[:8]}"
    admin = create_engine(base.set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield base.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.mark.postgres
def test_postgres_takes_nul_and_file_names_in_another_encoding(tmp_path: Path, pg_url: str) -> None:
    """On PostgreSQL (whose text holds no NUL and only UTF-8): NUL in a skill name, a session, a model
    and prompt text, a folder and a file named in Latin-1: stored (U+FFFD, ``\\xNN``), counted and
    named — the whole ingest is not lost to one line; a second run adds nothing."""
    from sqlalchemy import create_engine, text

    top = tmp_path / "projects"
    odd = os.fsdecode(bytes(top) + b"/caf\xe9")
    lines = [
        cc_prompt("pg\u0000s", AT, "nul-p1", "text \u0000 kept"),
        cc_skill_call("pg", AT, "nul-a1", "nul-c1", "bad\u0000name", model="m\u0000x"),
        *_good("pg"),
    ]
    _write(Path(odd) / os.fsdecode(b"t\xff.jsonl"), lines)
    env = {"SKILLREACH_DATABASE_URL": pg_url}
    shown = _ok(_cli(tmp_path, "ingest", str(top), "--keep-prompts", env=env))
    assert f"{2 + GOOD} event(s) added" in shown
    assert "cleaned 2 line(s): NUL characters" in shown
    assert "caf\\xe9/t\\xff.jsonl:1" in shown
    engine = create_engine(pg_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT skill, session_id, model, prompt_text FROM live_events")).all()
            paths = conn.execute(text("SELECT path FROM live_cursors")).scalars().all()
    finally:
        engine.dispose()
    assert len(rows) == 2 + GOOD
    assert ("bad\ufffdname", "pg", "m\ufffdx", None) in [tuple(r) for r in rows]
    assert any(r[3] == "text \ufffd kept" and r[1] == "pg\ufffds" for r in rows)
    assert [p.endswith("caf\\xe9/t\\xff.jsonl") for p in paths] == [True]
    shown = _ok(_cli(tmp_path, "ingest", str(top), "--keep-prompts", env=env))
    assert "0 event(s) added" in shown


@pytest.mark.postgres
def test_postgres_store_of_a_newer_schema_is_refused_untouched(tmp_path: Path, pg_url: str) -> None:
    from sqlalchemy import create_engine, text

    from skillreach.store import Store

    Store(pg_url).close()
    engine = create_engine(pg_url)
    try:
        with engine.begin() as conn:
            conn.execute(text("UPDATE alembic_version SET version_num = '0999'"))
        env = {"SKILLREACH_DATABASE_URL": pg_url}
        for args in (("db", "upgrade"), ("usage",), ("ingest", str(tmp_path))):
            res = _cli(tmp_path, *args, env=env)
            shown = _ok(res, 2)
            [line] = _error_lines(res.stderr)
            assert "schema 0999, newer than this skillreach" in line, shown
            assert "upgrade skillreach" in line, shown
        res = _cli(tmp_path, "status", env=env)
        assert "schema 0999, newer than this skillreach" in _ok(res)
        with engine.connect() as conn:
            assert conn.execute(text("SELECT version_num FROM alembic_version")).scalars().all() == ["0999"]
    finally:
        engine.dispose()


@pytest.mark.parametrize("flaw", ["turns", "model"])
def test_a_large_log_is_checked_like_a_small_one(tmp_path: Path, flaw: str) -> None:
    """A log over 48 MB is read by the columnar reader first: it refuses what the line reader refuses,
    with the same line. Built cheaply: 781 lines, each padded to 64 KB by a field no reader keeps."""
    from skillreach.scoring.table import _COLUMNAR_MIN, read_columns

    pad = "x" * 65_000
    rows = [{**r, "attempt": a, "pad": pad} for a in range(1, 12) for r in _probe_rows(model="m-a")]
    at = len(rows) - 11  # far in: line 770 of 781
    if flaw == "turns":
        rows[at - 1] = {**rows[at - 1], "turns": -1}
        needles = (f"big.jsonl:{at}:", "'turns'", "-1")
    else:
        rows = _edited(rows, at, model="m-b")
        needles = (f"big.jsonl:{at}:", "'model'", "'m-b'", "line 1", "--out per model")
    log = _log(tmp_path / "big.jsonl", rows)
    data = log.read_bytes()
    assert len(data) > _COLUMNAR_MIN
    table = read_columns(data, source="big.jsonl")
    if flaw == "turns":
        assert table is None  # the columnar reader refuses the line; the line reader names it
    elif table is not None:  # None: pyarrow (the `fast` extra) is not installed
        assert table.first_lines[("model", "m-b")] == at
    res = _cli(tmp_path, "score", "--queries", str(EXAMPLE_QUERIES), "--probes", str(log), "--out", "art/")
    _ok(res, 2)
    (line,) = _error_lines(res.stderr)
    for needle in needles:
        assert needle in line, line
    assert not (tmp_path / "cwd" / "art" / "artifact.json").exists()


def test_run_over_a_log_naming_two_models_refuses_before_probing(tmp_path: Path) -> None:
    """``run`` reads its folder's probe log too: a line of another model under the study's fingerprint
    (an edited log) is refused naming the file, the line and the field, before anything is probed."""
    _ok(_cli(tmp_path, "run", "--runtime", "keyword", "--model", "m-a", "--out", "st"))
    log = tmp_path / "cwd" / "st" / "probes.jsonl"
    lines = log.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[4] = lines[4].replace('"model":"m-a"', '"model":"m-z"')
    assert '"m-z"' in lines[4]
    log.write_text("".join(lines[:40]), encoding="utf-8")  # 31 probes still to run
    before = log.read_bytes()
    res = _cli(tmp_path, "run", "--runtime", "keyword", "--model", "m-a", "--out", "st")
    _ok(res, 2)
    (line,) = _error_lines(res.stderr)
    for needle in ("probes.jsonl:5:", "'model'", "'m-z'", "line 1", "'m-a'", "--out"):
        assert needle in line, line
    assert log.read_bytes() == before, "probed (and paid) before refusing"
