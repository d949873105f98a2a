"""Hostile input, round two (issue 30), through the command a user runs: bounded readers, discovery that
stays inside its roots, secrets masked everywhere, webhooks checked when read.

As in ``tests/test_bad_input.py``, every case is a real ``.venv/bin/skillreach …`` process with a time
limit, run three at a time; each asserts its exit code, that no output holds a Python traceback, the
one ``skillreach: error:`` line and what it names, and the time it took.

Categories (the counts are asserted at the end of the file):

- ``readers``: a 5,000-digit integer, nesting too deep, bytes that are not UTF-8 and files larger than
  their kind may be (20 GiB sparse files: refused unread) in query sets, trigger-eval imports, config
  files, ``gate.json``, uplift reports, artifacts and probe logs;
- ``discovery``: ``skills/x -> /``, a tree 1,100 folders deep, a link to a folder outside the roots
  (skipped and named unless ``--follow-outside``), through ``lint``, ``overlap`` and ``run``;
- ``secrets``: a provider error echoing the key, a ``?token=`` base URL, a proxy password in
  ``ANTHROPIC_BASE_URL``, ``doctor --json``: never in stderr, ``DIR/skillreach.log``, the probe log or
  the SQLite store;
- ``webhooks``: ``alert_webhooks`` with a bad port, scheme, no host, a link-local or metadata address;
  ``send_alert`` never raises and one bad webhook does not stop the others;
- ``ranges``: baseline records through the bounded JSON reader (digits, depth, UTF-8, size, keys), and
  every number read back range-checked: records and artifacts re-sealed with a negative count, a rate of
  7.5, ``schema_version: true``; ``attempts = true``, ``max_turns: -5`` and negative prices in a config;
  a probe log's ``cost_usd`` negative, NaN, infinite or huge (refused with its line);
- ``text``: a lone surrogate (lint flags it, run, overlap and seal refuse it), bidi controls (lint flags
  them), skill names lint rejects (``../../x``, ``x|y``, ``(no skill)``, a spreadsheet formula) refused
  by run, overlap and cluster, query ids differing by a trailing space, a zero-width character, a
  newline or a direction mark refused at seal, a sealed set larger than verify accepts never written;
- ``overflow``: ``score`` of a log with ``attempt: 2**63``, int64 token totals, costs summing past
  1e308, probes of two resolved model snapshots;
- ``waits``: ``SKILLREACH_DATABASE_URL`` naming a text file, random bytes or a folder (one line); a
  PostgreSQL server that accepts and never answers (``test_a_postgres_server_…``, outside the table:
  it needs a server of its own) ends ``run`` in one line within the connect timeout; outside the table
  too: a PostgreSQL table locked by another connection ends ``run`` at the statement timeout (one line
  naming ``database_statement_timeout_s``), and a disk that fills under ``probes.jsonl`` (a tmpfs of
  400 KiB in a user namespace) ends ``run`` in one line, exit 2, the probes kept, and the same command
  resumes once the disk has room;
- ``signals``: Ctrl-C during a run, with SIGINT's disposition reset in the child (so the case passes
  when pytest itself runs in a background job, where SIGINT is ignored and children inherit that).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from skillreach.example import EXAMPLE_QUERIES, EXAMPLE_SKILLS
from skillreach.models import ProbeRecord
from skillreach.queries.sets import load_query_set
from skillreach.scoring import ProbeTable, score
from skillreach.scoring.artifact import write_artifact
from tests.helpers import hang

EXE = Path(sys.executable).with_name("skillreach")
LIMIT_S = 30.0
WORKERS = 3
BIG = "1" * 5000
KEY = "sk-ant-api03-KEYSECRETkeysecret0123456789"
QTOKEN = "QTOKSECRET0123"
PROXY_PW = "PROXYSECRET0123"
SECRETS = ("KEYSECRET", QTOKEN, PROXY_PW, "HOOKSECRET")

# SIGINT back to its default in the child before skillreach starts (an ignored disposition would be
# inherited through exec, and Python installs its KeyboardInterrupt handler only when it is not ignored)
_DEFAULT_SIGINT = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.argv[1], sys.argv[1:])"
)


@dataclass(frozen=True)
class Case:
    """One invocation: ``args`` after ``skillreach``; ``{w}`` in an argument is the world folder."""

    category: str
    name: str
    args: tuple[str, ...]
    code: int | tuple[int, ...]
    needles: tuple[str, ...] = ()
    """Must all appear in the error line (exit 2/3), else anywhere in the output."""
    env: dict[str, str] = field(default_factory=dict)
    limit_s: float = LIMIT_S
    interrupt_after_s: float | None = None
    absent: tuple[str, ...] = ()
    """Must appear nowhere in the output."""


@dataclass
class Result:
    code: int | None
    stdout: str
    stderr: str
    seconds: float
    hung: bool = False
    cpu_s: float = 0.0
    why: str = ""


W = "{w}"
EX_SKILLS = str(EXAMPLE_SKILLS)
EX_QUERIES = str(EXAMPLE_QUERIES)
GOOD = "---\nname: {name}\ndescription: {desc}\n---\n\n# {name}\n\nBody text.\n"


def _skill(folder: Path, name: str, desc: str = "A fine skill used by the hostile-input tests.") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(GOOD.format(name=name, desc=desc), encoding="utf-8")


_DEEP_TREES: list[Path] = []
"""Every tree :func:`_deep_tree` made (removed by :func:`_remove_deep_tree` after the cases ran)."""


def _deep_tree(top: Path, levels: int, skill: str | None = None) -> None:
    """``top/a/a/…/a`` ``levels`` deep (made one level at a time, relative to the last: no long path),
    with a SKILL.md named ``skill`` at the bottom when given."""
    top.mkdir(parents=True, exist_ok=True)
    _DEEP_TREES.append(top)
    fd = os.open(top, os.O_RDONLY)
    try:
        for _ in range(levels):
            os.mkdir("a", dir_fd=fd)
            below = os.open("a", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = below
        if skill is not None:
            out = os.open("SKILL.md", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
            os.write(out, GOOD.format(name=skill, desc="A skill far too deep to be found.").encode())
            os.close(out)
    finally:
        os.close(fd)


def _remove_deep_tree(top: Path) -> None:
    """Remove what :func:`_deep_tree` made, bottom up, one level at a time (``shutil.rmtree`` recurses
    once per level: a ``RecursionError`` past ~1,000)."""
    if not top.exists():
        return
    fds = [os.open(top, os.O_RDONLY)]
    try:
        while True:
            try:
                fds.append(os.open("a", os.O_RDONLY, dir_fd=fds[-1]))
            except FileNotFoundError:
                break
        for name in os.listdir(fds[-1]):
            os.unlink(name, dir_fd=fds[-1])
        while len(fds) > 1:
            os.close(fds.pop())
            os.rmdir("a", dir_fd=fds[-1])
    finally:
        for fd in fds:
            os.close(fd)


def _sparse(path: Path, size: int) -> Path:
    with path.open("wb") as fh:
        fh.truncate(size)  # no block written: the file system says `size`, the disk holds nothing
    return path


# --------------------------------------------------------------------------------------------- world


def _readers(root: Path, add: Callable[[Case], None]) -> None:
    qdir = root / "q2"
    qdir.mkdir()
    seal_out = str(root / "out" / "sealed.json")

    def seal(name: str, fname: str, raw: bytes, needles: tuple[str, ...]) -> None:
        path = qdir / name / fname
        path.parent.mkdir(parents=True)
        path.write_bytes(raw)
        add(
            Case(
                "readers",
                f"seal-{name}",
                ("queries", "seal", str(path), "--skills", EX_SKILLS, "--out", seal_out),
                2,
                needles,
            )
        )

    seal(
        "json-big-int",
        "q.json",
        f'{{"queries": [{{"id": "a", "text": "x", "n": {BIG}}}]}}'.encode(),
        ("q.json:1", "5,000 digits"),
    )
    seal(
        "json-big-int-line-3",
        "q.json",
        f'{{"queries": [\n{{"id": "a",\n "text": {BIG}}}]}}'.encode(),
        ("q.json:3", "digits"),
    )
    seal(
        "jsonl-big-int",
        "q.jsonl",
        f'{{"id": "a", "text": "x"}}\n{{"id": "b", "text": {BIG}}}\n'.encode(),
        ("q.jsonl:2", "digits"),
    )
    seal(
        "csv-checks-big-int",
        "q.csv",
        f'id,text,checks\na,hello,"{{""x"": {BIG}}}"\n'.encode(),
        ("q.csv:2", "checks", "digits"),
    )
    seal(
        "csv-checks-deep",
        "q.csv",
        ('id,text,checks\na,hello,"' + "[" * 3000 + "]" * 3000 + '"\n').encode(),
        ("q.csv:2", "checks", "nested"),
    )
    seal("csv-huge-cell", "q.csv", b"id,text\na," + b"x" * 200_000 + b"\n", ("q.csv:2", "cell"))
    seal("yaml-big-int", "q.yaml", f"queries:\n  - id: a\n    text: {BIG}\n".encode(), ("q.yaml:3", "digits"))
    seal(
        "json-deep-100",
        "q.json",
        b'{"queries": [{"id": "a", "text": "x", "notes": ' + b"[" * 100 + b"]" * 100 + b"}]}",
        ("q.json", "nested more than"),
    )
    seal("json-nan", "q.json", b'{"queries": [{"id": "a", "text": "x", "n": NaN}]}', ("q.json:1", "NaN"))
    seal(
        "jsonl-not-utf8",
        "q.jsonl",
        b'{"id": "a", "text": "x"}\n{"id": "b", "text": "caf\xe9"}\n',
        ("q.jsonl:2", "UTF-8"),
    )
    seal(
        "json-dup-key-line",
        "q.json",
        b'{"queries": [{"id": "a",\n"text": "x",\n"text": "y"}]}',
        ("q.json:3", "'text'", "twice"),
    )
    big_set = qdir / "sparse" / "q.json"
    big_set.parent.mkdir()
    _sparse(big_set, 20 * 2**30)
    add(
        Case(
            "readers",
            "seal-sparse-20-gib",
            ("queries", "seal", str(big_set), "--skills", EX_SKILLS, "--out", seal_out),
            2,
            ("q.json", "bytes"),
            limit_s=20,
        )
    )
    add(
        Case(
            "readers",
            "verify-big-int",
            ("queries", "verify", str(qdir / "json-big-int" / "q.json")),
            2,
            ("q.json:1", "digits"),
        )
    )

    # queries import (other tools' trigger sets)
    idir = root / "imports"
    idir.mkdir()
    imp_out = str(root / "out" / "imported.json")
    for name, fname, raw, needles in (
        (
            "json-big-int",
            "t.json",
            f'[{{"query": "x", "should_trigger": {BIG}}}]'.encode(),
            ("t.json:1", "digits"),
        ),
        (
            "jsonl-deep",
            "t.jsonl",
            b'{"query": "x", "should_trigger": true}\n' + b"[" * 5000 + b"]" * 5000 + b"\n",
            ("t.jsonl:2", "nested"),
        ),
        ("json-not-utf8", "t.json", b'[{"query": "caf\xe9", "should_trigger": true}]', ("t.json:1", "UTF-8")),
        (
            "csv-huge-cell",
            "t.csv",
            b"query,should_trigger\n" + b"x" * 200_000 + b",true\n",
            ("t.csv:2", "cell"),
        ),
        ("yaml-alias", "t.yaml", b"a: &a [1]\nshould_trigger_prompts: *a\n", ("t.yaml", "aliases")),
    ):
        path = idir / name / fname
        path.parent.mkdir()
        path.write_bytes(raw)
        add(
            Case(
                "readers",
                f"import-{name}",
                (
                    "queries",
                    "import",
                    str(path),
                    "--format",
                    "auto",
                    "--skill",
                    "log-search",
                    "--out",
                    imp_out,
                ),
                2,
                needles,
            )
        )

    # config files
    cdir = root / "c2"
    cdir.mkdir()
    for name, fname, raw, needles in (
        ("toml-big-int", "c.toml", f"attempts = 1\nseed = {BIG}\n".encode(), ("c.toml:2", "digits")),
        (
            "toml-deep-array",
            "c.toml",
            ("x = " + "[" * 1100 + "]" * 1100 + "\n").encode(),
            ("c.toml:1", "nested"),
        ),
        (
            "toml-deep-table",
            "c.toml",
            ("x = " + "{a=" * 500 + "1" + "}" * 500 + "\n").encode(),
            ("c.toml:1", "nested"),
        ),
        ("toml-not-utf8-line-2", "c.toml", b'attempts = 1\nruntime = "caf\xe9"\n', ("c.toml:2", "UTF-8")),
        ("yaml-big-int", "c.yaml", f"attempts: {BIG}\n".encode(), ("c.yaml:1", "digits")),
    ):
        path = cdir / name / fname
        path.parent.mkdir()
        path.write_bytes(raw)
        add(
            Case(
                "readers",
                f"run-config-{name}",
                ("run", "--config", str(path), "--out", str(root / "out" / name)),
                2,
                needles,
            )
        )

    # artifacts, gate.json, uplift reports, probe logs
    run_dir = root / "r2"
    run_dir.mkdir()
    qs = load_query_set(EXAMPLE_QUERIES)
    lines = [
        ProbeRecord(
            query_id=q.id,
            attempt=1,
            invoked=(q.expected_skill,) if q.expected_skill else (),
            runtime="keyword",
        ).to_json_line()
        for q in qs.queries
    ]
    (run_dir / "probes.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    write_artifact(
        score(qs, ProbeTable.from_lines((run_dir / "probes.jsonl").open("rb"), source="p")),
        run_dir / "artifact.json",
    )
    for name, fname, raw, needles in (
        (
            "gate-big-int",
            "gate.json",
            f'{{"comparisons": [], "n": {BIG}}}'.encode(),
            ("gate.json:1", "digits"),
        ),
        (
            "gate-deep",
            "gate.json",
            b'{"comparisons": ' + b"[" * 200 + b"]" * 200 + b"}",
            ("gate.json", "nested"),
        ),
        (
            "uplift-big-int",
            "uplift-log-search.json",
            f'{{"skill": "log-search", "n": {BIG}}}'.encode(),
            ("uplift-log-search.json:1", "digits"),
        ),
        (
            "uplift-not-utf8",
            "uplift-log-search.json",
            b'{"skill": "caf\xe9"}',
            ("uplift-log-search.json:1", "UTF-8"),
        ),
    ):
        folder = root / "reports" / name
        folder.mkdir(parents=True)
        (folder / "artifact.json").write_bytes((run_dir / "artifact.json").read_bytes())
        (folder / fname).write_bytes(raw)
        add(Case("readers", f"report-{name}", ("report", str(folder), "-q"), 2, needles))
    sparse_art = root / "reports" / "sparse-artifact"
    sparse_art.mkdir()
    _sparse(sparse_art / "artifact.json", 20 * 2**30)
    add(
        Case(
            "readers",
            "report-sparse-artifact-20-gib",
            ("report", str(sparse_art), "-q"),
            2,
            ("artifact.json", "bytes", "GiB"),
            limit_s=20,
        )
    )
    sparse_log = _sparse(root / "reports" / "probes-sparse.jsonl", 20 * 2**30)
    add(
        Case(
            "readers",
            "score-sparse-probe-log-20-gib",
            (
                "score",
                "--queries",
                EX_QUERIES,
                "--probes",
                str(sparse_log),
                "-q",
                "--out",
                str(root / "out" / "s2") + "/",
            ),
            2,
            ("probes-sparse.jsonl", "bytes", "GiB"),
            limit_s=20,
        )
    )
    record = run_dir / "deep-probes.jsonl"
    record.write_bytes(lines[0].encode() + b"\n" + b'{"query_id": ' + b"[" * 5000 + b"]" * 5000 + b"}\n")
    add(
        Case(
            "readers",
            "score-deep-probe-line",
            (
                "score",
                "--queries",
                EX_QUERIES,
                "--probes",
                str(record),
                "-q",
                "--out",
                str(root / "out" / "s3") + "/",
            ),
            2,
            ("deep-probes.jsonl:2",),
        )
    )


def _discovery(root: Path, add: Callable[[Case], None]) -> None:
    d = root / "disc"
    only_link = d / "only-link"
    only_link.mkdir(parents=True)
    (only_link / "x").symlink_to("/")
    beside = d / "beside"
    _skill(beside / "ok", "ok")
    (beside / "x").symlink_to("/")
    needle = "outside the folders given"
    add(
        Case(
            "discovery",
            "lint-link-to-root-alone",
            ("lint", str(only_link)),
            2,
            ("no SKILL.md under", "x: a link to /", "--follow-outside"),
            limit_s=20,
        )
    )
    add(
        Case(
            "discovery",
            "lint-link-to-root-beside-a-skill",
            ("lint", str(beside)),
            0,
            (needle, "walk-skipped"),
            limit_s=20,
        )
    )
    add(Case("discovery", "overlap-link-to-root", ("overlap", str(beside)), 0, (needle,), limit_s=20))
    add(
        Case(
            "discovery",
            "overlap-link-to-root-alone",
            ("overlap", str(only_link)),
            2,
            ("no SKILL.md under",),
            limit_s=20,
        )
    )
    add(
        Case(
            "discovery",
            "run-link-to-root-alone",
            (
                "run",
                "--skills",
                str(only_link),
                "--queries",
                EX_QUERIES,
                "--out",
                str(root / "out" / "disc-run"),
            ),
            2,
            ("no SKILL.md under",),
            limit_s=LIMIT_S,
        )
    )
    deep = d / "deep"
    _deep_tree(deep, 1100, "too-deep")
    _skill(deep / "top", "top")
    add(
        Case(
            "discovery",
            "lint-1100-levels",
            ("lint", str(deep)),
            0,
            ("more than 64 folder levels",),
            limit_s=20,
        )
    )
    add(
        Case(
            "discovery",
            "overlap-1100-levels",
            ("overlap", str(deep)),
            0,
            ("more than 64 folder levels",),
            limit_s=20,
        )
    )
    bare_deep = d / "bare-deep"
    _deep_tree(bare_deep, 1100)
    add(
        Case(
            "discovery",
            "lint-1100-levels-no-skill",
            ("lint", str(bare_deep)),
            2,
            ("no SKILL.md under", "more than 64 folder levels"),
            limit_s=20,
        )
    )
    outside = d / "elsewhere"
    _skill(outside / "far", "far", "A skill that lives outside the folder given.")
    farm = d / "farm"
    farm.mkdir()
    (farm / "far").symlink_to(outside / "far")
    add(
        Case(
            "discovery",
            "lint-link-outside-skipped",
            ("lint", str(farm)),
            2,
            ("no SKILL.md under", "farm/far"),
            limit_s=20,
        )
    )
    add(
        Case(
            "discovery",
            "lint-link-outside-followed",
            ("lint", str(farm), "--follow-outside"),
            0,
            ("1 SKILL.md checked",),
            limit_s=20,
        )
    )
    add(
        Case(
            "discovery",
            "lint-link-outside-inside-another-root",
            ("lint", str(farm), str(outside)),
            0,
            ("1 SKILL.md checked",),
            limit_s=20,
        )
    )
    add(
        Case(
            "discovery",
            "overlap-link-outside-followed",
            ("overlap", str(farm), "--follow-outside", "--json"),
            0,
            ('"far"',),
            limit_s=20,
        )
    )
    md_link = d / "md-link"
    (md_link / "s").mkdir(parents=True)
    (md_link / "s" / "SKILL.md").symlink_to(outside / "far" / "SKILL.md")
    add(
        Case(
            "discovery",
            "lint-skill-md-linked-outside",
            ("lint", str(md_link)),
            2,
            ("no SKILL.md under", "SKILL.md: a link to"),
            limit_s=20,
        )
    )


def _webhooks(root: Path, add: Callable[[Case], None]) -> None:
    for name, url, needles in (
        ("port-99999", "http://h:99999/HOOKSECRET", ("alert_webhooks", "port", "99999")),
        ("scheme-ftp", "ftp://h/HOOKSECRET", ("alert_webhooks", "ftp")),
        ("no-host", "http:///HOOKSECRET", ("alert_webhooks", "no host")),
        ("link-local", "http://169.254.169.254/latest/HOOKSECRET", ("alert_webhooks", "169.254.169.254")),
        ("link-local-v6", "http://[fe80::1]/HOOKSECRET", ("alert_webhooks", "fe80::1")),
        ("metadata-host", "http://metadata.google.internal/HOOKSECRET", ("alert_webhooks", "metadata")),
        ("second-of-two", "https://hooks.example.com/ok", ("alert_webhooks",)),
    ):
        urls = [url] if name != "second-of-two" else [url, "http://h:0/HOOKSECRET"]
        add(
            Case(
                "webhooks",
                f"run-webhook-{name}",
                ("run", "--out", str(root / "out" / f"wh-{name}")),
                2,
                needles + (("webhook 2 of 2",) if name == "second-of-two" else ()),
                env={"SKILLREACH_ALERT_WEBHOOKS": json.dumps(urls)},
                absent=("HOOKSECRET",),
            )
        )
    cfg = root / "c2" / "webhook-config.toml"
    cfg.write_text('alert_webhooks = ["http://h:99999/HOOKSECRET"]\n', encoding="utf-8")
    add(
        Case(
            "webhooks",
            "run-webhook-in-config",
            ("run", "--config", str(cfg), "--out", str(root / "out" / "whc")),
            2,
            ("alert_webhooks", "99999"),
            absent=("HOOKSECRET",),
        )
    )


def _secrets(root: Path, add: Callable[[Case], None]) -> None:
    add(
        Case(
            "secrets",
            "doctor-json-query-token",
            ("doctor", "--json"),
            0,
            ("?k=***",),
            env={"ANTHROPIC_BASE_URL": f"http://127.0.0.1:9/v1?k={QTOKEN}", "ANTHROPIC_API_KEY": KEY},
            absent=SECRETS,
        )
    )
    add(
        Case(
            "secrets",
            "doctor-json-proxy-password",
            ("doctor", "--json"),
            0,
            (":***@",),
            env={"ANTHROPIC_BASE_URL": f"http://user:{PROXY_PW}@127.0.0.1:9", "ANTHROPIC_API_KEY": KEY},
            absent=SECRETS,
        )
    )
    add(
        Case(
            "secrets",
            "run-database-url-password",
            ("run", "--out", str(root / "out" / "dbpw")),
            2,
            ("cannot open the database", "127.0.0.1:9"),
            env={"SKILLREACH_DATABASE_URL": f"postgresql+psycopg://u:{PROXY_PW}@127.0.0.1:9/db"},
            absent=SECRETS,
        )
    )


def _signals(root: Path, add: Callable[[Case], None]) -> None:
    add(
        Case(
            "signals",
            "run-ctrl-c-disposition-reset",
            ("run", "--out", str(root / "out" / "ctrl-c")),
            130,
            ("interrupted",),
            interrupt_after_s=1.0,
        )
    )


def _resealed(data: dict[str, Any]) -> bytes:
    """``data`` with its ``digest`` made again over what it now holds (artifacts and records share the
    scheme): a hostile edit that the digest alone cannot catch."""
    import hashlib

    import orjson

    body = {k: v for k, v in data.items() if k != "digest"}
    digest = "sha256:" + hashlib.sha256(orjson.dumps(body, option=orjson.OPT_SORT_KEYS)).hexdigest()
    return json.dumps({**body, "digest": digest}, indent=2).encode()


def _ranges(root: Path, add: Callable[[Case], None]) -> None:
    """Baseline records through the bounded reader; every number read back range-checked."""
    from skillreach.baselines.records import write_baseline
    from tests.helpers.staged import make_record

    bdir = root / "records"
    good = write_baseline(make_record({"q1": [1, 1, 0], "q2": [1, 0, 1]}), bdir / "good" / "deploy.json")
    data = json.loads(good.read_text(encoding="utf-8"))

    def record(name: str, raw: bytes, needles: tuple[str, ...], code: int = 2) -> None:
        path = bdir / name / "deploy.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(raw)
        add(Case("ranges", f"record-{name}", ("baseline", "show", str(path)), code, needles))

    add(Case("ranges", "record-good", ("baseline", "show", str(good)), 0, ("deploy@base",)))
    text = good.read_text(encoding="utf-8")
    record(
        "big-int",
        text.replace('"runs_per_case": 3', f'"runs_per_case": {BIG}').encode(),
        ("deploy.json:", "5,000 digits"),
    )
    record(
        "deep",
        text.replace('"runs_per_case": 3', '"runs_per_case": ' + "[" * 5000 + "]" * 5000).encode(),
        ("deploy.json:", "nested"),
    )
    record(
        "not-utf8",
        text.replace('"deploy@base"', '"caf@"').encode().replace(b"caf@", b"caf\xe9"),
        ("deploy.json:", "UTF-8"),
    )
    record(
        "dup-key",
        text.replace('"skill": "deploy",', '"skill": "deploy", "skill": "x",').encode(),
        ("deploy.json:", "'skill'", "twice"),
    )
    sparse = bdir / "sparse" / "deploy.json"
    sparse.parent.mkdir()
    _sparse(sparse, 20 * 2**30)
    add(
        Case(
            "ranges",
            "record-sparse-20-gib",
            ("baseline", "show", str(sparse)),
            2,
            ("deploy.json", "bytes", "MiB"),
            limit_s=20,
        )
    )

    def edited(path: str, value: Any) -> dict[str, Any]:
        out = json.loads(json.dumps(data))
        *parents, last = path.split(".")
        at = out
        for k in parents:
            at = at[k]
        at[last] = value
        return out

    record(
        "negative-probes",
        _resealed(edited("per_case.q1.outcomes.probes", -3)),
        ("per_case.q1.probes", "greater than or equal to 0"),
    )
    record(
        "rate-7.5",
        _resealed(edited("metrics.activation.value", 7.5)),
        ("metrics.activation.value", "less than or equal to 1"),
    )
    record("negative-cases", _resealed(edited("cases.positive", -1)), ("cases.positive",))
    record(
        "activated-2",
        _resealed(edited("per_case.q2.outcomes.activated", [1, 2, 0])),
        ("per_case.q2.activated",),
    )
    record("schema-version-true", _resealed(edited("schema_version", True)), ("schema_version", "True"))
    record("runs-per-case-true", _resealed(edited("runs_per_case", True)), ("runs_per_case", "not a number"))

    # artifacts re-sealed with values out of range
    run_dir = root / "r2"
    art = json.loads((run_dir / "artifact.json").read_text(encoding="utf-8"))
    for name, path, value, needles in (
        ("negative-probes", "counts.probes", -5, ("counts.probes", "greater than or equal to 0")),
        ("rate-7.5", "metrics.top1_accuracy", 7.5, ("metrics.top1_accuracy", "less than or equal to 1")),
        ("schema-version-true", "schema_version", True, ("schema_version", "True")),
        ("attempts-true", "attempts", True, ("attempts", "not a number")),
        ("negative-cost", "usage.cost_usd", -1.0, ("usage.cost_usd",)),
    ):
        edit = json.loads(json.dumps(art))
        *parents, last = path.split(".")
        at = edit
        for k in parents:
            at = at[k]
        at[last] = value
        folder = root / "reports" / f"range-{name}"
        folder.mkdir(parents=True)
        (folder / "artifact.json").write_bytes(_resealed(edit))
        add(Case("ranges", f"artifact-{name}", ("report", str(folder), "-q"), 2, ("artifact.json", *needles)))

    # config values out of range
    cdir = root / "c3"
    cdir.mkdir()
    for name, fname, raw, needles in (
        ("attempts-true", "c.toml", "attempts = true\n", ("attempts", "not a number")),
        ("attempts-true-yaml", "c.yaml", "attempts: true\n", ("attempts", "not a number")),
        ("max-turns-true", "c.toml", "max_turns = true\n", ("max_turns", "not a number")),
        ("turns-negative", "c.yaml", "max_turns: -5\n", ("max_turns", "greater than or equal to 1")),
        (
            "price-negative",
            "c.toml",
            "[prices.claude-sonnet-4]\ninput = -3.0\noutput = 15.0\ncache_write = 3.75\ncache_read = 0.3\n",
            ("prices", "input", "greater than or equal to 0"),
        ),
        (
            "price-nan",
            "c.toml",
            "[prices.m]\ninput = nan\noutput = 1.0\ncache_write = 1.0\ncache_read = 1.0\n",
            ("prices", "input"),
        ),
    ):
        path = cdir / name / fname
        path.parent.mkdir()
        path.write_text(raw, encoding="utf-8")
        add(
            Case(
                "ranges",
                f"run-config-{name}",
                ("run", "--config", str(path), "--out", str(root / "out" / f"rc-{name}")),
                2,
                needles,
            )
        )
    add(
        Case(
            "ranges",
            "run-env-attempts-true",
            ("run", "--out", str(root / "out" / "env-attempts-true")),
            2,
            ("attempts",),
            env={"SKILLREACH_ATTEMPTS": "true"},
        )
    )


def _text(root: Path, add: Callable[[Case], None]) -> None:
    """Text that breaks what reads it: lone surrogates, bidi controls, names that become paths or
    cells, query ids that look alike, a sealed set too large to verify."""
    t = root / "text"

    def skills(name: str, frontmatter_name: str, desc: str, body: str = "Body text.") -> Path:
        folder = t / name
        _skill(folder / "ok", "ok")
        (folder / "x").mkdir(parents=True)
        (folder / "x" / "SKILL.md").write_text(
            f"---\nname: {frontmatter_name}\ndescription: {desc}\n---\n\n{body}\n", encoding="utf-8"
        )
        return folder

    fine = "Handles the logs of the hostile input tests, and nothing else."
    surrogate = skills("surrogate", "x", '"Handles logs \\ud800 of the hostile input tests here."')
    bidi = skills("bidi", "x", '"Handles logs \\u202e gnp.exe of the hostile input tests."')
    isolate = skills("bidi-isolate", "x", '"Handles logs \\u2066 of the hostile input tests, isolated."')
    add(
        Case(
            "text",
            "lint-lone-surrogate",
            ("lint", str(surrogate)),
            1,
            ("lone surrogate", "U+D800", "bad-character"),
        )
    )
    add(
        Case(
            "text", "lint-bidi-override", ("lint", str(bidi)), 1, ("U+202E", "bidirectional", "bad-character")
        )
    )
    add(Case("text", "lint-bidi-isolate", ("lint", str(isolate)), 1, ("U+2066", "bad-character")))
    out = root / "out"
    add(
        Case(
            "text",
            "run-lone-surrogate-skill",
            ("run", "--skills", str(surrogate), "--queries", EX_QUERIES, "--out", str(out / "t-sur")),
            2,
            ("x/SKILL.md:3", "lone surrogate"),
        )
    )
    add(
        Case(
            "text",
            "overlap-lone-surrogate-skill",
            ("overlap", str(surrogate)),
            2,
            ("x/SKILL.md:3", "lone surrogate"),
        )
    )
    qdir = t / "queries"
    qdir.mkdir(parents=True)
    sur_q = qdir / "surrogate.json"
    sur_q.write_text(
        '{"queries": [{"id": "a", "text": "find \\ud800 logs", "kind": "out_of_scope"}]}', encoding="utf-8"
    )
    add(
        Case(
            "text",
            "run-lone-surrogate-query",
            ("run", "--skills", EX_SKILLS, "--queries", str(sur_q), "--out", str(out / "t-surq")),
            2,
            ("surrogate.json", "query 'a'", "lone surrogate"),
        )
    )
    add(
        Case(
            "text",
            "seal-lone-surrogate-query",
            ("queries", "seal", str(sur_q), "--skills", EX_SKILLS, "--out", str(out / "t-surq.json")),
            2,
            ("surrogate.json", "lone surrogate"),
        )
    )

    for label, name in (
        ("dotdot", '"../../x"'),
        ("pipe", '"x|y"'),
        ("no-skill", '"(no skill)"'),
        ("formula", "\"=cmd|' /C calc'!A0\""),
    ):
        folder = skills(f"name-{label}", name, fine)
        needles = ("x/SKILL.md:2", "kebab-case")
        add(
            Case(
                "text",
                f"run-name-{label}",
                ("run", "--skills", str(folder), "--queries", EX_QUERIES, "--out", str(out / f"t-{label}")),
                2,
                needles,
            )
        )
        add(Case("text", f"overlap-name-{label}", ("overlap", str(folder)), 2, needles))
        add(Case("text", f"cluster-name-{label}", ("cluster", str(folder), "--format", "csv"), 2, needles))

    for label, qid, needles in (
        ("trailing-space", "a ", ("'a '", "white space")),
        ("zero-width", "a\\u200b", ("U+200B",)),
        ("newline", "a\\n", ("white space",)),
        ("bidi-mark", "a\\u200f", ("U+200F",)),
    ):
        path = qdir / f"id-{label}.json"
        path.write_text(
            '{"queries": [{"id": "a", "text": "find logs", "kind": "out_of_scope"}, '
            f'{{"id": "{qid}", "text": "find the logs again", "kind": "out_of_scope"}}]}}',
            encoding="utf-8",
        )
        add(
            Case(
                "text",
                f"seal-id-{label}",
                (
                    "queries",
                    "seal",
                    str(path),
                    "--skills",
                    EX_SKILLS,
                    "--out",
                    str(out / f"t-id-{label}.json"),
                ),
                2,
                ("query #2 id", *needles),
            )
        )
    # every backslash of a CSV cell is two characters in the sealed JSON: 61 MB in, 122 MB out
    big = qdir / "big.csv"
    with big.open("w", encoding="utf-8") as fh:
        fh.write("id,text,kind\n")
        row = "\\" * 120_000
        for i in range(500):
            fh.write(f"q{i},{row},out_of_scope\n")
    add(
        Case(
            "text",
            "seal-larger-than-verify-accepts",
            ("queries", "seal", str(big), "--skills", EX_SKILLS, "--out", str(out / "t-big.json")),
            2,
            ("t-big.json", "sealed set would be", "64 MiB"),
        )
    )


def _overflow(root: Path, add: Callable[[Case], None]) -> None:
    """Numbers past what the columns, the artifact's JSON or a float hold; probes of two snapshots."""
    qs = load_query_set(EXAMPLE_QUERIES)
    folder = root / "overflow"
    folder.mkdir()

    def rec(q: Any, **extra: Any) -> dict[str, Any]:
        return {
            "query_id": q.id,
            "attempt": 1,
            "invoked": [q.expected_skill] if q.expected_skill else [],
            "runtime": "keyword",
            **extra,
        }

    first = qs.queries[0]
    logs: list[tuple[str, list[dict[str, Any]], tuple[str, ...]]] = [
        (
            "attempt-2-63",
            [rec(q) for q in qs.queries] + [rec(first, attempt=2**63)],
            (f"p.jsonl:{len(qs.queries) + 1}", "'attempt'", "9,223,372,036,854,775,808"),
        ),
        (
            "attempt-2-64-plus",
            [rec(first, attempt=2**64 + 5)] + [rec(q) for q in qs.queries],
            ("p.jsonl:1", "'attempt'"),
        ),
        (
            "attempt-int64-max",
            [rec(q) for q in qs.queries] + [rec(first, attempt=2**63 - 1)],
            ("artifact.json", "past 2**63", "number attempts from 1"),
        ),
        (
            "tokens-int64-totals",
            [rec(q, usage={"input_tokens": 2**63 - 1, "output_tokens": 2**63 - 1}) for q in qs.queries],
            ("p.jsonl", "usage.input_tokens", "2**63"),
        ),
        (
            "tokens-past-int64-one-probe",
            [rec(q) for q in qs.queries] + [rec(first, attempt=2, usage={"output_tokens": 2**64})],
            ("p.jsonl", "output_tokens"),
        ),
        (
            "cost-1e308-summed",
            [rec(q, cost_usd=1e308) for q in qs.queries],
            ("p.jsonl:1", "cost_usd", "1,000,000"),  # one probe's cost is capped: no sum overflows
        ),
        (
            "two-model-snapshots",
            [
                rec(
                    q,
                    model="claude-sonnet-4-5",
                    resolved_model=f"claude-sonnet-4-5-2025092{i % 2}",
                )
                for i, q in enumerate(qs.queries)
            ],
            (
                "p.jsonl",
                "2 different model snapshots",
                "claude-sonnet-4-5-20250920",
                "claude-sonnet-4-5-20250921",
            ),
        ),
    ]
    for name, rows, needles in logs:
        path = folder / name / "p.jsonl"
        path.parent.mkdir()
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        add(
            Case(
                "overflow",
                f"score-{name}",
                (
                    "score",
                    "--queries",
                    EX_QUERIES,
                    "--probes",
                    str(path),
                    "-q",
                    "--out",
                    str(folder / name / "out") + "/",
                ),
                2,
                needles,
            )
        )
    # a probe's cost outside [0, 1e6] USD (negative, NaN, infinite, huge) is refused with its line,
    # whichever reader takes the log (the msgspec blocks fall back to the line checks that name it)
    n = len(qs.queries) + 1
    for name, cost in (("negative", -0.5), ("nan", float("nan")), ("inf", float("inf")), ("huge", 1e300)):
        path = folder / f"cost-{name}" / "p.jsonl"
        path.parent.mkdir()
        rows = [rec(q, cost_usd=0.01) for q in qs.queries] + [rec(first, attempt=2, cost_usd=cost)]
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        needles = (
            (f"p.jsonl:{n}", "not valid JSON") if name in ("nan", "inf") else (f"p.jsonl:{n}", "cost_usd")
        )
        add(
            Case(
                "ranges",
                f"score-cost-{name}",
                (
                    "score",
                    "--queries",
                    EX_QUERIES,
                    "--probes",
                    str(path),
                    "-q",
                    "--out",
                    str(path.parent / "o") + "/",
                ),
                2,
                needles,
            )
        )


