"""Probes per second of each agent CLI runtime through ``skillreach run``, beside a bare loop of the very
same CLI invocations (goal: the ratio of their walls ≤ 1.10, as for the other runtimes).

For each agent (claude-code, pi, codex, gemini-cli, opencode, copilot) the REAL CLI from ``.ci/run``'s
cache runs against its model stand-in from the test suite (Messages API, Responses API, Gemini API, Chat
Completions), in this process's threads:

1. A recording run: ``skillreach run --runtime <agent> --concurrency C`` on 8 skills and ``--probes``
   queries, the CLI's path in ``[runtime_options]`` being a shim (``sh``) that saves its arguments, its
   environment, its working folder and a copy of the probe's folder (the generated home and
   configuration, the skills: the ``probe-*`` folder, or pi's ``skillreach-pi-*``), then ``exec``s the
   real CLI. Then the measured run, the same study with the real CLI's path (the shim's ``sh``, ``mktemp``,
   ``env`` and ``cp`` would cost a fast CLI's probe a tenth of its wall on a loaded machine). Its probing
   wall is the probe log's span (first probe's start to last probe's end); the command's whole wall
   (interpreter, Prefect, canaries) is printed beside it. The recording run has the probe's relay off
   (``relay = false``; codex, gemini-cli, opencode, copilot), so the recorded invocations call the
   stand-in itself; the measured run keeps it on, so what the relay costs is in the ratio.
2. The bare loop: every recorded study invocation put back where it ran (its probe folder restored
   before the clock starts), then the same argument lists, environments and working folders run by
   ``asyncio.create_subprocess_exec`` at the same concurrency, stdin closed, stdout read to its end,
   against the same stand-in. Codex's OpenTelemetry endpoint (skillreach's receiver, gone by then) is
   pointed at a sink that answers 200.

By default every study query is out of scope (the model answers in text, no skill is loaded), so both
sides run each CLI to its natural end and the difference is skillreach's own: the probe folder, the
generated configuration, reading the events, the receiver, the probe log, the flow. ``--activate``
makes every query load its skill: skillreach then ends each probe at the activation (early exit) while
the bare loop lets the CLI finish, so the ratio says more about early exit than about overhead.

    .venv/bin/python bench/agent_clis.py [--agents claude-code,pi,codex,gemini-cli,opencode,copilot]
                                         [--probes 12] [--rounds 1] [--concurrency 4] [--activate]
                                         [--option KEY=JSON] [--keep]

A CLI that is not installed is skipped with its reason (run ``.ci/run``). The machine is shared, so
each agent's two measurements run back to back and the ratio is the figure that means something; on two
cores under other sessions' load the wall ratio still moves by ±0.3 from run to run, so a second goal
line compares CPU, which the load does not change: the CLI's CPU a probe (the bare loop's) plus the CPU
skillreach's own processes spent while probing, a probe (``/proc``, every 100 ms, from the first probe's
start to the last one's end), over the CLI's alone.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import _calibrate as calibrate  # noqa: E402

from skillreach.runtimes import runtime_class  # noqa: E402
from skillreach.study.probe_log import read_probes  # noqa: E402
from tests.helpers import clis  # noqa: E402

SKILLREACH = Path(sys.executable).parent / "skillreach"
SKILLS = [f"skill-{i:02d}" for i in range(8)]
AGENTS = ("claude-code", "pi", "codex", "gemini-cli", "opencode", "copilot")
GOAL = 1.10


def wanted(text: str, activate: bool) -> str | None:
    """The skill the model loads for a query's text: a canary's always; a study query's with
    ``--activate``."""
    canary = re.search(r"Use the (skill-\d\d) skill", text)
    if canary:
        return canary.group(1)
    found = re.search(r"use (skill-\d\d)", text)
    return found.group(1) if found and activate else None


# ------------------------------------------------------------------------------------------ stand-ins
@contextlib.contextmanager
def stand_in(agent: str, activate: bool) -> Iterator[Any]:
    """The agent's model API stand-in (``base_url``, ``requests``)."""
    if agent in ("claude-code", "pi"):
        from tests.fakes.messages_api import MessagesAPI, Reply, query_text, skill_call, text_reply, tool_call
        from tests.fakes.messages_api import turn_of as messages_turn

        def messages(body: dict[str, Any]) -> Any:
            skill = wanted(query_text(body), activate)
            if skill is None or messages_turn(body) > 0:
                return text_reply("Done.")
            if "Skill" in {t.get("name") for t in body.get("tools") or []}:
                return Reply([skill_call(skill)])
            found = re.search(
                rf"<location>([^<]*/{skill}/SKILL\.md)</location>", json.dumps(body.get("system"))
            )
            return Reply([tool_call("read", {"path": found.group(1)})]) if found else text_reply("Done.")

        with MessagesAPI(messages) as api:
            yield api
    elif agent == "codex":
        from tests.fakes.responses_api import (
            ResponsesAPI,
            ResponsesReply,
            message,
            query_of,
            skill_read,
            turn_of,
        )

        def responses(body: dict[str, Any]) -> ResponsesReply:
            skill = wanted(query_of(body), activate)
            if skill is None or turn_of(body) > 0:
                return ResponsesReply([message("Done.")])
            return ResponsesReply([skill_read(body, skill)])

        with ResponsesAPI(responses) as api:
            yield api
    elif agent == "gemini-cli":
        from tests.fakes.gemini_api import GeminiCliAPI
        from tests.fakes.gemini_api import query_of as gemini_query

        def steps(body: dict[str, Any]) -> list[Any]:
            skill = wanted(gemini_query(body), activate)
            return [skill] if skill else []

        with GeminiCliAPI(steps) as api:
            yield api
    else:
        from tests.fakes.openai_chat import OpenAIChat, completion, first_user_text
        from tests.fakes.openai_chat import tool_call as chat_call

        arg = "name" if agent == "opencode" else "skill"

        def chat(body: dict[str, Any]) -> dict[str, Any]:
            skill = wanted(first_user_text(body).rsplit("\n", 1)[-1], activate)
            done = sum(1 for m in body["messages"] if m.get("role") == "tool")
            if skill and not done:
                return completion(model="fake-model", tool_calls=[chat_call("skill", {arg: skill})])
            return completion(model="fake-model", text="Done.")

        with OpenAIChat(responder=chat) as api:
            yield api


