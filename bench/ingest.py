"""``skillreach ingest`` of a million events beside the floor measured in the same run (issue 32).

Writes ``--events`` lines and records (default 1,000,000): Claude Code transcripts (90 %: sessions of
turns where most lines are assistant text and Bash traffic, with a prompt per turn and a Skill call, its
result and the loaded skill's text in four turns of ten; tool results of 20 to 140 output lines, so a
line is about 3 KB on average, as in the transcripts the real Claude Code CLI writes (3.2 KB in the
realcli test's) and OTLP JSON exports (10 %: Claude Code log
records, ten to a line). Then, in one process:

1. the floor: every line of every file read and decoded with ``orjson.loads`` alone (best of two);
2. ``ingest_sources`` of the same files into a fresh SQLite store; the ratio to the floor (goal ≤ 2.0×);
3. a re-ingest: 0 events added, 0 bytes read;
4. a few turns appended to some files: only those bytes read, only their events added.

    .venv/bin/python bench/ingest.py [--events N] [--keep DIR]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._calibrate import load, verdict
from skillreach.live.ingest import ingest_sources
from skillreach.store.database import Store
from tests.helpers.live_lines import (
    cc_assistant_text,
    cc_base_dir,
    cc_other_tool,
    cc_prompt,
    cc_skill_call,
    cc_skill_result,
    otlp_logs,
    otlp_record,
)

T0 = datetime(2026, 2, 1, tzinfo=UTC)
SKILLS = [f"skill-{i:02d}" for i in range(40)]
TEXT = ("I will read the configuration first, then change the handler and run the tests. " * 6).strip()
GOAL = 2.0


def _turn(session: str, k: int, at: datetime) -> list[str]:
    """One turn: a prompt, assistant text, three Bash calls and results, more text; a Skill call in four
    turns of ten."""
    u = f"{session}-{k}"
    lines = [
        cc_prompt(session, at, f"{u}-p", f"please fix the failing test number {k} in the parser"),
        cc_assistant_text(session, at, f"{u}-a", TEXT),
    ]
    if k % 10 < 4:
        skill = SKILLS[(k * 7 + len(session)) % len(SKILLS)]
        lines += [
            cc_skill_call(session, at, f"{u}-s", f"toolu_{u}", skill),
            cc_skill_result(session, at, f"{u}-r", f"toolu_{u}", skill),
            cc_base_dir(session, at, f"{u}-m", f"/home/dev/.claude/skills/{skill}", "# Skill\n\n" + TEXT),
        ]
    for j in range(3):
        out_lines = 20 + (k * 37 + j * 11) % 120  # a listing or a file read: 20 to 140 lines
        lines += [
            cc_other_tool(session, at, f"{u}-b{j}", f"toolu_{u}_{j}", result=False),
            cc_other_tool(session, at, f"{u}-o{j}", f"toolu_{u}_{j}", result=True, output_lines=out_lines),
        ]
    lines.append(cc_assistant_text(session, at, f"{u}-z", TEXT))
    return lines


def _otlp_line(n: int, at: datetime) -> str:
    records = []
    for i in range(10):
        s, p = f"otel-s{n % 500}", f"otel-p{n}-{i // 3}"
        kind = i % 5
        if kind == 0:
            records.append(
                otlp_record(
                    "claude_code.user_prompt", at, {"session.id": s, "prompt.id": p, "prompt_length": 60}
                )
            )
        elif kind == 1:
            records.append(
                otlp_record(
                    "claude_code.api_request",
                    at,
                    {
                        "session.id": s,
                        "prompt.id": p,
                        "model": "claude-sonnet-4-5",
                        "cost_usd": 0.002,
                        "input_tokens": 1800,
                        "output_tokens": 120,
                        "duration_ms": 900,
                    },
                )
            )
        elif kind == 2:
            records.append(
                otlp_record(
                    "claude_code.skill_activated",
                    at,
                    {"session.id": s, "prompt.id": p, "skill.name": SKILLS[n % len(SKILLS)]},
                )
            )
        else:
            records.append(
                otlp_record(
                    "claude_code.tool_result",
                    at,
                    {
                        "session.id": s,
                        "prompt.id": p,
                        "tool_name": "Bash",
                        "success": "true",
                        "duration_ms": 40,
                    },
                )
            )
    return otlp_logs(records)


def generate(root: Path, events: int) -> tuple[int, int]:
    """Transcripts and OTLP exports under ``root`` holding about ``events`` lines and records; (lines,
    records) written."""
    transcript_lines = events * 9 // 10
    otlp_lines = (events - transcript_lines) // 10
    written = 0
    s = 0
    while written < transcript_lines:
        session = f"sess-{s:05d}"
        out = []
        for k in range(20):
            out += _turn(session, k, T0 + timedelta(minutes=s * 30 + k))
        folder = root / "projects" / f"-work-app-{s % 50}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{session}.jsonl").write_text("\n".join(out) + "\n", encoding="utf-8")
        written += len(out)
        s += 1
    otel = root / "otel"
    otel.mkdir(parents=True, exist_ok=True)
    with open(otel / "logs.jsonl", "w", encoding="utf-8") as fh:
        for n in range(otlp_lines):
            fh.write(_otlp_line(n, T0 + timedelta(seconds=n)) + "\n")
    return written, otlp_lines * 10


def floor(root: Path) -> tuple[float, int]:
    """Seconds to read and ``orjson.loads`` every line of every file; bytes read."""
    t0 = time.perf_counter()
    total = 0
    for f in sorted(root.rglob("*.jsonl")):
        data = f.read_bytes()
        total += len(data)
        for line in data.split(b"\n"):
            if line:
                orjson.loads(line)
    return time.perf_counter() - t0, total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument(
        "--keep",
        type=Path,
        default=None,
        help="Write the files here and keep them (a later run reuses them).",
    )
    args = ap.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="skillreach-bench-ingest-"))
    try:
        t0 = time.perf_counter()
        if args.keep is not None and (root / "data" / "counts").is_file():  # written by an earlier run
            lines, records = (int(x) for x in (root / "data" / "counts").read_text().split())
            (root / "store.db").unlink(missing_ok=True)
            print(
                f"reusing {lines:,} transcript lines and {records:,} OTLP records "
                f"under {root / 'data'}; {load()}"
            )
        else:
            lines, records = generate(root / "data", args.events)
            (root / "data" / "counts").write_text(f"{lines} {records}\n")
            print(
                f"generated {lines:,} transcript lines and {records:,} OTLP records "
                f"({time.perf_counter() - t0:.1f} s); {load()}"
            )
        sources = [root / "data" / "projects", root / "data" / "otel"]
        floor_s, size = min(floor(root / "data") for _ in range(2))
        print(
            f"floor (read + orjson.loads of every line): {floor_s:.2f} s for {size / 2**20:.1f} MiB "
            f"({size / (lines + records // 10):,.0f} bytes a line)"
        )
        store = Store(f"sqlite:///{root / 'store.db'}")
        t0 = time.perf_counter()
        first = ingest_sources(sources, store)
        ingest_s = time.perf_counter() - t0
        print(
            f"ingest: {ingest_s:.2f} s, {first.events_added:,} events added from {first.files} files, "
            f"{first.bytes_read / 2**20:.1f} MiB read, {first.hidden} hidden, {first.skipped} lines skipped"
        )
        ratio = ingest_s / floor_s
        print(f"ratio ingest / floor: {ratio:.2f}x")
        t0 = time.perf_counter()
        again = ingest_sources(sources, store)
        print(
            f"re-ingest: {again.events_added} events added, {again.bytes_read} bytes read "
            f"({time.perf_counter() - t0:.2f} s)"
        )
        appended = 0
        files = sorted((root / "data" / "projects").rglob("*.jsonl"))[:5]
        for i, f in enumerate(files):
            more = "\n".join(_turn(f.stem, 100 + i, T0 + timedelta(days=40))) + "\n"
            with open(f, "a", encoding="utf-8") as fh:
                fh.write(more)
            appended += len(more.encode())
        t0 = time.perf_counter()
        third = ingest_sources(sources, store)
        print(
            f"after appending {appended:,} bytes to {len(files)} files: {third.events_added} events added, "
            f"{third.bytes_read:,} bytes read ({time.perf_counter() - t0:.2f} s)"
        )
        store.close()
        print(verdict("ingest / orjson floor", ratio, GOAL, "x"))
        ok = again.events_added == 0 and again.bytes_read == 0 and third.bytes_read == appended
        print(f"GOAL re-ingest adds nothing and reads only new bytes: {'met' if ok else 'NOT met'}")
        return 0
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