def _waits(root: Path, add: Callable[[Case], None]) -> None:
    """Databases that are not: a text file, random bytes, a folder named as the SQLite store."""
    folder = root / "dbs"
    folder.mkdir()
    (folder / "text.db").write_text(
        "hello, this is a note and not a database at all\n" * 20, encoding="utf-8"
    )
    (folder / "random.db").write_bytes(bytes(range(256)) * 8)
    (folder / "folder.db").mkdir()
    for name, needles in (
        ("text", ("text.db", "file is not a database", "SKILLREACH_DATABASE_URL")),
        ("random", ("random.db", "file is not a database")),
        ("folder", ("folder.db", "unable to open database file")),
    ):
        add(
            Case(
                "waits",
                f"run-database-{name}-not-a-database",
                ("run", "--out", str(root / "out" / f"db-{name}")),
                2,
                ("cannot open the database", *needles),
                env={"SKILLREACH_DATABASE_URL": f"sqlite:///{folder / (name + '.db')}"},
            )
        )


def build_world(root: Path) -> list[Case]:
    (root / "out").mkdir()
    cases: list[Case] = []
    for part in (_readers, _discovery, _webhooks, _secrets, _signals, _ranges, _text, _overflow, _waits):
        part(root, cases.append)
    return cases


# -------------------------------------------------------------------------------------------- runner