@dataclass(frozen=True)
class Agent:
    find: Callable[[], str | None]
    path_option: str
    key_env: dict[str, str]
    model: str | None = None


SETUP = {
    "claude-code": Agent(
        clis.real_claude, "claude_path", {"ANTHROPIC_API_KEY": "sk-bench"}, "claude-sonnet-4-6"
    ),
    "pi": Agent(clis.real_pi, "pi_path", {"ANTHROPIC_API_KEY": "sk-bench"}, "claude-sonnet-4-5"),
    "codex": Agent(clis.real_codex, "codex_path", {"OPENAI_API_KEY": "sk-bench"}),
    "gemini-cli": Agent(clis.real_gemini, "gemini_path", {"GEMINI_API_KEY": "k-bench"}),
    "opencode": Agent(clis.real_opencode, "opencode_path", {"OPENAI_API_KEY": "k-bench"}, "fake-model"),
    "copilot": Agent(clis.real_copilot, "copilot_path", {"OPENAI_API_KEY": "k-bench"}, "fake-model"),
}


def missing(agent: str) -> str | None:
    """Why ``agent`` cannot run here (None: it can)."""
    if SETUP[agent].find() is None:
        return "the real CLI is not installed (run .ci/run)"
    if agent == "opencode" and shutil.which("rg") is None:
        return "ripgrep (rg) is not on PATH: OpenCode's skill tool cannot run offline without it"
    return None


