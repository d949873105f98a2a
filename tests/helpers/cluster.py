"""A small cluster on this machine for the scale-out tests and ``bench/scale_out.py``: a real Prefect
server (``prefect server start`` on 127.0.0.1, its own PREFECT_HOME), ``skillreach worker`` processes,
the Messages-API stand-in, a PostgreSQL store, and a study world of N queries × attempts."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text

from tests.fakes.messages_api import MessagesAPI, ScriptResponder
from tests.helpers import hang

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SKILLS = {
    "alpha": "Convert spreadsheets and CSV tables into charts. Use when the user wants a chart from data.",
    "beta": "Write and fix Dockerfiles and container images. Use for docker build problems.",
    "gamma": "Translate text between human languages. Use when the user asks for a translation.",
}

__all__ = ["SKILLS", "Cluster", "free_port", "reset_pg", "stand_in", "study_world"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def reset_pg(url: str) -> None:
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text("DROP SCHEMA public CASCADE"))
        conn.execute(text("CREATE SCHEMA public"))
    engine.dispose()


def study_world(root: Path, queries: int) -> tuple[Path, Path]:
    """Three skills and ``queries`` queries spread over them (skills folder, query set path)."""
    skills = root / "skills"
    for name, desc in SKILLS.items():
        (skills / name).mkdir(parents=True, exist_ok=True)
        body = f"---\nname: {name}\ndescription: {desc}\n---\n# {name}\n\nSteps.\n"
        (skills / name / "SKILL.md").write_text(body)
    names = list(SKILLS)
    qs = [{"id": f"q{i:05d}", "text": f"please help with {names[i % 3]} task {i}",
           "expected_skill": names[i % 3], "kind": "implicit"} for i in range(queries)]
    path = root / "queries.json"
    path.write_text(json.dumps({"catalog_id": "all", "queries": qs}), encoding="utf-8")
    return skills, path


def stand_in(latency: float) -> MessagesAPI:
    """The Messages API answering every query with its expected skill (the skill's name is in the text)."""
    return MessagesAPI(ScriptResponder({name: [name] for name in SKILLS}), latency=latency)


class Cluster:
    """``with Cluster(tmp, pg_url, api_base) as c: c.start_workers(3); c.run_study(...)``."""

    def __init__(self, root: Path, pg_url: str, api_base: str, *, batch_size: int = 50) -> None:
        self.root = root
        self.pg_url = pg_url
        self.port = free_port()
        self.api = f"http://127.0.0.1:{self.port}/api"
        self.env = {
            **{k: v for k, v in os.environ.items()
               if not k.startswith(("PREFECT_", "SKILLREACH_", "ANTHROPIC_"))},
            "PREFECT_HOME": str(root / "prefect-home"),
            "PREFECT_API_URL": self.api,
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "DO_NOT_TRACK": "1",
            "PREFECT_LOGGING_LEVEL": "WARNING",
            "SKILLREACH_DATABASE_URL": pg_url,
            "SKILLREACH_HOME": str(root / "home"),
            "SKILLREACH_BATCH_SIZE": str(batch_size),
            "SKILLREACH_RUNTIME": "anthropic",  # what the workers serve: warmed up when they start
            "ANTHROPIC_BASE_URL": api_base,
            "ANTHROPIC_API_KEY": "sk-test-not-a-real-key",
        }
        self.server: subprocess.Popen[bytes] | None = None
        self.workers: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> Cluster:
        import httpx

        (self.root / "logs").mkdir(parents=True, exist_ok=True)
        log = (self.root / "logs" / "server.log").open("wb")
        self.server = subprocess.Popen(
            [str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(self.port)],
            env=self.env, cwd=self.root, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        deadline = hang.Deadline(180)
        while not deadline.expired():
            if self.server.poll() is not None:
                raise RuntimeError(f"prefect server exited; see {self.root / 'logs' / 'server.log'}")
            try:
                if httpx.get(f"{self.api}/health", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        self.__exit__()
        raise RuntimeError("prefect server did not become healthy in 180 s")

    def __exit__(self, *exc: object) -> None:
        for proc in [*self.workers, self.server]:
            if proc is not None and proc.poll() is None:
                stop(proc)

    def start_workers(self, n: int, *, extra_env: dict[str, str] | None = None, wait: bool = True,
                      concurrency: int = 4) -> None:
        """``n`` more ``skillreach worker --concurrency N`` processes (N probes in flight on each)."""
        for _ in range(n):
            i = len(self.workers)
            path = self.root / "logs" / f"worker-{i}.log"
            if path.exists():  # an earlier test's worker: its log kept under another name
                path.replace(path.with_name(f"{path.name}.{time.time_ns()}"))
            log = path.open("wb")
            self.workers.append(subprocess.Popen(
                [str(BIN / "skillreach"), "worker", "--concurrency", str(concurrency)],
                env={**self.env, **(extra_env or {})}, cwd=self.root,
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            ))
        if wait:
            self.wait_for_workers(len([w for w in self.workers if w.poll() is None]))

    def workers_seen(self) -> int:
        code = ("import asyncio; from skillreach.tasks.study import task_workers_seen; "
                "print(asyncio.run(task_workers_seen()))")
        out = hang.finish([sys.executable, "-c", code], env=self.env, limit_s=120)
        return int(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 and out.stdout.strip() else -1

    def python(self, code: str) -> str:
        """Run ``code`` in a fresh interpreter against the cluster (its own Prefect settings); its stdout."""
        out = hang.finish([sys.executable, "-c", code], env=self.env, limit_s=300, cwd=REPO, check=True)
        return out.stdout

    def wait_for_workers(self, n: int, timeout_s: float = 180) -> None:
        deadline = hang.Deadline(timeout_s)
        while not deadline.expired():
            dead = [w for w in self.workers if w.poll() is not None and w.returncode not in (-9, 0)]
            if dead:
                raise RuntimeError(f"a worker exited with {dead[0].returncode}; see {self.root / 'logs'}")
            if self.workers_seen() >= n:
                return
            time.sleep(1)
        raise RuntimeError(f"fewer than {n} workers subscribed in {timeout_s} s; see {self.root / 'logs'}")

    def busiest_worker(self, sample_s: float = 2.0) -> int:
        """The live worker that used the most CPU over ``sample_s``: the one most surely mid-batch (on a
        loaded machine a worker picked by its index could be between batches when killed)."""
        live = [i for i, w in enumerate(self.workers) if w.poll() is None]
        before = {i: hang.tree_cpu_s(self.workers[i].pid) for i in live}
        time.sleep(sample_s)
        return max(live, key=lambda i: hang.tree_cpu_s(self.workers[i].pid) - before[i])

    def kill_worker(self, i: int) -> None:
        """SIGKILL worker ``i`` (its whole process group): no goodbye to the server or the store."""
        os.killpg(self.workers[i].pid, signal.SIGKILL)
        self.workers[i].wait(30)

    def stop_workers(self) -> None:
        for w in self.workers:
            if w.poll() is None:
                stop(w)
        self.workers = []

    def run_study(self, skills: Path, queries: Path, out: Path, *, attempts: int, concurrency: int = 4,
                  extra_env: dict[str, str] | None = None, extra: list[str] | None = None,
                  timeout_s: float = 900) -> subprocess.Popen[str]:
        """``skillreach run`` against the cluster (a tracked flow run sending its batches to the workers)."""
        cmd = [str(BIN / "skillreach"), "run", "--skills", str(skills), "--queries", str(queries),
               "--runtime", "anthropic", "--model", "claude-sonnet-4-6", "--attempts", str(attempts),
               "--concurrency", str(concurrency), "--out", str(out), *(extra or [])]
        return subprocess.Popen(cmd, env={**self.env, **(extra_env or {})}, cwd=self.root, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def store_count(self) -> int:
        engine = create_engine(self.pg_url)
        try:
            with engine.connect() as conn:
                return int(conn.execute(text("SELECT count(*) FROM probe_records")).scalar() or 0)
        except Exception:  # the schema is not there yet
            return 0
        finally:
            engine.dispose()


def stop(proc: subprocess.Popen[Any], grace_s: float = 10.0) -> None:
    """SIGINT, SIGTERM, then SIGKILL to the process group, as ``skillreach serve`` stops its children."""
    from skillreach.deployments.serve import stop_group

    stop_group(proc, grace_s)


@contextmanager
def running(api: MessagesAPI) -> Iterator[MessagesAPI]:
    with api:
        yield api