def _env(root: Path, extra: dict[str, str]) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SKILLREACH_", "ANTHROPIC_", "OPENAI_", "PREFECT_API"))
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


def _run(case: Case, root: Path) -> Result:
    args = [str(EXE), *(a.replace(W, str(root)) for a in case.args)]
    if case.interrupt_after_s is not None:
        args = [sys.executable, "-c", _DEFAULT_SIGINT, *args]

    def interrupt(proc: subprocess.Popen[bytes]) -> None:
        if case.interrupt_after_s is None:
            return
        marker = Path(args[-1])  # its --out folder: the command is running
        start = time.monotonic()
        while not marker.exists() and proc.poll() is None and time.monotonic() - start < 10 * case.limit_s:
            time.sleep(0.1)
        time.sleep(case.interrupt_after_s)
        proc.send_signal(signal.SIGINT)

    res = hang.run(args, limit_s=case.limit_s, cwd=root / "cwd", env=_env(root, case.env), started=interrupt)
    return Result(res.code, res.stdout, res.stderr, res.seconds, hung=res.hung, cpu_s=res.cpu_s, why=res.why)


def _index() -> list[tuple[str, str]]:
    """(name, category) of every case, computed without building the world's big trees twice."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "cwd").mkdir()
        try:
            return [(c.name, c.category) for c in build_world(Path(tmp))]
        finally:
            while _DEEP_TREES:
                _remove_deep_tree(_DEEP_TREES.pop())


_CASE_INDEX = _index()


@pytest.fixture(scope="module")
def world(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> tuple[Path, dict[str, Case], dict[str, Result]]:
    root = tmp_path_factory.mktemp("bad-input-2")
    (root / "cwd").mkdir()
    selected = {
        item.callspec.params["name"]
        for item in request.session.items
        if hasattr(item, "callspec") and "name" in item.callspec.params and item.module is request.module
    }
    cases = [c for c in build_world(root) if c.name in selected or not selected]
    by_name = {c.name: c for c in cases}
    assert len(by_name) == len(cases), "case names must be unique"
    order = sorted(cases, key=lambda c: (c.args[0] != "run", c.name))
    try:
        with ThreadPoolExecutor(max_workers=WORKERS) as pool:
            ran = pool.map(lambda c: _run(c, root), order)
            results = dict(zip([c.name for c in order], ran, strict=True))
    finally:
        while _DEEP_TREES:  # pytest's clean-up of old temporary folders recurses once per level
            _remove_deep_tree(_DEEP_TREES.pop())
    return root, by_name, results


def _error_lines(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith("skillreach: error:")]


@pytest.mark.parametrize("name", [n for n, _ in _CASE_INDEX])
def test_case(world: tuple[Path, dict[str, Case], dict[str, Result]], name: str) -> None:
    root, cases, results = world
    _check(root, cases[name], results[name])


def _check(root: Path, case: Case, res: Result) -> None:
    name = case.name
    shown = (
        f"{name}: exit {res.code} in {res.seconds:.1f} s\n--- stdout\n{res.stdout[-2000:]}\n"
        f"--- stderr\n{res.stderr[-2000:]}"
    )
    assert not res.hung, f"{name}: {res.why}: no progress within {case.limit_s:.0f} s (a hang)\n{shown}"
    assert "Traceback" not in res.stdout + res.stderr, shown
    codes = case.code if isinstance(case.code, tuple) else (case.code,)
    assert res.code in codes, shown
    errors = _error_lines(res.stderr)
    if res.code in (2, 3):
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


def test_enough_cases_in_every_category() -> None:
    counts = Counter(cat for _, cat in _CASE_INDEX)
    assert sum(counts.values()) >= 55, counts
    least = {
        "readers": 30,
        "discovery": 13,
        "webhooks": 8,
        "secrets": 3,
        "signals": 1,
        "ranges": 28,
        "text": 24,
        "overflow": 7,
        "waits": 3,
    }
    for cat, n in least.items():
        assert counts[cat] >= n, counts


# ------------------------------------------------------------------ secrets through a real study


def _files_text(*paths: Path) -> Iterator[tuple[Path, bytes]]:
    for top in paths:
        for p in [top] if top.is_file() else sorted(top.rglob("*")) if top.is_dir() else []:
            if p.is_file():
                yield p, p.read_bytes()


def _study(tmp_path: Path, env: dict[str, str], *extra: str, limit_s: float = 60.0) -> Result:
    (tmp_path / "cwd").mkdir(exist_ok=True)
    args = [
        str(EXE),
        "run",
        "--runtime",
        "anthropic",
        "--model",
        "claude-sonnet-4-5",
        *extra,
        "--out",
        str(tmp_path / "study"),
    ]
    full_env = _env(tmp_path, {"SKILLREACH_MAX_RETRIES": "0", "ANTHROPIC_API_KEY": KEY, **env})
    res = hang.run(args, limit_s=limit_s, cwd=tmp_path / "cwd", env=full_env)
    return Result(res.code, res.stdout, res.stderr, res.seconds, hung=res.hung, cpu_s=res.cpu_s, why=res.why)


def _assert_nowhere(tmp_path: Path, res: Result, secrets: tuple[str, ...]) -> None:
    shown = f"exit {res.code} in {res.seconds:.1f} s\n--- stderr\n{res.stderr[-3000:]}"
    assert not res.hung, shown
    assert "Traceback" not in res.stdout + res.stderr, shown
    for secret in secrets:
        assert secret not in res.stdout + res.stderr, f"{secret!r} printed\n{shown}"
        for path, data in _files_text(tmp_path / "study", tmp_path / "home"):
            assert secret.encode() not in data, f"{secret!r} written to {path}"


@pytest.fixture
def provider() -> Iterator[Any]:
    """The Messages API stand-in: the canaries activate their skill; every other query is answered by an
    error that echoes the key (as a real provider's ``invalid x-api-key: sk-ant-…`` does)."""
    from tests.fakes.messages_api import MessagesAPI, query_text, skill_call

    def responder(body: dict[str, Any]) -> Any:
        text = query_text(body)
        if text.startswith("Use the ") and " skill for this." in text:
            return [skill_call(text.split("Use the ", 1)[1].split(" skill", 1)[0])]
        raise RuntimeError(f"invalid x-api-key: {KEY}")

    with MessagesAPI(responder, latency=0.0) as api:
        yield api


def test_a_provider_error_echoing_the_key_is_masked_everywhere(tmp_path: Path, provider: Any) -> None:
    res = _study(tmp_path, {"ANTHROPIC_BASE_URL": provider.base_url})
    assert res.code in (0, 1), res.stderr[-3000:]
    probes = (tmp_path / "study" / "probes.jsonl").read_text(encoding="utf-8")
    assert "invalid x-api-key: ***" in probes  # the error is kept, the key is not
    assert (tmp_path / "home" / "skillreach.db").is_file()
    assert (tmp_path / "study" / "skillreach.log").is_file()
    _assert_nowhere(tmp_path, res, ("KEYSECRET",))


def test_a_query_token_in_the_base_url_is_masked_everywhere(tmp_path: Path, provider: Any) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[runtime_options]\nbase_url = "{provider.base_url}/?token={QTOKEN}"\n', encoding="utf-8")
    res = _study(tmp_path, {}, "--config", str(cfg))
    assert res.code == 2, res.stderr[-3000:]
    assert len(_error_lines(res.stderr)) == 1, res.stderr
    assert "token=***" in _error_lines(res.stderr)[0]
    _assert_nowhere(tmp_path, res, (QTOKEN, "KEYSECRET"))


def test_a_proxy_password_in_the_base_url_is_masked_everywhere(tmp_path: Path, provider: Any) -> None:
    url = provider.base_url.replace("http://", f"http://user:{PROXY_PW}@")
    res = _study(tmp_path, {"ANTHROPIC_BASE_URL": url})
    assert res.code in (0, 1, 2), res.stderr[-3000:]
    assert len(_error_lines(res.stderr)) <= 1, res.stderr
    _assert_nowhere(tmp_path, res, (PROXY_PW, "KEYSECRET"))


# --------------------------------------------------------------------------------- webhooks, in-process


def test_send_alert_never_raises_and_one_bad_webhook_does_not_stop_the_others() -> None:
    from skillreach.service.alerts import send_alert
    from tests.helpers.webhooks import WebhookSink

    payload = {"event": "gate_breached", "skill": "deploy", "metric": "activation", "baseline_id": "b"}
    with WebhookSink() as sink:
        good = f"{sink.base_url}/hooks/HOOKSECRET"
        urls = [
            "http://h:99999/HOOKSECRET",
            "http://169.254.169.254/HOOKSECRET",
            "ftp://x/y",
            good,
            "http://[::1",
            good,
        ]
        start = time.monotonic()
        out = send_alert(payload, urls, timeout_s=5)
        assert time.monotonic() - start < 10
    assert [d.ok for d in out] == [False, False, False, True, False, True]
    assert len(sink.requests) == 2
    assert all("HOOKSECRET" not in d.target + str(d.error) for d in out)


def test_parse_webhooks_names_the_setting_not_the_token() -> None:
    from skillreach.errors import ConfigError
    from skillreach.service.alerts import parse_webhooks

    assert parse_webhooks('["https://hooks.example.com/T/B/X"]') == ["https://hooks.example.com/T/B/X"]
    for bad in (
        "http://h:99999/HOOKSECRET",
        "http://169.254.1.1/HOOKSECRET",
        "gopher://h/HOOKSECRET",
        "http://metadata.google.internal/HOOKSECRET",
        "http://[fe80::2]/HOOKSECRET",
    ):
        with pytest.raises(ConfigError) as exc:
            parse_webhooks(json.dumps([bad]), setting="SKILLREACH_ALERT_WEBHOOKS")
        assert str(exc.value).startswith("SKILLREACH_ALERT_WEBHOOKS: webhook 1 of 1"), exc.value
        assert "HOOKSECRET" not in str(exc.value)


def test_csv_cells_that_would_be_formulas_are_written_as_text() -> None:
    from skillreach._io.csv import safe_cell

    for bad in ("=cmd|' /C calc'!A0", "+1+1", "-2+3", "@SUM(A1)", "\t=x", "\r=x"):
        assert safe_cell(bad) == "'" + bad
    assert [safe_cell(v) for v in ("deploy", 3, -1, "c1", "")] == ["deploy", 3, -1, "c1", ""]


# ------------------------------------------------------------------------------ waits with an end


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A TCP server on 127.0.0.1 that accepts every connection and never says a word."""
    import socket
    import threading

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    sock.settimeout(0.2)
    held: list[socket.socket] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
            except TimeoutError:
                continue
            held.append(conn)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield sock.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        sock.close()


def test_a_postgres_server_that_accepts_and_never_answers_ends_in_one_line(
    tmp_path: Path, silent_server: int
) -> None:
    (tmp_path / "cwd").mkdir()
    case = Case(
        "waits",
        "run-postgres-accepts-never-answers",
        ("run", "--out", str(tmp_path / "out")),
        2,
        ("cannot open the database", f"127.0.0.1:{silent_server}", "timeout"),
        env={"SKILLREACH_DATABASE_URL": f"postgresql+psycopg://u:{PROXY_PW}@127.0.0.1:{silent_server}/db"},
        limit_s=45,
        absent=(PROXY_PW,),
    )
    _check(tmp_path, case, _run(case, tmp_path))


def test_a_full_disk_under_the_probe_log_names_the_log(tmp_path: Path) -> None:
    """ENOSPC from the log's write names the log (the CLI's one line is ``PATH: No space left …``)."""
    from skillreach.study.probe_log import JsonlSink

    sink = JsonlSink(tmp_path / "probes.jsonl")
    sink.write(ProbeRecord(query_id="a", runtime="keyword"))
    sink._fh.close()
    sink._fh = open("/dev/full", "ab")  # noqa: SIM115 - the sink owns it: every write is ENOSPC
    with pytest.raises(OSError, match="No space left") as exc:
        sink.write(ProbeRecord(query_id="b", runtime="keyword"))
    assert exc.value.filename == str(tmp_path / "probes.jsonl")
    sink._fh = None
    assert (tmp_path / "probes.jsonl").read_text(encoding="utf-8").count("\n") == 1  # the first is kept


def test_postgres_connections_carry_a_connect_and_a_statement_timeout() -> None:
    from sqlalchemy.engine import make_url

    from skillreach.store.limits import pg_timeouts

    args = pg_timeouts(make_url("postgresql+psycopg://u@h/db"))
    assert args["connect_timeout"] > 0
    assert "statement_timeout=" in args["options"]
    assert pg_timeouts(make_url("postgresql+psycopg://u@h/db?connect_timeout=3")).keys() == {"options"}
    assert pg_timeouts(make_url("sqlite:///x.db")) == {}


# ------------------------------------------------------------------------- lint at 100,000 skills


@pytest.mark.parametrize(
    "text",
    [
        "name: a\ndescription: Use it when x.\n",
        "name: a\nallowed-tools:\n  - Read\n  - Grep\nmetadata:\n  owner: t\n  version: 1.2\n",
        "a: [1, 2, {b: c}]\nd: |\n  block\n  text\ne: 'q'\nf: null\ng: true\nh: 2026-12-03\n",
        "x: 0x1F\ny: 1_000\nz: .inf\nw: ~\n",
    ],
)
def test_the_libyaml_path_reads_what_the_python_loader_reads(text: str) -> None:
    import yaml

    from skillreach._io.yaml import _LimitedLoader, load_limited

    data, node = load_limited(text, max_bytes=10_000, line_offset=3)
    loader = _LimitedLoader(text, 1000, 3)
    try:
        slow_node = loader.get_single_node()
        slow = loader.construct_document(slow_node)
    finally:
        loader.dispose()
    assert data == slow
    assert isinstance(node, yaml.MappingNode)
    assert isinstance(slow_node, yaml.MappingNode)
    assert [k.start_mark.line for k, _ in node.value] == [k.start_mark.line for k, _ in slow_node.value]


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ("a: &x [1]\nb: *x\n", "aliases are not allowed"),
        ("a: 1\na: 2\n", "duplicate key 'a'"),
        ("a: " + "[" * 70 + "]" * 70 + "\n", "nested more than 64"),
        ("a: [" + ", ".join(["1"] * 200) + "]\n", "more than 100 YAML nodes"),
        (f"a: {BIG}\n", "digits"),
    ],
)
def test_the_libyaml_path_words_refusals_as_the_python_loader(text: str, what: str) -> None:
    from skillreach._io.yaml import YamlProblem, load_limited

    with pytest.raises(YamlProblem, match=what):
        load_limited(text, max_bytes=100_000, max_nodes=100)


def test_a_store_under_a_file_size_limit_ends_in_one_line_with_the_probes_kept(tmp_path: Path) -> None:
    """SQLite past RLIMIT_FSIZE (Python ignores SIGXFSZ: writes fail with EFBIG, SQLite says ``disk I/O
    error``): a bounded retry, then one line naming the database, exit 2; the probe log keeps what
    was written before."""
    import resource

    def limit() -> None:
        # past the empty store (its migrations: ~220 KB), short of the probes a study of 20 attempts writes
        resource.setrlimit(resource.RLIMIT_FSIZE, (300_000, 300_000))

    (tmp_path / "cwd").mkdir()
    out = tmp_path / "study"
    proc = hang.finish(
        [str(EXE), "run", "--attempts", "20", "--out", str(out)],
        limit_s=90,
        cwd=tmp_path / "cwd",
        env=_env(tmp_path, {}),
        preexec_fn=limit,  # one setrlimit in the child before exec
    )
    took = proc.seconds
    shown = f"exit {proc.returncode} in {took:.1f} s ({proc.cpu_s:.1f} s CPU)\n{proc.stderr[-3000:]}"
    assert proc.returncode == 2, shown
    assert "Traceback" not in proc.stdout + proc.stderr, shown
    errors = _error_lines(proc.stderr)
    assert len(errors) == 1, shown
    assert "skillreach.db" in errors[0], shown
    assert "disk I/O error" in errors[0] or "disk is full" in errors[0], shown
    assert took < 60, shown
    kept = (out / "probes.jsonl").read_text(encoding="utf-8").splitlines()
    assert kept, shown
    assert all(json.loads(line)["query_id"] for line in kept)


# ------------------------------------------------------------- a disk that fills under probes.jsonl


def _can_mount_tmpfs() -> bool:
    """``unshare -rm`` (a user and mount namespace of our own, root or not) lets us mount a small tmpfs."""
    import shutil

    if shutil.which("unshare") is None or not sys.platform.startswith("linux"):
        return False
    probe = hang.run(["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"], limit_s=30)
    return probe.code == 0


def test_a_disk_that_fills_under_the_probe_log_ends_in_one_line_and_resumes(tmp_path: Path) -> None:
    """A real ``skillreach run`` whose ``--out`` is a 400 KiB tmpfs (the probe log of the example at
    20 attempts is ~800 KB): one line naming ``probes.jsonl`` and what to do, exit 2, no traceback,
    the probes written before kept; then the same tmpfs grown to 8 MiB, the same command resumes from
    them and finishes (exit 0), every probe once."""
    if not _can_mount_tmpfs():
        pytest.skip("cannot mount a tmpfs in a user namespace here (unshare -rm)")
    (tmp_path / "cwd").mkdir()
    (tmp_path / "disk").mkdir()
    disk = tmp_path / "disk"
    study = disk / "study"
    env = _env(tmp_path, {})
    cmd = f"{EXE} run --attempts 20 --out {study}"
    script = f"""