# ------------------------------------------------------------------------------------------- the shim
SHIM = """#!/bin/sh
case "$*" in
*"request "*)
  d=$(mktemp -d {capture}/inv-XXXXXX)
  printf '%s\\0' "$@" > "$d/argv"
  env -0 > "$d/env"
  pwd > "$d/cwd"
  p=$PWD
  while [ "$p" != / ] && [ -n "$p" ]; do
    case "${{p##*/}}" in probe-*|skillreach-pi-*) break ;; esac
    p=${{p%/*}}
  done
  if [ -n "$p" ] && [ "$p" != / ]; then printf '%s' "$p" > "$d/root"; cp -a "$p" "$d/tree"; fi
  ;;
esac
exec {real} "$@"
"""


@dataclass
class Invocation:
    argv: list[str]
    env: dict[str, str]
    cwd: str
    root: str | None
    tree: Path | None


def recorded(capture: Path) -> list[Invocation]:
    out = []
    for d in sorted(capture.glob("inv-*")):
        env = dict(
            item.split("=", 1) for item in (d / "env").read_text(errors="replace").split("\0") if "=" in item
        )
        argv = (d / "argv").read_text(errors="replace").split("\0")[:-1]
        root = (d / "root").read_text() if (d / "root").exists() else None
        out.append(Invocation(argv, env, (d / "cwd").read_text().strip(), root, d / "tree" if root else None))
    return out


class _Sink(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", "2")
        self.end_headers()
        self.wfile.write(b"{}")


@contextlib.contextmanager
def otlp_sink() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1/logs"
    finally:
        server.shutdown()
        server.server_close()


def restore(invocations: list[Invocation], otlp: str | None) -> None:
    """Each probe's folder back where it ran (skillreach removed it), before the clock starts."""
    for inv in invocations:
        if inv.root is None or inv.tree is None:
            continue
        root = Path(inv.root)
        shutil.rmtree(root, ignore_errors=True)
        root.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["cp", "-a", str(inv.tree), str(root)], check=True)
        if otlp:
            for config in root.glob("codex-home/config.toml"):
                text = re.sub(r'endpoint = "[^"]*"', f'endpoint = "{otlp}"', config.read_text())
                config.write_text(text)


