"""A team's week for the dashboard's tests, made by the commands a team runs, in a git repository of its
own: offline studies (`skillreach run` with the fake runtime's script), baselines recorded and committed,
an edit and an added skill that takes a neighbour's cases (a breached gate, an alert), a re-baselining
that keeps the drop as a candidate, the model snapshot moved (a new segment of every history), a
cross-agent study of its own catalog; and `skillreach ui` started on the result.

Hostile text is part of it: a query with a script element, a description with markup, a transcript
(tool input and final answer) that tries to close its element and run a script.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.helpers import hang
from tests.helpers.webhooks import WebhookSink

__all__ = ["HOSTILE", "UI_URL", "Team", "make_team", "running_ui", "sr"]

SKILLREACH = Path(sys.executable).with_name("skillreach")
HOSTILE = "<script>window.__pwned=1</script>"
OLD, NEW = "fake-snap-20260101", "fake-snap-20260301"
UI_URL = "http://dash.example.invalid:8420"
SKILLS = {
    "alpha": "Convert spreadsheets and CSV tables into charts. Use when the user wants a chart from data.",
    "beta": "Write and fix Dockerfiles and container images. Use for docker build problems.",
    "gamma": "Translate text <b onmouseover=\"window.__pwned=4\">between</b> human languages on request.",
}
THIEF = ("delta", "Build, fix and optimise Docker containers and images; use for any container problem.")


def sr(*args: str, cwd: Path, ok: tuple[int, ...] = (0,), env: dict[str, str] | None = None,
       timeout: float = 600) -> hang.Outcome:
    """``skillreach ARGS`` in ``cwd``; its exit code must be one of ``ok``."""
    out = hang.finish([str(SKILLREACH), *args], limit_s=timeout, cwd=cwd, env={**os.environ, **(env or {})})
    assert out.returncode in ok, f"skillreach {' '.join(args)} → {out.returncode}\n{out.stdout}\n{out.stderr}"
    return out


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


def _skill(root: Path, name: str, desc: str) -> None:
    (root / name).mkdir(parents=True, exist_ok=True)
    text = f"---\nname: {name}\ndescription: '{desc}'\n---\n# {name}\n\nSteps.\n"
    (root / name / "SKILL.md").write_text(text, encoding="utf-8")


def _script(path: Path, names: list[str], *, thief: bool) -> Path:
    """The fake agent: each case reaches its skill, but with the thief listed, beta's cases 0–2 go to it.
    alpha-0 is followed into compliance: a tool call and an answer that try to break out of the page."""
    script: dict[str, Any] = {f"canary-{i}": names for i in (1, 2, 3)}
    for n in SKILLS:
        for i in range(4):
            script[f"{n}-{i}"] = [n]
    if thief:
        for i in range(3):
            script[f"beta-{i}"] = [THIEF[0]]
    script["alpha-0"] = {
        "invoked": ["alpha"],
        "tool_calls": [{"tool": "Bash", "input": {"command": f"make chart </pre>{HOSTILE}"}}],
        "final_text": f'Chart ready <img src=x onerror="window.__pwned=2"> {HOSTILE}',
    }
    script["alpha-4"] = ["alpha"]
    path.write_text(json.dumps(script), encoding="utf-8")
    return path


def _config(path: Path, model: str, script: Path) -> Path:
    path.write_text(
        f'skills = ["skills"]\nqueries = "evals/queries.json"\nruntime = "fake"\nmodel = "{model}"\n'
        f"compliance = true\n\n[runtime_options]\nscript = \"{script.as_posix()}\"\n",
        encoding="utf-8",
    )
    return path


@dataclass
class Team:
    repo: Path
    runs: dict[str, str]
    """name → study id: r1 (first bar), r2 (delta added: beta breached), r3 (new model snapshot)."""
    agents: Path
    alerts: list[dict[str, Any]]
    """What the webhook received (r2's breach)."""


def _study_id(folder: Path) -> str:
    return str(json.loads((folder / "study.json").read_text(encoding="utf-8"))["study_id"])


def make_team(root: Path) -> Team:
    repo = root / "repo"
    skills = repo / "skills"
    for name, desc in SKILLS.items():
        _skill(skills, name, desc)
    queries = [{"id": f"{n}-{i}", "text": f"please help with {n} task {i}", "expected_skill": n,
                "kind": "implicit"} for n in SKILLS for i in range(4)]
    queries[0]["checks"] = {"requires": [{"tool": "Bash", "pattern": "make chart"}],
                            "forbids": [{"tool": "Bash", "pattern": "rm -rf"}],
                            "output": [{"contains": "Chart ready"}]}
    queries.append({"id": "alpha-4", "text": f"{HOSTILE} draw a chart of these numbers",
                    "expected_skill": "alpha", "kind": "implicit"})
    queries.append({"id": "oos-0", "text": "what is the weather", "expected_skill": None,
                    "kind": "out_of_scope"})
    (repo / "evals").mkdir(parents=True)
    (repo / "evals" / "queries.yaml").write_text(json.dumps({"catalog_id": "all", "queries": queries}))
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "team@example.invalid")
    git(repo, "config", "user.name", "Team")
    (repo / ".gitignore").write_text("runs/\n.skillreach/\nagents/\n")
    sr("queries", "seal", "evals/queries.yaml", "--skills", "skills", "--out", "evals/queries.json", cwd=repo)
    names = sorted(SKILLS)
    cfg = _config(repo / "study.toml", OLD, _script(repo / "script-1.json", names, thief=False))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "skills and their queries")
    runs: dict[str, str] = {}
    # Monday: the first study and its bars
    sr("run", "--config", str(cfg), "--out", "runs/r1", cwd=repo)
    runs["r1"] = _study_id(repo / "runs" / "r1")
    sr("baseline", "record", "--artifact", "runs/r1/artifact.json", "--all", "--commit", "--skills", "skills",
       "--queries", "evals/queries.json", cwd=repo)
    time.sleep(1.1)  # distinct commit times for the markers
    # Tuesday: gamma's description edited; delta added, and it takes beta's cases
    _skill(skills, "gamma", SKILLS["gamma"] + " Also writes multilingual release notes.")
    git(repo, "commit", "-q", "-am", "gamma: a broader description")
    time.sleep(1.1)
    _skill(skills, *THIEF)
    names = sorted([*SKILLS, THIEF[0]])
    _script(repo / "script-1.json", names, thief=True)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "delta: a container skill")
    with WebhookSink() as sink:  # beta's gate breaches: one alert, linking to the dashboard
        env = {"SKILLREACH_UI_URL": UI_URL,
               "SKILLREACH_ALERT_WEBHOOKS": json.dumps([f"{sink.base_url}/services/T/B/secret"])}
        sr("run", "--config", str(cfg), "--gate", "--out", "runs/r2", cwd=repo, ok=(1,), env=env)
    alerts = list(sink.requests)
    runs["r2"] = _study_id(repo / "runs" / "r2")
    # Wednesday: re-baselining keeps beta's drop as a candidate
    sr("baseline", "rebaseline", "--rev", "HEAD", "--config", str(cfg), "--commit", "--in-process", cwd=repo,
       ok=(1,))
    # Thursday: the model snapshot moved
    cfg2 = _config(repo / "study-2.toml", NEW, repo / "script-1.json")
    sr("run", "--config", str(cfg2), "--gate", "--out", "runs/r3", cwd=repo, ok=(0, 1, 3))
    runs["r3"] = _study_id(repo / "runs" / "r3")
    # and a study across agents, of a catalog of its own
    agents = repo / "agents"
    for name, desc in (("one", "Bake bread and pastry at home."),
                       ("two", "Repair bicycles and their gears.")):
        _skill(agents / "skills", name, desc)
    aq = [{"id": f"{n}-{i}", "text": f"help me {w} {i}", "expected_skill": n, "kind": "implicit"}
          for n, w in (("one", "bake bread"), ("two", "repair bicycles")) for i in range(3)]
    (agents / "queries.yaml").write_text(json.dumps({"catalog_id": "all", "queries": aq}))
    sr("queries", "seal", "agents/queries.yaml", "--skills", "agents/skills", "--out", "agents/queries.json",
       cwd=repo)
    ascript = {f"canary-{i}": ["one", "two"] for i in (1, 2, 3)}
    ascript.update({q["id"]: [q["expected_skill"]] for q in aq})
    ascript["two-0"] = ["one"]
    (agents / "script.json").write_text(json.dumps(ascript))
    (agents / "agents.toml").write_text(
        'skills = ["skills"]\nqueries = "queries.json"\n\n'
        f'[runtime_options.fake]\nscript = "{(agents / "script.json").as_posix()}"\n')
    sr("run", "--config", str(agents / "agents.toml"), "--runtime", "fake,keyword", "--out", "agents/matrix",
       cwd=repo)
    return Team(repo, runs, agents / "matrix", alerts)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Ui:
    url: str
    token: str | None
    proc: subprocess.Popen[str]
    log: Path

    def get(self, path: str, **kw: Any) -> httpx.Response:
        return httpx.get(self.url + path, timeout=60, **kw)


@contextlib.contextmanager
def running_ui(repo: Path, *args: str, log: Path) -> Iterator[Ui]:
    """``skillreach ui ARGS`` in ``repo`` on a free port, until every study is read into the history."""
    port = _free_port()
    fh = log.open("w", encoding="utf-8")
    proc = subprocess.Popen([str(SKILLREACH), "ui", "--port", str(port), *args], cwd=repo, stdout=fh,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = hang.Deadline(120)
        while True:
            assert proc.poll() is None, log.read_text(encoding="utf-8")
            try:
                health = httpx.get(url + "/healthz", timeout=5).json()
                if health["studies_read"] >= health["studies"] and health["ready"]:  # warmed up too
                    break
            except httpx.HTTPError:
                pass
            assert not deadline.expired(), "the dashboard did not read the studies and warm up in 120 s"
            time.sleep(0.2)
        text = log.read_text(encoding="utf-8")
        assert "Traceback" not in text, text
        token = text.split("?token=")[1].split()[0] if "?token=" in text else None
        yield Ui(url, token, proc, log)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        fh.close()
