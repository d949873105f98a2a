"""The operator's week, run the way an operator runs it (issue 29's "Done when"): `skillreach serve` in a
working folder of its own (a real Prefect server on 127.0.0.1, the process work pool, prefect.yaml's
deployments, the automations, a supervised worker), the skills in a git repository of their own, the
study configuration and the webhook in the service's environment, every run started with
`prefect deployment run …` or by the events the service emits, and the alerts read from a real HTTP
receiver on 127.0.0.1. The agent is the anthropic runtime against the local Messages API stand-in.

Mon  a fresh install's first nightly alerts once ("no baselines yet") and its event starts rebaseline-all,
     which records every skill in one commit;
Tue  delta is added and takes one of beta's four cases: watch → skill.added → rebaseline-all: beta's drop
     is inconclusive, kept as a candidate, one alert naming delta; beta's bar stays;
Wed  delta's description is edited and now takes gamma's cases: watch → skill.changed → rebaseline-all
     re-gates, one gamma alert naming delta (the cause) and the file to fix; gamma's bar stays;
Thu  the nightly finds gamma's breach: it ends Breached and "run ended badly" arrives once;
Fri  the model alias moves to a new snapshot: watch → rebaseline-all keeps both waiting candidates
     waiting (under the new pin), the bars of beta and gamma unchanged;
Sat  an exploratory study on another runtime (`study` with a `config` parameter): no alert, no commit;
Sun  the Prefect server is killed during a nightly: `serve` restarts it, and no finished run is marked
     Crashed (past the zombie window).

And the worker killed with `kill -9` while a study runs (issue 29, problem 8): no process of that run
alive after 10 s, the run Crashed, one alert, and the re-run resumes without paying a finished probe again.

Integration: ~30 s for the server, ~20 flow runs; a few minutes of wall time in all.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
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

from tests.fakes.messages_api import MessagesAPI, query_text
from tests.helpers import hang
from tests.helpers.webhooks import WebhookSink
from tests.helpers.week import ALIAS, NEW, OLD, SKILLS, THIEF, Stealing, git, write_skill

pytestmark = pytest.mark.integration

POOL = "operator-week"
EDIT = " It also writes multilingual release notes."
"""What Wednesday's edit adds to delta's description: from then on delta takes gamma's cases."""
ACTIVE = ["SCHEDULED", "PENDING", "RUNNING", "CANCELLING", "PAUSED"]
BRANCH = "skillreach/baselines"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pids(match: Any) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if match(entry):
                out.append(int(entry.name))
    return out


def _cmdline_has(*words: str) -> Any:
    def match(entry: Path) -> bool:
        cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        return all(w in cmd for w in words)

    return match


def _runs_flow(run_id: str) -> Any:
    def match(entry: Path) -> bool:
        if f"PREFECT__FLOW_RUN_ID={run_id}".encode() not in (entry / "environ").read_bytes():
            return False
        state = (entry / "stat").read_text().split(")")[-1].split()[0]
        return state != "Z"  # exited, not yet reaped: not alive

    return match


def _describe(pids: list[int]) -> str:
    out = []
    for pid in pids:
        with contextlib.suppress(OSError):
            status = {
                k: v.strip()
                for k, _, v in (
                    ln.partition(":") for ln in Path(f"/proc/{pid}/status").read_text().splitlines()
                )
            }
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            out.append(
                f"{pid} ppid={status.get('PPid')} state={status.get('State')} "
                f"sigign={status.get('SigIgn')} sigcgt={status.get('SigCgt')} cmd={cmd[:200]}"
            )
    return "\n".join(out)


def _runs_log(world: dict[str, Any], pids: list[int]) -> str:
    log = world["root"] / "op" / ".skillreach" / "logs" / "runs.log"
    lines = log.read_text(errors="replace").splitlines() if log.exists() else []
    mine = [ln for ln in lines if any(f"| {pid} |" in ln for pid in pids)]
    threads = []
    for pid in pids:
        for task in sorted(Path(f"/proc/{pid}/task").glob("*")):
            with contextlib.suppress(OSError):
                threads.append(
                    f"{task.name} {(task / 'comm').read_text().strip()} {(task / 'wchan').read_text()}"
                )
    return "\n".join(mine[-25:] + threads)