async def bare_loop(real: str, invocations: list[Invocation], concurrency: int) -> tuple[float, list[float]]:
    """The invocations at ``concurrency``: (wall, each one's wall)."""
    gate = asyncio.Semaphore(concurrency)
    walls: list[float] = []

    async def one(inv: Invocation) -> None:
        async with gate:
            t0 = time.perf_counter()
            proc = await asyncio.create_subprocess_exec(
                real,
                *inv.argv,
                env=inv.env,
                cwd=inv.cwd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
            await proc.communicate()
            walls.append(time.perf_counter() - t0)

    t0 = time.perf_counter()
    await asyncio.gather(*(one(inv) for inv in invocations))
    return time.perf_counter() - t0, walls


# ------------------------------------------------------------------------------------------ the study
def write_study(root: Path, probes: int) -> None:
    for name in SKILLS:
        folder = root / "skills" / name
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: Handle chores of kind {name[-2:]} for the team (plans, checks, "
            f"reports).\n---\n\n# {name}\n\nSteps for chores of kind {name[-2:]}.\n"
        )
    queries = [
        {
            "id": f"q{i:03d}",
            "text": f"request {i:03d}: use {SKILLS[i % len(SKILLS)]} for a chore",
            "expected_skill": SKILLS[i % len(SKILLS)],
            "kind": "implicit",
        }
        for i in range(probes)
    ]
    (root / "queries.json").write_text(json.dumps({"catalog_id": "bench", "queries": queries}))


def measure(agent: str, args: argparse.Namespace) -> dict[str, Any]:
    setup = SETUP[agent]
    real = setup.find()
    assert real is not None
    tmp = Path(tempfile.mkdtemp(prefix=f"bench-{agent}-"))
    try:
        capture = tmp / "capture"
        capture.mkdir()
        shim = tmp / "shim" / Path(real).name
        shim.parent.mkdir()
        shim.write_text(SHIM.format(capture=capture, real=real))
        shim.chmod(0o755)
        write_study(tmp, args.probes)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_API", "SKILLREACH_"))}
        env.update(setup.key_env, COLUMNS="200")
        with stand_in(agent, args.activate) as api:
            extra = {k: json.loads(v) for k, v in (o.split("=", 1) for o in args.option)}
            head = f"model = {json.dumps(setup.model)}\n" if setup.model else ""
            relayed = "relay" in runtime_class(agent).Options.model_fields  # type: ignore[attr-defined]
            for name, path in (("record", shim), ("study", Path(real))):
                options = {setup.path_option: str(path), "base_url": api.base_url, **extra}
                if name == "record" and relayed:  # the recorded invocations must reach the stand-in
                    options["relay"] = False  # itself: the bare loop replays them with no relay up
                body = "".join(f"{k} = {_toml(v)}\n" for k, v in options.items())
                (tmp / f"{name}.toml").write_text(f"{head}[runtime_options]\n{body}")

            def command(name: str) -> list[str]:
                return [
                    str(SKILLREACH), "run", "--config", f"{name}.toml", "--skills", "skills", "--queries",
                    "queries.json", "--runtime", agent, "--concurrency", str(args.concurrency), "--out", name,
                ]  # fmt: skip

            recording = subprocess.run(
                command("record"), cwd=tmp, env=env, capture_output=True, text=True, check=False
            )
            if recording.returncode != 0:
                return {"agent": agent, "failed": f"the recording run exited {recording.returncode}: "
                        f"{recording.stderr[-800:]}"}  # fmt: skip
            argv = command("study")
            t0 = time.perf_counter()
            before = _children_cpu()
            child = subprocess.Popen(
                argv, cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
            own: dict[int, float] = {}
            series: list[tuple[datetime, float]] = []
            sampler = threading.Thread(target=_sample_python, args=(child, own, series), daemon=True)
            sampler.start()
            stdout, stderr = child.communicate()
            sampler.join()
            run = subprocess.CompletedProcess(argv, child.returncode, stdout, stderr)
            command = time.perf_counter() - t0
            run_cpu = _children_cpu() - before
            if run.returncode != 0:
                return {
                    "agent": agent,
                    "failed": f"skillreach run exited {run.returncode}: {run.stderr[-800:]}",
                }
            records = read_probes(tmp / "study" / "probes.jsonl")
            ends = [datetime.fromisoformat(r.finished_at or "") for r in records]
            starts = [e - timedelta(milliseconds=r.duration_ms) for e, r in zip(ends, records, strict=True)]
            span = (max(ends) - min(starts)).total_seconds()
            inside = [c for t, c in series if min(starts) <= t <= max(ends)]
            probing_cpu = (inside[-1] - inside[0]) if len(inside) > 1 else float("nan")
            invocations = recorded(capture)
            with otlp_sink() as sink:
                restore(invocations, sink if agent == "codex" else None)
                before = _children_cpu()
                bare, walls = asyncio.run(bare_loop(real, invocations, args.concurrency))
                bare_cpu = _children_cpu() - before
            requests = len(api.requests)
    finally:
        if args.keep:
            print(f"  ({agent}: kept {tmp})")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    errors = [r.error for r in records if r.error]
    return {
        "agent": agent,
        "version": records[0].runtime_version if records else None,
        "probes": len(records),
        "errors": len(errors),
        "first_error": errors[0] if errors else None,
        "invoked": sum(1 for r in records if r.invoked),
        "bare_runs": len(invocations),
        "command_s": command,
        "span_s": span,
        "bare_s": bare,
        "probe_ms": sorted(r.duration_ms for r in records),
        "bare_ms": sorted(round(w * 1000) for w in walls),
        "requests": requests,
        "python_cpu": sum(own.values()),
        "probing_cpu": probing_cpu,
        "run_cpu": run_cpu,
        "bare_cpu": bare_cpu,
    }


def _toml(value: Any) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + " }"
    return json.dumps(value)


def _children_cpu() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _sample_python(
    child: subprocess.Popen[str], out: dict[int, float], series: list[tuple[datetime, float]]
) -> None:
    """CPU seconds of every Python process in the command's tree (skillreach and any server it starts),
    sampled every 100 ms until the command ends (``series``: their sum, with the time)."""
    tick = os.sysconf("SC_CLK_TCK")
    while child.poll() is None:
        tree = {child.pid}
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                stat = (proc / "stat").read_text().rsplit(")", 1)
                comm = stat[0].split("(", 1)[1]
                fields = stat[1].split()
            except (OSError, IndexError):
                continue
            pid, ppid = int(proc.name), int(fields[1])
            if pid == child.pid or (ppid in tree and comm.startswith(("python", "skillreach", "prefect"))):
                tree.add(pid)
                out[pid] = (int(fields[11]) + int(fields[12])) / tick
        series.append((datetime.now(UTC), sum(out.values())))
        time.sleep(0.1)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--agents", default=",".join(AGENTS))
    parser.add_argument("--probes", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=1, help="rounds per agent (goal: median)")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--activate", action="store_true", help="every study query loads its skill")
    parser.add_argument("--keep", action="store_true", help="keep each agent's folder")
    parser.add_argument(
        "--option", action="append", default=[], metavar="KEY=JSON", help="one more runtime option (repeated)"
    )
    args = parser.parse_args()
    scenario = (
        "every query loads its skill (early exit)" if args.activate else "no skill loaded (text answer)"
    )
    print(
        f"{calibrate.load()}; {args.probes} probes per agent at concurrency {args.concurrency}; "
        f"{len(SKILLS)} skills; {scenario}"
    )
    print(
        f"{'agent':12} {'version':22} {'probes/s run':>12} {'probes/s bare':>13} {'ratio':>6} "
        f"{'span s':>7} {'bare s':>7} {'command s':>9}"
    )
    verdicts = []
    for agent in args.agents.split(","):
        why = missing(agent)
        if why:
            print(f"{agent:12} skipped: {why}")
            continue
        ratios: list[float] = []
        cpu_ratios: list[float] = []
        for _ in range(args.rounds):
            f = measure(agent, args)
            if "failed" in f:
                print(f"{agent:12} failed: {f['failed']}")
                break
            ratio = f["span_s"] / f["bare_s"]
            ratios.append(ratio)
            cli_cpu = f["bare_cpu"] / f["bare_runs"]
            cpu_ratios.append((cli_cpu + f["probing_cpu"] / f["probes"]) / cli_cpu)
            print(
                f"{agent:12} {str(f['version'])[:22]:22} {f['probes'] / f['span_s']:>12.3f} "
                f"{f['bare_runs'] / f['bare_s']:>13.3f} {ratio:>6.2f} {f['span_s']:>7.1f} "
                f"{f['bare_s']:>7.1f} {f['command_s']:>9.1f}"
            )
            print(
                f"{'':12} probe walls (ms) {f['probe_ms']}; bare {f['bare_ms']}; {f['errors']} errors, "
                f"{f['invoked']} probes with a skill, {f['requests']} requests to the stand-in"
            )
            print(
                f"{'':12} CPU: skillreach run {f['run_cpu']:.1f} s in all, of which its own Python processes "
                f"{f['python_cpu']:.1f} s ({1000 * f['probing_cpu'] / f['probes']:.0f} ms a probe while "
                f"probing); bare loop's CLIs {f['bare_cpu']:.1f} s "
                f"({1000 * f['bare_cpu'] / f['bare_runs']:.0f} ms a probe)"
            )
            if f["first_error"]:
                print(f"{'':12} first error: {f['first_error'][:300]}")
            if f["bare_runs"] != f["probes"]:
                print(f"{'':12} recorded {f['bare_runs']} study invocations for {f['probes']} probes")
        if len(ratios) < args.rounds:
            verdicts.append(f"GOAL {agent} skillreach run / bare loop: failed")
            continue
        what = f"{agent} probing wall through skillreach run / bare loop (median of {len(ratios)})"
        verdicts.append(calibrate.verdict(what, statistics.median(ratios), GOAL))
        what = f"{agent} CPU a probe, CLI + skillreach's own / CLI alone (median of {len(ratios)})"
        verdicts.append(calibrate.verdict(what, statistics.median(cpu_ratios), GOAL))
    for line in verdicts:
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