set -u
mount -t tmpfs -o size=400k tmpfs {disk} || exit 90
{cmd} > {tmp_path}/run1.out 2> {tmp_path}/run1.err
echo $? > {tmp_path}/run1.code
cp {study}/probes.jsonl {tmp_path}/kept.jsonl
mount -o remount,size=8m {disk} || exit 91
{cmd} > {tmp_path}/run2.out 2> {tmp_path}/run2.err
echo $? > {tmp_path}/run2.code
cp {study}/probes.jsonl {tmp_path}/final.jsonl
"""
    proc = hang.finish(["unshare", "-rm", "sh", "-c", script], limit_s=240, cwd=tmp_path / "cwd", env=env)
    took = proc.seconds
    assert proc.returncode == 0, proc.stderr
    err1 = (tmp_path / "run1.err").read_text(errors="replace")
    shown = f"{took:.1f} s\n--- run 1 stderr\n{err1[-3000:]}"
    assert (tmp_path / "run1.code").read_text().strip() == "2", shown
    assert "Traceback" not in err1 + (tmp_path / "run1.out").read_text(errors="replace"), shown
    errors = _error_lines(err1)
    assert len(errors) == 1, shown
    assert f"{study}/probes.jsonl: No space left on device" in errors[0], shown
    assert "run the same command again" in errors[0], shown

    kept_lines = (tmp_path / "kept.jsonl").read_bytes().split(b"\n")
    complete = [json.loads(line) for line in kept_lines[:-1]]  # the last may be cut short by the full disk
    assert len(complete) > 100, shown

    err2 = (tmp_path / "run2.err").read_text(errors="replace")
    out2 = (tmp_path / "run2.out").read_text(errors="replace")
    shown2 = f"--- run 2\n{out2[-2000:]}\n{err2[-2000:]}"
    assert (tmp_path / "run2.code").read_text().strip() == "0", shown2
    assert "Traceback" not in out2 + err2, shown2
    assert "resumed" in out2, shown2
    final = [json.loads(line) for line in (tmp_path / "final.jsonl").read_text().splitlines()]
    keys = [(r["query_id"], r["attempt"]) for r in final]
    assert len(keys) == len(set(keys)), "a probe written twice"
    assert final[: len(complete)] == complete, "the probes kept were rewritten"
    import re

    counts = re.search(r"\((\d+) probed, (\d+) resumed\)", out2)
    assert counts is not None, shown2
    probed, resumed = map(int, counts.groups())
    assert resumed == len(complete), shown2
    assert probed + resumed == len(final), shown2


# ------------------------------------------------- PostgreSQL: a read behind another connection's lock


@pytest.mark.postgres
def test_a_postgres_statement_behind_a_lock_ends_at_the_statement_timeout(tmp_path: Path) -> None:
    """A live PostgreSQL whose ``probe_records`` table another connection holds locked (``LOCK TABLE …
    IN ACCESS EXCLUSIVE MODE``, never released while the command runs): ``skillreach run`` with
    ``SKILLREACH_DATABASE_STATEMENT_TIMEOUT_S=2`` ends in one line naming the setting, exit 2, no
    traceback, long before the default 300 s; the statement is not tried again."""
    import uuid

    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    from skillreach.store.database import Store

    raw = os.environ.get("SKILLREACH_TEST_PG_URL")
    if not raw:
        if os.environ.get("CI") == "true":
            pytest.fail("SKILLREACH_TEST_PG_URL is unset under CI=true: .ci/run must start PostgreSQL")
        pytest.skip("no PostgreSQL: set SKILLREACH_TEST_PG_URL (bash .ci/run starts one)")
    base = make_url(raw)
    name = f"sr_stmt_{uuid.uuid4().hex[:8]}"
    admin = create_engine(base.set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = base.set(database=name).render_as_string(hide_password=False)
    holder_engine = create_engine(url)
    try:
        Store(url).close()  # the tables, migrated
        with holder_engine.connect() as holder:
            holder.execute(text("LOCK TABLE probe_records IN ACCESS EXCLUSIVE MODE"))  # held: no commit
            (tmp_path / "cwd").mkdir()
            env = _env(
                tmp_path,
                {"SKILLREACH_DATABASE_URL": url, "SKILLREACH_DATABASE_STATEMENT_TIMEOUT_S": "2"},
            )
            proc = hang.finish(
                [str(EXE), "run", "--out", str(tmp_path / "study")],
                limit_s=200,
                cwd=tmp_path / "cwd",
                env=env,
            )
            took = proc.seconds
            holder.rollback()
    finally:
        holder_engine.dispose()
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE "{name}" WITH (FORCE)'))
        admin.dispose()
    shown = f"exit {proc.returncode} in {took:.1f} s\n{proc.stderr[-3000:]}"
    assert proc.returncode == 2, shown
    assert "Traceback" not in proc.stdout + proc.stderr, shown
    errors = _error_lines(proc.stderr)
    assert len(errors) == 1, shown
    assert "statement timeout" in errors[0], shown
    assert "database_statement_timeout_s" in errors[0], shown
    assert "SKILLREACH_DATABASE_STATEMENT_TIMEOUT_S: 2 s" in errors[0], shown
    assert name in errors[0], shown  # the database named
    assert "trying again" not in proc.stderr, shown  # a timed-out statement is not retried
    assert took < 150, shown  # the default (300 s) would not have ended it


def test_a_probe_cost_out_of_range_is_refused_by_every_reader(tmp_path: Path) -> None:
    """The study's own reader (resume, grading) names the line and the field; the columnar reader
    declines (the block reader then names the line)."""
    from skillreach.errors import InputError
    from skillreach.scoring.table import read_columns
    from skillreach.study.probe_log import read_probes

    good = {"query_id": "a", "attempt": 1, "invoked": [], "runtime": "keyword", "cost_usd": 0.5}
    for cost in (-0.01, 1e300, 2_000_000):
        path = tmp_path / "p.jsonl"
        rows = [good, {**good, "attempt": 2, "cost_usd": cost}]
        data = "".join(json.dumps(r) + "\n" for r in rows).encode()
        path.write_bytes(data)
        with pytest.raises(InputError, match=r"p\.jsonl:2: .*'cost_usd'"):
            read_probes(path)
        assert read_columns(data, source="p.jsonl") is None
    data = "".join(json.dumps({**good, "attempt": a}) + "\n" for a in (1, 2)).encode()
    assert read_columns(data, source="p.jsonl") is not None  # the reader itself reads good costs


# ------------------------------------------- Prefect's own logs and --debug tracebacks, redacted too


@pytest.fixture
def failing_provider() -> Iterator[Any]:
    """The Messages API stand-in answering every request (the canaries' too) with an error that echoes
    the key and a proxy URL with its password: the study fails inside its Prefect flow."""
    from tests.fakes.messages_api import MessagesAPI

    def responder(body: dict[str, Any]) -> Any:
        raise RuntimeError(f"invalid x-api-key: {KEY} via http://user:{PROXY_PW}@proxy.invalid:3128")

    with MessagesAPI(responder, latency=0.0) as api:
        yield api


def test_a_secret_in_an_error_is_masked_in_the_debug_output(tmp_path: Path, failing_provider: Any) -> None:
    """``run --debug`` whose every request fails with the key and a URL password in the error (and a
    configured secret, the database URL's password, in the environment): the error reaches the
    ``--debug`` output with its tracebacks; the secrets appear in none of it, nor in the study folder,
    ``SKILLREACH_HOME`` or ``PREFECT_HOME``. (Prefect's own loggers, of a tracked run, are tested in
    ``tests/test_flows_integration.py``: they need a server.)"""
    db_pw = "DBPWSECRET0123"
    db = tmp_path / "home" / "skillreach.db"
    db.parent.mkdir(parents=True)
    env = {
        "ANTHROPIC_BASE_URL": failing_provider.base_url,
        "SKILLREACH_DATABASE_URL": f"sqlite:///{db}?password={db_pw}",
    }
    res = _study(tmp_path, env, "--debug", limit_s=120)
    shown = f"exit {res.code} in {res.seconds:.1f} s\n--- stderr\n{res.stderr[-4000:]}"
    assert not res.hung, shown
    assert res.code not in (0, None), shown
    # the --debug output does hold tracebacks (what is checked is that they are masked)
    assert "Traceback" in res.stderr or "invalid x-api-key" in res.stderr, shown
    assert "invalid x-api-key" in res.stdout + res.stderr, shown
    for secret in (KEY, "KEYSECRET", PROXY_PW, db_pw):
        assert secret not in res.stdout + res.stderr, f"{secret!r} printed\n{shown}"
        for path, data in _files_text(tmp_path / "study", tmp_path / "home", tmp_path / "prefect"):
            assert secret.encode() not in data, f"{secret!r} written to {path}"