class Service:
    """`skillreach serve` in its working folder, and what an operator does to it."""

    def __init__(self, root: Path, env: dict[str, str], port: int) -> None:
        self.root, self.env, self.port = root, env, port
        self.api = f"http://127.0.0.1:{port}/api"
        self.log = root / "serve.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        out = self.log.open("wb")
        self.proc = subprocess.Popen(
            [
                str(Path(sys.executable).with_name("skillreach")),
                "serve",
                "--port",
                str(self.port),
                "--pool",
                POOL,
            ],
            env=self.env,
            cwd=self.root / "op",
            start_new_session=True,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        deadline = hang.Deadline(300)
        while "serve: worker on pool" not in self.said():
            assert self.proc.poll() is None, f"serve exited: {self.said()[-3000:]}"
            deadline.check(lambda: f"serve did not come up: {self.said()[-3000:]}")
            time.sleep(1)
        assert _pids(_cmdline_has("worker", "start", "--pool", POOL)), "no worker"

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
        # nothing of this service may outlive the test (its server and worker run in sessions of their own)
        for pid in _pids(_cmdline_has("--port", str(self.port))) + _pids(_cmdline_has("--pool", POOL)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    # -- the Prefect API, as the UI reads it ----------------------------------------------------------

    def post(self, path: str, body: dict[str, Any]) -> Any:
        for attempt in range(30):  # across a restart of the server
            try:
                resp = httpx.post(f"{self.api}{path}", json=body, timeout=30)
                resp.raise_for_status()
                return resp.json()
            except httpx.HTTPError:
                if attempt == 29:
                    raise
                time.sleep(2)
        return None

    def get(self, path: str) -> Any:
        for attempt in range(30):
            try:
                resp = httpx.get(f"{self.api}{path}", timeout=30)
                resp.raise_for_status()
                return resp.json()
            except httpx.HTTPError:
                if attempt == 29:
                    raise
                time.sleep(2)
        return None

    def runs(self, deployment: str | None = None, **flow_runs: Any) -> list[dict[str, Any]]:
        body: dict[str, Any] = {
            "sort": "EXPECTED_START_TIME_ASC",
            "limit": 200,
            "flow_runs": {"deployment_id": {"is_null_": False}, **flow_runs},
        }
        if deployment:
            body["deployments"] = {"name": {"any_": [deployment]}}
        rows: list[dict[str, Any]] = self.post("/flow_runs/filter", body)
        return rows

    def state(self, run_id: str) -> tuple[str, str]:
        run = self.get(f"/flow_runs/{run_id}")
        st = run.get("state") or {}
        return st.get("type", ""), st.get("name", "")

    def quiet_schedules(self) -> None:
        """The nightly's 02:00 and watch's 15-minute schedules off: the test is the clock (a quarter hour
        passing mid-test would run a watch of its own)."""
        for dep in self.post("/deployments/filter", {"limit": 50}):
            for sched in dep.get("schedules") or []:
                for _ in range(30):  # 503 while serve's set-up process still writes (SQLite busy)
                    resp = httpx.patch(
                        f"{self.api}/deployments/{dep['id']}/schedules/{sched['id']}",
                        json={"active": False},
                        timeout=30,
                    )
                    if resp.status_code != 503:
                        break
                    time.sleep(1)
                assert resp.status_code < 300, resp.text
        for run in self.runs(state={"type": {"any_": ["SCHEDULED"]}}):
            httpx.delete(f"{self.api}/flow_runs/{run['id']}", timeout=30)

    # -- what the operator types -----------------------------------------------------------------------

    def deployment_run(self, name: str, params: dict[str, Any] | None = None) -> str:
        args = [sys.executable, "-m", "prefect", "deployment", "run", name]
        if params:
            args += ["--params", json.dumps(params)]
        done = hang.finish(args, env=self.client_env(), cwd=self.root / "op", limit_s=120)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        found = re.search(r"UUID:\s*([0-9a-f-]{36})", done.stdout)
        assert found, done.stdout
        return found.group(1)

    def client_env(self) -> dict[str, str]:
        return {**self.env, "PREFECT_API_URL": self.api}

    def settle(self, sink: WebhookSink, timeout_s: float = 240, quiet_s: float = 8) -> None:
        """Until no deployment run is due or running (a triggered one is created ~1 s after its event on
        a quiet machine) and no alert has arrived for ``quiet_s`` (of the machine's share of a CPU:
        :class:`hang.Calm`)."""
        deadline = hang.Deadline(timeout_s)
        calm, seen = hang.Calm(quiet_s), len(sink.requests)
        while True:
            soon = (datetime.now(UTC) + timedelta(seconds=5)).isoformat()
            busy = self.runs(state={"type": {"any_": ACTIVE}}, expected_start_time={"before_": soon})
            if busy or len(sink.requests) != seen:
                calm.restart()
                seen = len(sink.requests)
            elif calm.reached():
                return
            deadline.check(lambda b=busy: f"still busy: {[(r['name'], r['state_type']) for r in b]}\n"  # type: ignore[misc]
                                     + self.said()[-3000:])
            time.sleep(1)


def texts(sink: WebhookSink) -> list[str]:
    out = [r["body"]["text"] if isinstance(r["body"], dict) else str(r["body"]) for r in sink.requests]
    sink.requests.clear()
    return out


def on_branch(repo: Path, path: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(git(repo, "show", f"{BRANCH}:{path}"))
    return data


def branch_files(repo: Path) -> list[str]:
    return sorted(git(repo, "ls-tree", "-r", "--name-only", BRANCH, "baselines").splitlines())


def commits(repo: Path) -> int:
    return int(git(repo, "rev-list", "--count", BRANCH)) if git(repo, "branch", "--list", BRANCH) else 0


def paid(api: MessagesAPI, prefix: str = "please help with") -> Counter[str]:
    """First turns of probes (each one probe paid for), per query text."""
    starts: Counter[str] = Counter()
    for call in list(api.calls):
        body = call.body if isinstance(call.body, dict) else {}
        if call.path.endswith("/messages") and len(body.get("messages", [])) == 1:
            text = query_text(body)
            if text.startswith(prefix):
                starts[text] += 1
    return starts


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The skills' repository, the stand-in, the receiver, and `skillreach serve` in the operator's
    folder with the study configuration and the webhook in its environment."""
    root = tmp_path_factory.mktemp("operator")
    repo = root / "repo"
    for name, desc in SKILLS.items():
        write_skill(repo / "skills", name, desc)
    queries = [
        {"id": f"{n}-{i}", "text": f"please help with {n} task {i}", "expected_skill": n, "kind": "implicit"}
        for n in SKILLS
        for i in range(4)
    ]
    queries.append(
        {"id": "oos-0", "text": "what is the weather", "expected_skill": None, "kind": "out_of_scope"}
    )
    (repo / "evals").mkdir(parents=True)
    (repo / "evals" / "queries.json").write_text(json.dumps({"catalog_id": "all", "queries": queries}))
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "team@example.invalid")
    git(repo, "config", "user.name", "Team")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "skills and queries")
    (root / "op").mkdir()
    with MessagesAPI(Stealing(), aliases={ALIAS: OLD}) as api, WebhookSink() as sink:
        study = root / "study.toml"
        study.write_text(
            f'skills = ["{repo / "skills"}"]\nqueries = "{repo / "evals" / "queries.json"}"\n'
            f'runtime = "anthropic"\nmodel = "{ALIAS}"\nattempts = 2\nconcurrency = 4\n'
            f'home = "{root / "home"}"\n'
            f'[runtime_options]\nbase_url = "{api.base_url}"\nmax_retries = 0\n'
            f'[prices."{ALIAS}"]\ninput = 1.0\noutput = 5.0\ncache_write = 1.25\ncache_read = 0.1\n'
        )
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("PREFECT_", "SKILLREACH_")) and k != "PYTEST_XDIST_WORKER"
        }
        env.update(
            {
                "PREFECT_HOME": str(root / "prefect"),
                "SKILLREACH_STUDY_CONFIG": str(study),
                "SKILLREACH_ALERT_WEBHOOKS": json.dumps([f"{sink.base_url}/services/T0/B0/HOOKSECRET"]),
                "ANTHROPIC_API_KEY": "sk-test-not-a-secret",
                "PREFECT_WORKER_QUERY_SECONDS": "2",
                "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
                "DO_NOT_TRACK": "1",
            }
        )
        service = Service(root, env, _free_port())
        try:
            service.start()
            service.quiet_schedules()
            yield {"root": root, "repo": repo, "api": api, "sink": sink, "service": service, "study": study}
        finally:
            service.stop()


def test_the_operators_week(world: dict[str, Any]) -> None:
    repo, api, sink, svc = world["repo"], world["api"], world["sink"], world["service"]
    skills = repo / "skills"
    timings: dict[str, float] = {}
    began = time.monotonic()

    def day(name: str) -> None:
        timings[name] = round(time.monotonic() - began, 1)

    # ---- Mon: a fresh install's first nightly: one alert, and its event starts rebaseline-all
    day("mon")
    svc.deployment_run("watch/watch")  # the catalog's and the model's first snapshots
    night = svc.deployment_run("nightly-compliance/nightly-compliance")
    svc.settle(sink)
    assert svc.state(night)[0] == "COMPLETED"  # a notice, not a breach: the run is not Failed
    said = texts(sink)
    assert len(said) == 1, said
    assert said[0].startswith(
        "skillreach skillreach.baseline.expired: *: no baselines yet: re-baselining every skill"
    ), said
    [first] = svc.runs("rebaseline-all")  # started by the alert's event, not by hand
    assert first["state_type"] == "COMPLETED"
    assert first["parameters"]["reason"] == "skillreach.baseline.expired"
    assert branch_files(repo) == ["baselines/alpha.json", "baselines/beta.json", "baselines/gamma.json"]
    assert commits(repo) - int(git(repo, "rev-list", "--count", "main")) == 1  # one commit
    assert git(repo, "status", "--porcelain") == ""  # the team's working tree untouched

    # ---- Tue: delta is added and takes one of beta's four cases
    day("tue")
    write_skill(skills, *THIEF)
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "add delta")
    svc.deployment_run("watch/watch")
    svc.settle(sink)
    added = [
        r for r in svc.runs("rebaseline-all") if r["parameters"].get("reason") == "skillreach.skill.added"
    ]
    assert [(r["parameters"]["skill"], r["state_type"]) for r in added] == [("delta", "COMPLETED")]
    said = texts(sink)
    beta = [t for t in said if "beta" in t]
    assert len(beta) == 1, said
    assert beta[0].startswith("skillreach skillreach.gate.inconclusive: beta: drop past the gate"), beta
    assert "lost 1 of 4 cases to delta" in beta[0]  # the cause
    assert len([t for t in said if t.startswith("skillreach skillreach.skill.no_queries: delta")]) == 1
    assert len(said) == 2, said
    assert on_branch(repo, "baselines/beta.json")["metrics"]["activation"]["value"] == 1.0  # the bar stays
    assert "baselines/candidates/beta.json" in branch_files(repo)

    # ---- Wed: delta's description is edited; it now takes gamma's cases
    day("wed")
    write_skill(skills, THIEF[0], THIEF[1] + EDIT)
    git(repo, "commit", "-q", "-am", "delta: release notes too")
    svc.deployment_run("watch/watch")
    svc.settle(sink)
    edited = [
        r for r in svc.runs("rebaseline-all") if r["parameters"].get("reason") == "skillreach.skill.changed"
    ]
    assert [(r["parameters"]["skill"], r["state_type"]) for r in edited] == [("delta", "COMPLETED")]
    said = texts(sink)
    gamma = [t for t in said if t.startswith("skillreach gate breach: gamma activation")]
    assert len(gamma) == 1, said
    assert (
        "; lost 4 of 4 cases to delta; next: skillreach baseline accept gamma if this is intended, "
        f"else fix {skills / 'delta' / 'SKILL.md'}" in gamma[0]
    )
    assert len([t for t in said if "gamma" in t]) == 1, said
    assert "HOOKSECRET" not in "".join(said)
    assert on_branch(repo, "baselines/gamma.json")["metrics"]["activation"]["value"] == 1.0
    assert on_branch(repo, "baselines/beta.json")["metrics"]["activation"]["value"] == 1.0
    assert {"baselines/candidates/beta.json", "baselines/candidates/gamma.json"} <= set(branch_files(repo))

    # ---- Thu: the nightly finds gamma's breach: ends Breached; the breach is the verdict said on Wed
    # (same skill, metric and cause), and a breached run's end is said in its breach message, never apart
    # (issue 39): nothing new to say
    day("thu")
    night = svc.deployment_run("nightly-compliance/nightly-compliance")
    svc.settle(sink)
    assert svc.state(night) == ("FAILED", "Breached")
    said = texts(sink)
    assert said == [], said

    # ---- Fri: a new model snapshot: both waiting candidates keep waiting, under the new pin
    day("fri")
    before = commits(repo)
    api.aliases[ALIAS] = NEW
    svc.deployment_run("watch/watch")
    svc.settle(sink)
    moved = [
        r
        for r in svc.runs("rebaseline-all")
        if r["parameters"].get("reason") == "skillreach.model.snapshot.changed"
    ]
    assert [(r["parameters"]["model_snapshot"], r["state_type"]) for r in moved] == [(NEW, "COMPLETED")]
    assert commits(repo) == before + 1
    assert on_branch(repo, "baselines/alpha.json")["model"] == NEW  # re-recorded under the new pin
    for skill in ("beta", "gamma"):
        assert on_branch(repo, f"baselines/{skill}.json")["model"] == OLD  # the bar a person set
        assert on_branch(repo, f"baselines/candidates/{skill}.json")["model"] == NEW  # still waiting
    said = texts(sink)  # drift alerts for the skills whose drop waits, never for alpha
    assert not [t for t in said if "alpha" in t], said

    # ---- Sat: an exploratory study on another runtime: no alert, nothing committed
    day("sat")
    before, rebaselines = commits(repo), len(svc.runs("rebaseline-all"))
    script = world["root"] / "explore.json"
    script.write_text(json.dumps({"*": ["alpha"]}))  # every query reaches alpha
    explore = svc.deployment_run(
        "study/study",
        {
            "config": {
                "skills": [str(skills)],
                "queries": str(repo / "evals" / "queries.json"),
                "runtime": "fake",
                "runtime_options": {"script": str(script)},
                "attempts": 2,
                "home": str(world["root"] / "home"),
            }
        },
    )
    svc.settle(sink)
    assert svc.state(explore)[0] == "COMPLETED"
    assert texts(sink) == []
    assert commits(repo) == before
    assert len(svc.runs("rebaseline-all")) == rebaselines  # nothing started either

    # ---- Sun: the server is killed during a nightly; serve restarts it; no finished run is Crashed
    day("sun")
    api.latency = 0.4  # a nightly that takes a while
    before = paid(api)
    night = svc.deployment_run("nightly-compliance/nightly-compliance")
    deadline = hang.Deadline(120)
    while sum((paid(api) - before).values()) < 6:  # probing
        deadline.check("the nightly never started probing")
        time.sleep(0.3)
    server = _pids(_cmdline_has("server", "start", "--port", str(svc.port)))
    assert server, "no server process"
    os.killpg(os.getpgid(server[0]), signal.SIGKILL)
    killed = time.monotonic()
    while "serve: the Prefect server restarted (pid " not in svc.said():
        assert time.monotonic() - killed < 180, svc.said()[-2000:]
        time.sleep(1)
    restarted_after = time.monotonic() - killed
    api.latency = 0.0
    svc.settle(sink, timeout_s=300)
    from skillreach.deployments.automations import HEARTBEAT_S, ZOMBIE_AFTER_HEARTBEATS

    time.sleep(max(0.0, ZOMBIE_AFTER_HEARTBEATS * HEARTBEAT_S + 15 - (time.monotonic() - killed)))
    svc.settle(sink)
    states = [(r["name"], r["state_type"], r["state_name"]) for r in svc.runs()]
    assert not [s for s in states if s[1] == "CRASHED"], states
    assert svc.state(night)[0] == "COMPLETED", states  # the candidates wait: nothing breached, said once
    assert "serve: the Prefect server did not come back" not in svc.said()
    said = texts(sink)
    assert not [t for t in said if "crash" in t.lower()], said
    print(
        f"\noperator's week: days began at {timings} s; server restarted {restarted_after:.1f} s after "
        f"kill -9; {len(states)} deployment runs, none crashed: {Counter(s[1] for s in states)}"
    )


def test_kill_9_of_the_worker_crashes_the_run_alerts_once_and_the_rerun_resumes(
    world: dict[str, Any],
) -> None:
    api, sink, svc = world["api"], world["sink"], world["service"]
    svc.settle(sink)
    texts(sink)
    out = world["root"] / "op" / "runs" / "killed"
    config = {
        "skills": [str(world["repo"] / "skills")],
        "queries": str(world["repo"] / "evals" / "queries.json"),
        "runtime": "anthropic",
        "model": ALIAS,
        "attempts": 4,
        "concurrency": 2,
        "home": str(world["root"] / "home"),
        "out": str(out),
        "runtime_options": {"base_url": api.base_url, "max_retries": 0},
        "prices": {ALIAS: {"input": 1.0, "output": 5.0, "cache_write": 1.25, "cache_read": 0.1}},
    }
    api.latency = 0.3
    before = paid(api)
    first = svc.deployment_run("study/study", {"config": config})
    deadline = hang.Deadline(180)
    while sum((paid(api) - before).values()) < 20:
        deadline.check(lambda: "the study never started probing:\n" + svc.said()[-3000:])
        time.sleep(0.2)
    flow_pids = _pids(_runs_flow(first))
    assert flow_pids, "no process runs the flow run"
    [worker] = _pids(_cmdline_has("worker", "start", "--pool", POOL))
    tree = f"worker {worker}; before the kill:\n" + _describe(_pids(_runs_flow(first)))
    os.kill(worker, signal.SIGKILL)  # kill -9 of the worker alone
    killed = time.monotonic()
    alive = ""
    while _pids(_runs_flow(first)):  # measured here, asserted at the end (what follows is worth seeing too)
        if time.monotonic() - killed >= 10 and not alive:
            alive = tree + "\n10 s after:\n" + _describe(_pids(_runs_flow(first)))
            alive += "\n" + _runs_log(world, _pids(_runs_flow(first)))
        assert time.monotonic() - killed < 120, "a process of the run outlived its worker by 120 s: " + alive
        time.sleep(0.2)
    gone_after = time.monotonic() - killed
    paid_at_kill = sum((paid(api) - before).values())
    while svc.state(first)[0] != "CRASHED":
        assert time.monotonic() - killed < 150, f"never marked Crashed: {svc.state(first)}; {alive}"
        time.sleep(1)
    crashed_after = time.monotonic() - killed
    api.latency = 0.0
    svc.settle(sink)  # serve restarted the worker; resolve-crashed ran
    deadline = hang.Deadline(180)  # serve files its restart of the worker from a process of its own
    while not any("skillreach.service.restarted" in json.dumps(r["body"]) for r in list(sink.requests)):
        deadline.check(lambda: f"no alert of the worker's restart: {sink.requests}")
        time.sleep(1)
    svc.settle(sink)
    said = texts(sink)
    crashed = [t for t in said if t.startswith("skillreach skillreach.run.crashed: study/study run ")]
    restarted = [t for t in said if t.startswith("skillreach skillreach.service.restarted: service: serve "
                                                 "restarted the worker")]
    assert (len(crashed), len(restarted), len(said)) == (1, 1, 2), said  # the run, and serve's restart
    assert "serve: the worker (pid" in svc.said()  # serve saw its worker die and restarted it
    assert "serve: worker restarted (pid" in svc.said()

    second = svc.deployment_run("study/study", {"config": config})
    svc.settle(sink)
    assert svc.state(second)[0] == "COMPLETED"
    assert texts(sink) == []
    from skillreach.study.probe_log import read_probes

    probes = read_probes(out / "probes.jsonl")
    pairs = {(p.query_id, p.attempt) for p in probes if p.error is None}
    assert len(pairs) == 13 * 4  # every (query, attempt) recorded, in the same folder
    pairs = {(q, a) for q, a in pairs if q != "oos-0"}  # the ones `paid` counts
    spent = paid(api) - before
    twice = sum(spent.values()) - len(pairs)
    assert 0 <= twice <= 2, (twice, spent)  # at most the probes in flight at the kill (concurrency 2)
    print(
        f"\nkill -9 of the worker: run's processes gone after {gone_after:.1f} s, Crashed after "
        f"{crashed_after:.1f} s; {paid_at_kill} probes paid before the kill, {sum(spent.values())} in all "
        f"for {len(pairs)} (query, attempt) pairs ({twice} paid twice)"
    )
