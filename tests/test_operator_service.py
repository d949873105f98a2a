"""A service that describes itself (issue 39, problems 3–8 and 10), run the way an operator runs it: the wheel
of this checkout installed into a clean venv, `skillreach serve` from it in a working folder of its own (a
real Prefect server on 127.0.0.1, the process work pool, the deployments, a supervised worker), the skills
in a git repository of their own, the agent the anthropic runtime against the local Messages API stand-in,
the alerts read from a real HTTP receiver on 127.0.0.1. Every command is the installed `skillreach`.

In order, on one service:

- it comes up and says which service it is (`.skillreach/service.json`); a second `serve` in its folder is
  refused in one line naming it (problem 5);
- the first nightly and the re-baselining it starts; `status` from another folder, `baseline status` in
  the service's folder and `alerts list` read the service, not the folder they run in (problem 4);
- `gc --keep 30d --dry-run` and `gc` on the running service, then the service goes on (problem 3);
- one commit removes a skill (its cases left in the query set) and renames another (same description and
  body): one alert for each, the re-baselining runs on the rest, the rename's baseline carried (problem 6);
- the nightly's process killed with kill -9: resumed without a person from its probes; killed again after
  that: it stays Crashed and is said (problem 8);
- the worker killed: serve restarts it, `status` shows it, one alert says it (problem 8).

Integration: a wheel build and install, one server, ~15 flow runs; several minutes of wall time.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import REPO
from tests.fakes.messages_api import MessagesAPI, Reply, ScriptResponder, query_text
from tests.helpers import hang
from tests.helpers.gitworld import BRANCH, git, on_branch
from tests.helpers.webhooks import WebhookSink

pytestmark = pytest.mark.integration

UV = Path(sys.executable).with_name("uv")
POOL = "operator-service"
ALIAS, SNAPSHOT = "claude-ops", "claude-ops-20260101"
SKILLS = {
    "alpha": "Convert spreadsheets and CSV tables into charts. Use when the user wants a chart from data.",
    "beta": "Write and fix Dockerfiles and container images. Use for docker build problems.",
    "gamma": "Translate text between human languages. Use when the user asks for a translation.",
    "epsilon": "Summarise meeting notes into minutes. Use for the minutes of a meeting.",
}
NEW_NAME = "lingo"
"""gamma's name after its rename (a word no description holds)."""
FINISHED = ["COMPLETED", "FAILED", "CRASHED", "CANCELLED"]
ACTIVE = ["SCHEDULED", "PENDING", "RUNNING", "CANCELLING", "PAUSED"]


class Agent:
    """Each query reaches its skill under the name the listing shows it (gamma's cases reach lingo once
    gamma is renamed)."""

    def __call__(self, body: dict[str, Any]) -> Reply:
        listing = json.dumps({"system": body.get("system"), "tools": body.get("tools")})
        names = [*SKILLS, NEW_NAME]
        script: dict[str, list[Any]] = {f"the {n} skill": [n] for n in names}
        for name in SKILLS:
            target = NEW_NAME if name == "gamma" and NEW_NAME in listing else name
            script[f"help with {name} task"] = [target]
        return ScriptResponder(script)(body)


def _run(
    args: list[str], cwd: Path, env: dict[str, str], timeout: float = 600
) -> hang.Outcome:
    return hang.finish(args, cwd=cwd, env=env, limit_s=timeout)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _processes(test: Any) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if test(entry):
                    out.append(int(entry.name))
    return out


def _alive(entry: Path) -> bool:
    return (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"


def _running_flow(run_id: str) -> Any:
    def test(entry: Path) -> bool:
        return f"PREFECT__FLOW_RUN_ID={run_id}".encode() in (entry / "environ").read_bytes() and _alive(entry)

    return test


def _worker_of(pool: str) -> Any:
    def test(entry: Path) -> bool:
        cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        return "worker start" in cmd and f"--pool {pool}" in cmd and _alive(entry)

    return test


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This checkout's wheel installed into a clean venv (with the ``anthropic`` extra); its ``bin``."""
    if not UV.is_file():
        pytest.skip("uv is not installed beside the test interpreter (make .venv/.installed installs it)")
    base = tmp_path_factory.mktemp("wheel")
    src = base / "src"
    shutil.copytree(REPO, src, symlinks=True, ignore=shutil.ignore_patterns(
        ".venv", ".git", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", ".skillreach", ".prefect",
        "runs", ".hypothesis"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PIP_"))}
    built = _run([str(UV), "build", "--wheel", "--quiet", "-o", str(base / "dist"), str(src)], src, env)
    assert built.returncode == 0, built.stderr
    whl = next((base / "dist").glob("skillreach-*.whl"))
    venv = base / "venv"
    made = _run([str(UV), "venv", "--quiet", "--python", sys.executable, str(venv)], base, env)
    assert made.returncode == 0, made.stderr
    # the anthropic runtime's extra: the agent here is the Messages API stand-in
    wanted = f"skillreach[anthropic] @ {whl.as_uri()}"
    installed = _run([str(UV), "pip", "install", "--quiet", "--python", str(venv / "bin" / "python"), wanted],
                     base, env)
    if installed.returncode != 0 and re.search(r"(?i)connect|network|dns|resolve|offline", installed.stderr):
        pytest.skip(f"the package index cannot be reached: {installed.stderr.strip().splitlines()[-1]}")
    assert installed.returncode == 0, installed.stderr
    return venv / "bin"


class Service:
    """`skillreach serve` (from the wheel) in its working folder, and what an operator types."""

    def __init__(self, bin_dir: Path, root: Path, env: dict[str, str]) -> None:
        self.bin, self.root, self.env = bin_dir, root, env
        self.folder = root / "op"
        self.port = _free_port()
        self.api = f"http://127.0.0.1:{self.port}/api"
        self.log = root / "serve.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def skillreach(self, *args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
                   timeout: float = 300) -> hang.Outcome:
        return _run([str(self.bin / "skillreach"), *args], cwd or self.folder, env or self.client_env(),
                    timeout)

    def client_env(self) -> dict[str, str]:
        return {**self.env, "PREFECT_API_URL": self.api}

    def start(self) -> None:
        ready = self.said().count("serve: worker on pool")  # a restart appends to the same log
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen([str(self.bin / "skillreach"), "serve", "--port", str(self.port),
                                          "--pool", POOL], env=self.env, cwd=self.folder,
                                         start_new_session=True, stdout=out, stderr=subprocess.STDOUT)
        deadline = hang.Deadline(600)
        while self.said().count("serve: worker on pool") <= ready:
            assert self.proc.poll() is None, f"serve exited: {self.said()[-3000:]}"
            deadline.check(lambda: f"serve did not come up: {self.said()[-3000:]}")
            time.sleep(1)

    def said(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(90)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        home = f"PREFECT_HOME={self.env['PREFECT_HOME']}".encode()
        for pid in _processes(lambda e: home in (e / "environ").read_bytes()):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    # -- the Prefect API, as the UI reads it -----------------------------------------------------------

    def call(self, method: str, path: str, body: Any = None) -> Any:
        for attempt in range(30):  # across a restart of the server
            try:
                resp = httpx.request(method, f"{self.api}{path}", json=body, timeout=30)
                resp.raise_for_status()
                return resp.json() if resp.content else None
            except httpx.HTTPError:
                if attempt == 29:
                    raise
                time.sleep(2)
        return None

    def runs(self, deployment: str | None = None, states: list[str] | None = None) -> list[dict[str, Any]]:
        body: dict[str, Any] = {"sort": "EXPECTED_START_TIME_ASC", "limit": 200,
                                "flow_runs": {"deployment_id": {"is_null_": False}}}
        if states:
            body["flow_runs"]["state"] = {"type": {"any_": states}}
        if deployment:
            body["deployments"] = {"name": {"any_": [deployment]}}
        rows: list[dict[str, Any]] = self.call("POST", "/flow_runs/filter", body)
        return rows

    def run(self, run_id: str) -> dict[str, Any]:
        got: dict[str, Any] = self.call("GET", f"/flow_runs/{run_id}")
        return got

    def quiet_schedules(self) -> None:
        """The test is the clock: the nightly's and watch's schedules off, their scheduled runs gone."""
        for dep in self.call("POST", "/deployments/filter", {"limit": 50}):
            for sched in dep.get("schedules") or []:
                self.call("PATCH", f"/deployments/{dep['id']}/schedules/{sched['id']}", {"active": False})
        for run in self.runs(states=["SCHEDULED"]):
            self.call("DELETE", f"/flow_runs/{run['id']}")

    def deployment_run(self, name: str, parameters: dict[str, Any] | None = None) -> str:
        dep = self.call("GET", f"/deployments/name/{name}")
        run: dict[str, Any] = self.call("POST", f"/deployments/{dep['id']}/create_flow_run",
                                        {"parameters": parameters or {}})
        return str(run["id"])

    def settle(self, sink: WebhookSink, timeout_s: float = 420, quiet_s: float = 8) -> None:
        """Until no deployment run is due or running and no alert has arrived for ``quiet_s`` (of the
        machine's share of a CPU: :class:`hang.Calm`)."""
        deadline = hang.Deadline(timeout_s)
        calm, seen = hang.Calm(quiet_s), len(sink.requests)
        while True:
            soon = (datetime.now(UTC) + timedelta(seconds=5)).isoformat()
            busy = [r for r in self.runs(states=ACTIVE) if r["expected_start_time"] < soon]
            if busy or len(sink.requests) != seen:
                calm.restart()
                seen = len(sink.requests)
            elif calm.reached():
                return
            deadline.check(lambda b=busy: f"still busy: {[(r['name'], r['state_type']) for r in b]}\n"  # type: ignore[misc]
                                     + self.said()[-3000:])
            time.sleep(1)

    def wait_state(self, run_id: str, types: set[str], timeout_s: float = 300) -> dict[str, Any]:
        deadline = hang.Deadline(timeout_s)
        while True:
            run = self.run(run_id)
            if (run.get("state") or {}).get("type") in types:
                return run
            deadline.check(f"run {run_id} never reached {types}: {run.get('state')}")
            time.sleep(0.5)


def texts(sink: WebhookSink) -> list[str]:
    out = [r["body"]["text"] if isinstance(r["body"], dict) else str(r["body"]) for r in sink.requests]
    sink.requests.clear()
    return out


def paid(api: MessagesAPI) -> Counter[str]:
    """First turns of probes (each one probe paid for), per query text."""
    starts: Counter[str] = Counter()
    for call in list(api.calls):
        body = call.body if isinstance(call.body, dict) else {}
        if call.path.endswith("/messages") and len(body.get("messages", [])) == 1:
            text = query_text(body)
            if text.startswith("please help with"):
                starts[text] += 1
    return starts


def _no_traceback(done: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr


@pytest.fixture(scope="module")
def world(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("operator-service")
    repo = root / "repo"
    for name, desc in SKILLS.items():
        (repo / "skills" / name).mkdir(parents=True)
        (repo / "skills" / name / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: {desc}\n---\n# {name}\n\nSteps.\n")
    queries = [{"id": f"{n}-{i}", "text": f"please help with {n} task {i}", "expected_skill": n,
                "kind": "implicit"} for n in SKILLS for i in range(4)]
    queries.append({"id": "oos-0", "text": "what is the weather", "expected_skill": None,
                    "kind": "out_of_scope"})
    (repo / "evals").mkdir()
    (repo / "evals" / "queries.json").write_text(json.dumps({"catalog_id": "all", "queries": queries},
                                                            indent=1))
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "team@example.invalid")
    git(repo, "config", "user.name", "Team")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "skills and queries")
    (root / "op").mkdir()
    (root / "elsewhere").mkdir()
    with MessagesAPI(Agent(), aliases={ALIAS: SNAPSHOT}) as api, WebhookSink() as sink:
        study = root / "study.toml"
        study.write_text(
            f'skills = ["{repo / "skills"}"]\nqueries = "{repo / "evals" / "queries.json"}"\n'
            f'runtime = "anthropic"\nmodel = "{ALIAS}"\nattempts = 2\nconcurrency = 4\n'
            f'home = "{root / "home"}"\n'
            f'[runtime_options]\nbase_url = "{api.base_url}"\nmax_retries = 0\n'
            f'[prices."{ALIAS}"]\ninput = 1.0\noutput = 5.0\ncache_write = 1.25\ncache_read = 0.1\n')
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("PREFECT_", "SKILLREACH_", "VIRTUAL_ENV")) and k != "PYTEST_XDIST_WORKER"}
        env.update({
            "PATH": os.pathsep.join([str(wheel), "/usr/local/bin", "/usr/bin", "/bin"]),
            "PREFECT_HOME": str(root / "prefect"),
            "SKILLREACH_STUDY_CONFIG": str(study),
            "SKILLREACH_ALERT_WEBHOOKS": json.dumps([f"{sink.base_url}/services/T0/B0/HOOKSECRET"]),
            "ANTHROPIC_API_KEY": "sk-test-not-a-secret",
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "DO_NOT_TRACK": "1",
        })
        service = Service(wheel, root, env)
        try:
            service.start()
            service.quiet_schedules()
            yield {"root": root, "repo": repo, "api": api, "sink": sink, "service": service, "bin": wheel}
        finally:
            service.stop()


# ------------------------------------------------------------------------------------------ problem 5


def test_serve_from_the_wheel_describes_itself_and_refuses_a_second_one(world: dict[str, Any]) -> None:
    svc = world["service"]
    info = json.loads((svc.folder / ".skillreach" / "service.json").read_text())
    assert info["pid"] == svc.proc.pid
    assert info["api"] == svc.api
    assert info["repository"] == str(world["repo"])
    assert info["baselines_branch"] == BRANCH
    assert info["store"] == f"sqlite:///{world['root'] / 'home' / 'skillreach.db'}"
    assert info["ready_at"]
    assert info["worker_pid"]
    site = next((world["bin"].parent / "lib").glob("python3*/site-packages"))
    for dep in svc.call("POST", "/deployments/filter", {}):
        assert dep["entrypoint"].startswith(str(site / "skillreach" / "flows"))  # the wheel's flows

    began = time.monotonic()
    second = _run([str(svc.bin / "skillreach"), "serve", "--port", str(_free_port()), "--pool", POOL],
                  svc.folder, svc.env, timeout=120)
    assert second.returncode == 2, second.stdout + second.stderr
    lines = [ln for ln in (second.stdout + second.stderr).splitlines() if ln.strip()]
    assert lines == [f"serve: a skillreach service already runs for this folder (pid {svc.proc.pid}, "
                     f"http://127.0.0.1:{svc.port}, in {svc.folder}); stop it first (Ctrl-C in its terminal, "
                     f"or kill {svc.proc.pid}), or serve from another folder"], lines
    print(f"\nsecond serve refused in {time.monotonic() - began:.1f} s")
    assert svc.proc.poll() is None  # the first one goes on


# ------------------------------------------------------------------------------------------ problem 4


def test_status_baseline_status_and_alerts_describe_the_service_from_anywhere(world: dict[str, Any]) -> None:
    svc, sink, repo = world["service"], world["sink"], world["repo"]
    svc.deployment_run("watch/watch")
    night = svc.deployment_run("nightly-compliance/nightly-compliance")
    svc.settle(sink)
    assert svc.run(night)["state"]["type"] == "COMPLETED"
    [first] = svc.runs("rebaseline-all")  # the nightly's "no baselines yet" started it
    assert first["state_type"] == "COMPLETED"
    assert on_branch(repo) == [f"baselines/{n}.json" for n in sorted(SKILLS)]
    texts(world["sink"])
    # a nightly scheduled for tomorrow is the *next* run, never the last one
    dep = svc.call("GET", "/deployments/name/nightly-compliance/nightly-compliance")
    later = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    svc.call("POST", f"/deployments/{dep['id']}/create_flow_run",
             {"state": {"type": "SCHEDULED", "state_details": {"scheduled_time": later}}})

    elsewhere = world["root"] / "elsewhere"
    done = svc.skillreach("status", cwd=elsewhere)  # PREFECT_API_URL set, as for any prefect command
    _no_traceback(done)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.splitlines()[0].startswith(
        f"service in {svc.folder}: running (pid {svc.proc.pid}, http://127.0.0.1:{svc.port}) (found by the "
        f"Prefect server at {svc.api}) — --service FOLDER"), out
    nightly = next(ln for ln in out.splitlines() if ln.startswith("nightly-compliance:"))
    assert " last finished run nightly-" in nightly, nightly
    assert "(Completed)" in nightly, nightly
    assert "; next: " in nightly, nightly  # said as the next one, with its own date
    assert (datetime.now(UTC) + timedelta(days=1)).strftime("%Y-%m-%d") in nightly.split("; next: ")[1]
    assert datetime.now(UTC).strftime("%Y-%m-%d") in nightly.split("; next:")[0]
    assert f"candidates waiting on {BRANCH} of {repo}: none" in out
    assert "restarts by serve: none since" in out
    assert "store:" not in out  # the service's store was read: no error line
    assert "study " in out.split("nightly-compliance:", 1)[1]  # its study, from the service's store

    plain = {k: v for k, v in svc.env.items() if k != "PREFECT_API_URL"}
    by_folder = svc.skillreach("status", "--json", "--service", str(svc.folder), cwd=elsewhere, env=plain)
    assert by_folder.returncode == 0, by_folder.stderr
    data = json.loads(by_folder.stdout)
    assert (data["service"]["folder"], data["service"]["running"]) == (str(svc.folder), True)
    assert data["studies"]["nightly-compliance"]["verdict"] == "ok"

    base = svc.skillreach("baseline", "status", cwd=svc.folder, env=plain)  # the service's folder
    _no_traceback(base)
    assert base.returncode == 0, base.stdout + base.stderr
    assert "no baseline records" not in base.stdout + base.stderr
    for name in SKILLS:
        assert f"{name}@" in base.stdout, base.stdout
    assert f"baseline status: service in {svc.folder}: running" in base.stderr

    listed = svc.skillreach("alerts", "list", cwd=elsewhere)
    assert listed.returncode == 0, listed.stderr
    assert "baseline.expired" in listed.stdout  # the first nightly's one alert, from the service's store
    assert f"alerts: service in {svc.folder}: running" in listed.stderr


# ------------------------------------------------------------------------------------------ problem 3


def test_gc_dry_run_and_gc_on_the_running_service(world: dict[str, Any]) -> None:
    svc, sink = world["service"], world["sink"]
    dry = svc.skillreach("gc", "--keep", "30d", "--dry-run")
    _no_traceback(dry)
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert "prefect: would delete 0 artifact(s)" in dry.stdout, dry.stdout
    assert "store: would delete 0 studies" in dry.stdout
    everything = svc.skillreach("gc", "--keep", "1s", "--dry-run")
    assert everything.returncode == 0, everything.stderr
    found = re.search(r"prefect: would delete (\d+) artifact\(s\)", everything.stdout)
    assert found, everything.stdout
    assert int(found.group(1)) > 0, everything.stdout
    studies = re.search(r"store: would delete (\d+) studies", everything.stdout)
    assert studies, everything.stdout
    assert int(studies.group(1)) >= 1, everything.stdout  # the nightly's (the bar's study stays)
    again = svc.skillreach("gc", "--keep", "1s", "--dry-run").stdout
    assert _minute(again) == _minute(everything.stdout)  # nothing went (the cut-off may be a minute on)
    real = svc.skillreach("gc", "--keep", "1s")
    _no_traceback(real)
    assert real.returncode == 0, real.stdout + real.stderr
    assert f"prefect: deleted {found.group(1)} artifact(s)" in real.stdout
    after = svc.skillreach("gc", "--keep", "1s", "--dry-run")
    assert "prefect: would delete 0 artifact(s)" in after.stdout, after.stdout
    # the service goes on: a nightly after gc runs and its gate reads the baselines kept
    night = svc.deployment_run("nightly-compliance/nightly-compliance")
    svc.settle(sink)
    assert svc.run(night)["state"]["type"] == "COMPLETED"
    assert texts(sink) == []
    assert on_branch(world["repo"]) == [f"baselines/{n}.json" for n in sorted(SKILLS)]


# ------------------------------------------------------------------------------------------ problem 6


def test_a_removed_and_a_renamed_skill_in_one_commit(world: dict[str, Any]) -> None:
    svc, sink, repo = world["service"], world["sink"], world["repo"]
    texts(sink)
    shutil.rmtree(repo / "skills" / "epsilon")  # removed; its cases stay in evals/queries.json
    (repo / "skills" / "gamma").rename(repo / "skills" / NEW_NAME)
    md = repo / "skills" / NEW_NAME / "SKILL.md"
    md.write_text(md.read_text().replace("name: gamma", f"name: {NEW_NAME}"))
    qfile = repo / "evals" / "queries.json"
    relabelled = qfile.read_text().replace('"expected_skill": "gamma"', f'"expected_skill": "{NEW_NAME}"')
    qfile.write_text(relabelled)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "remove epsilon, rename gamma to lingo")
    svc.deployment_run("watch/watch")
    svc.settle(sink)
    runs = svc.runs("rebaseline-all")
    triggered = [r for r in runs if r["parameters"].get("reason") in ("skillreach.skill.removed",
                                                                      "skillreach.skill.renamed")]
    assert triggered, [(r["name"], r["parameters"]) for r in runs]
    assert not [r for r in runs if r["state_type"] in ("FAILED", "CRASHED")], [
        (r["name"], r["state_type"], r["state_name"]) for r in runs]
    assert any(r["state_type"] == "COMPLETED" for r in triggered)
    said = texts(sink)
    gone = [t for t in said if t.startswith("skillreach skillreach.skill.gone: epsilon: ")]
    assert len(gone) == 1, said
    assert ("4 case(s) of evals/queries.json name it (epsilon-0, epsilon-1, epsilon-2, epsilon-3): remove "
            "its cases from evals/queries.json or restore the skill") in gone[0]
    carried = [t for t in said if t.startswith(f"skillreach skillreach.baseline.carried: {NEW_NAME}: ")]
    assert len(carried) == 1, said
    assert f"gamma was renamed to {NEW_NAME}: its baseline gamma@" in carried[0]
    assert not [t for t in said if "skill name(s) not in" in t], said
    assert not [t for t in said if "run.failed" in t], said
    files = on_branch(repo)
    assert f"baselines/{NEW_NAME}.json" in files, files
    assert "baselines/gamma.json" not in files, files
    log = git(repo, "log", "--format=%s", BRANCH)
    assert f"baselines: gamma renamed to {NEW_NAME} — its baseline gamma@" in log
    record = json.loads(git(repo, "show", f"{BRANCH}:baselines/{NEW_NAME}.json"))
    assert record["skill"] == NEW_NAME
    # the nightly runs on the rest, the renamed skill gated against its carried bar
    night = svc.deployment_run("nightly-compliance/nightly-compliance")
    svc.settle(sink)
    assert svc.run(night)["state"]["type"] == "COMPLETED"
    again = texts(sink)
    assert not [t for t in again if "gate breach" in t or "baseline.expired" in t], again


# ------------------------------------------------------------------------------------------ problem 8


def _kill_while_probing(svc: Service, api: MessagesAPI, run_id: str, after: int) -> int:
    before = sum(paid(api).values())
    deadline = hang.Deadline(300)
    while sum(paid(api).values()) - before < after:
        deadline.check(lambda: f"the run never probed:\n{svc.said()[-3000:]}")
        time.sleep(0.2)
    pids = _processes(_running_flow(run_id))
    assert pids, "no process runs the nightly"
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return sum(paid(api).values()) - before


def test_a_crashed_nightly_is_resumed_without_a_person_once(world: dict[str, Any]) -> None:
    svc, sink, api = world["service"], world["sink"], world["api"]
    svc.settle(sink)
    texts(sink)
    api.latency = 0.5  # a nightly that takes a while
    start = paid(api)
    # a night of its own (the day's folder was probed by the nightlies above: it would resume with nothing
    # left to probe)
    night = svc.deployment_run("nightly-compliance/nightly-compliance", {"slot": "crash-1"})
    _kill_while_probing(svc, api, night, 6)
    svc.wait_state(night, {"CRASHED"})
    resumed = svc.wait_state(night, {"RUNNING", "COMPLETED"}, timeout_s=300)  # nobody re-ran it
    api.latency = 0.0
    assert resumed["id"] == night
    done = svc.wait_state(night, {"COMPLETED", "FAILED", "CRASHED"}, timeout_s=600)
    assert done["state"]["type"] == "COMPLETED", done["state"]
    assert done["run_count"] == 2
    spent = paid(api) - start
    pairs = sum(1 for _ in spent)  # the queries probed (each twice: attempts = 2)
    assert sum(spent.values()) - 2 * pairs <= 4, spent  # only probes in flight at the kill paid twice
    svc.settle(sink)
    resolved = [r for r in svc.runs("resolve-crashed") if r["state_type"] == "COMPLETED"]
    assert resolved, svc.runs("resolve-crashed")
    texts(sink)

    # crashed again after its resume: it stays Crashed, and is said
    api.latency = 0.5
    night2 = svc.deployment_run("nightly-compliance/nightly-compliance", {"slot": "crash-2"})
    _kill_while_probing(svc, api, night2, 4)
    svc.wait_state(night2, {"CRASHED"})
    svc.wait_state(night2, {"RUNNING"}, timeout_s=300)  # resumed once
    _kill_while_probing(svc, api, night2, 2)
    api.latency = 0.0
    svc.settle(sink)
    final = svc.run(night2)
    assert final["state"]["type"] == "CRASHED", final["state"]
    said = texts(sink)
    assert [t for t in said if t.startswith("skillreach skillreach.run.crashed: nightly-compliance/")], said


def test_a_restarted_worker_is_in_status_and_one_alert(world: dict[str, Any]) -> None:
    svc, sink = world["service"], world["sink"]
    svc.settle(sink)
    texts(sink)
    [worker] = _processes(_worker_of(POOL))
    os.kill(worker, signal.SIGKILL)
    deadline = hang.Deadline(180)
    while "serve: worker restarted (pid" not in svc.said():
        deadline.check(lambda: svc.said()[-2000:])
        time.sleep(1)
    deadline = hang.Deadline(180)
    while not sink.requests:
        deadline.check("no alert of the restart")
        time.sleep(1)
    time.sleep(5)
    said = texts(sink)
    restarted = [t for t in said if t.startswith("skillreach skillreach.service.restarted: service: serve "
                                                 "restarted the worker at ")]
    assert len(restarted) == 1, said
    assert f"(pid {worker} exited with code -9; now pid " in restarted[0]
    status = svc.skillreach("status", cwd=world["root"] / "elsewhere")
    assert status.returncode == 0, status.stderr
    line = next(ln for ln in status.stdout.splitlines() if ln.startswith("restarts by serve:"))
    assert line.startswith("restarts by serve: 1 — latest: worker at "), line
    assert f"(pid {worker} exited with code -9; now " in line


# ------------------------------------------------------------------------------------------ problem 5


def test_a_killed_serve_leaves_a_lock_the_next_serve_takes_over(world: dict[str, Any]) -> None:
    """kill -9 of serve alone (its server and worker, in sessions of their own, go on): the kernel dropped
    its flock, so the next `serve` in the folder is not refused; it stops what the dead one left
    and serves."""
    svc, sink = world["service"], world["sink"]
    svc.settle(sink)
    texts(sink)
    old = json.loads((svc.folder / ".skillreach" / "service.json").read_text())
    assert svc.proc is not None
    dead = svc.proc.pid
    assert old["pid"] == dead
    left = [p for p in (old["server_pid"], old["worker_pid"]) if p]
    assert len(left) == 2, old
    os.kill(dead, signal.SIGKILL)  # serve alone: not its process group
    svc.proc.wait(30)
    assert all(_alive(Path(f"/proc/{p}")) for p in left)  # what it started still runs
    svc.start()  # same folder, same port: not refused
    svc.quiet_schedules()  # its deploy turned the schedules back on
    assert svc.proc.pid != dead
    took = [ln for ln in svc.said().splitlines()
            if ln.startswith("serve: took over from a serve that is gone")]
    assert len(took) == 1, svc.said()[-3000:]
    assert f"(pid {dead}, started " in took[0], took
    # the old server held the port the new one serves on: stopped by the take-over, and named (the old
    # worker may have ended by itself first: its output went to the dead serve)
    assert f"stopped what it left: pid(s) {old['server_pid']}" in took[0], took
    for pid in left:
        assert not _processes(lambda e, pid=pid: int(e.name) == pid and _alive(e)), pid
    new = json.loads((svc.folder / ".skillreach" / "service.json").read_text())
    assert new["pid"] == svc.proc.pid
    assert new["worker_pid"] not in left
    # the new one serves: a watch run completes, and a third serve is refused naming the new one
    run = svc.deployment_run("watch/watch")
    assert svc.wait_state(run, {"COMPLETED", "FAILED", "CRASHED"})["state"]["type"] == "COMPLETED"
    third = _run([str(svc.bin / "skillreach"), "serve", "--port", str(_free_port()), "--pool", POOL],
                 svc.folder, svc.env, timeout=120)
    assert third.returncode == 2, third.stdout + third.stderr
    assert f"already runs for this folder (pid {svc.proc.pid}, " in third.stdout + third.stderr


def _minute(text: str) -> str:
    """``text`` with its minute-resolution times (``12-05 22:27 UTC``) masked: two reads a second apart
    may straddle a minute."""
    return re.sub(r"\d\d-\d\d \d\d:\d\d UTC", "MM-DD hh:mm UTC", text)
