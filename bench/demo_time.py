"""Wall time of ``skillreach run`` on the bundled example (the ``make demo`` path), and what Prefect's
start costs. Prints a table; exits non-zero if a run fails.

Cases (each a fresh process, a fresh output folder, the same offline example):

- ``local, cold``   — no Prefect server, a brand-new PREFECT_HOME and no bytecode: ``skillreach run``
  runs the study flow in-process (``study.fn``); this is ``make demo`` on a new machine.
- ``local, warm``   — the same again (PREFECT_HOME and bytecode caches exist). Goal: ≤ 5 s, seconds
  converted to the quiet machine's by the same-process reference (bench/_calibrate.py).
- ``local, warm, no bytecode`` — the same with ``PYTHONDONTWRITEBYTECODE`` set and no cache, so every
  module is compiled from source on every run (what a shell that sets it, as the sandboxes these
  figures come from do, got from a plain ``skillreach run`` before ``make demo`` unset it).
- ``server``        — ``skillreach run`` against a running ``prefect server start`` (tracked flow run).
- ``ephemeral, cold/warm`` — for comparison, the plain Prefect call ``await study(config)`` with no
  server configured: Prefect starts its temporary server for the run.
- the breakdown: ``import prefect``, ``import skillreach.flows.study`` (Prefect and every module the
  in-process study imports: the floor of the run) and an empty interpreter, all with bytecode;
  ``prefect server start`` → healthy.

Bytecode: Python caches compiled modules on a first run, so a second ``make demo`` reads them — unless
``PYTHONDONTWRITEBYTECODE`` is set. The bench gives every case but the ``no bytecode`` one a cache
folder of its own (``PYTHONPYCACHEPREFIX``) with writing allowed: the cold run fills it, the warm runs
read it, whatever the calling shell sets and whether or not the venv was installed with bytecode.

Seconds are converted to the quiet machine's two ways: wall seconds by the reference's wall time
(the issue's goal), and CPU seconds (user + sys of the process) by the reference's CPU time, steadier
when other work shares the cores (the run is one busy thread: on a quiet machine its wall ≈ its CPU).

``--fresh-clone REV [REV ...]`` measures instead what a newcomer's first command costs: for each
revision, ``git clone`` of this repository into an empty folder, ``git checkout REV``, then ``make demo``
there — creating ``.venv``, installing what that revision's Makefile installs for the demo, and running
it — timed by wall and by the CPU of every process it started, with the load average before and after
and the packages the venv ended with. The installer's cache (uv's, ``~/.cache/uv``) is the machine's own,
as on a developer's machine after any earlier install; ``--cold-cache`` gives each clone an empty one
(every wheel downloaded: the network's speed then counts too).

Usage: ``python bench/demo_time.py [--skip-ephemeral] [--skip-server]``,
``python bench/demo_time.py --fresh-clone main HEAD [--cold-cache]``
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _calibrate as calibrate
from _calibrate import QUIET_US_PER_LINE, quiet_seconds, reference_us_per_line

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
SKILLREACH = str(BIN / "skillreach")

EPHEMERAL = """
import asyncio, sys
from pathlib import Path
from skillreach.flows.study import study
from skillreach.study import StudyConfig
asyncio.run(study(StudyConfig(out=Path(sys.argv[1]), home=Path(sys.argv[2]))))
"""


def _env(
    prefect_home: Path, api: str | None = None, *, pycache: Path, bytecode: bool = True
) -> dict[str, str]:
    """The environment of a case: a PREFECT_HOME of its own, no telemetry, and ``pycache`` as the
    bytecode cache (written and read when ``bytecode``; with ``bytecode=False`` nothing is written, so
    an empty ``pycache`` means every module is compiled from source)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(prefect_home), PREFECT_SERVER_ANALYTICS_ENABLED="false", DO_NOT_TRACK="1",
               PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="180", PYTHONPYCACHEPREFIX=str(pycache))
    if bytecode:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    if api:
        env["PREFECT_API_URL"] = api
    return env


CPU: dict[float, float] = {}
"""wall time of a case → CPU seconds (user + sys) of its process (the machine may be shared)."""


def _timed(cmd: list[str], env: dict[str, str], cwd: Path) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, check=False, env=env, cwd=cwd, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-3000:])
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(cmd)}")
    CPU[dt] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return dt


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_health(api: str, timeout_s: float = 180) -> float:
    import httpx

    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout_s:
        try:
            if httpx.get(f"{api}/health", timeout=2).status_code == 200:
                return time.perf_counter() - t0
        except httpx.HTTPError:
            pass
        time.sleep(0.25)
    raise SystemExit("the Prefect server did not become healthy")


def fresh_clone(revs: list[str], *, cold_cache: bool) -> None:
    """``make demo`` in a fresh clone of each revision (see the module's docstring)."""
    results: list[tuple[str, str, float, float, tuple[float, float], int]] = []
    for rev in revs:
        sha = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", rev], check=True,
                             capture_output=True, text=True).stdout.strip()
        work = Path(tempfile.mkdtemp(prefix="skillreach-fresh-clone-"))
        try:
            clone = work / "skillreach"
            subprocess.run(["git", "clone", "-q", "--no-checkout", str(REPO), str(clone)], check=True)
            subprocess.run(["git", "-C", str(clone), "checkout", "-q", sha], check=True)
            env = {k: v for k, v in os.environ.items()
                   if not k.startswith(("PREFECT_", "VIRTUAL_ENV", "SKILLREACH_"))}
            env.update(PREFECT_SERVER_ANALYTICS_ENABLED="false", DO_NOT_TRACK="1")
            if cold_cache:
                env["UV_CACHE_DIR"] = str(work / "uv-cache")
                env["PIP_NO_CACHE_DIR"] = "1"
            load_before = os.getloadavg()[0]
            dt = _timed(["make", "demo"], env, clone)
            load_after = os.getloadavg()[0]
            site = next((clone / ".venv" / "lib").glob("python3*/site-packages"))
            packages = len(list(site.glob("*.dist-info")))
            results.append((rev, sha, dt, CPU[dt], (load_before, load_after), packages))
            print(f"make demo, fresh clone of {rev} ({sha}): {dt:.1f} s wall, {CPU[dt]:.1f} s CPU, "
                  f"load {load_before:.1f} → {load_after:.1f}, {packages} packages in .venv", flush=True)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    cache = "an empty installer cache" if cold_cache else "the machine's installer cache"
    print(f"\n| revision | make demo, fresh clone ({cache}) | CPU | load (1 min) before → after | packages |")
    print("|---|---|---|---|---|")
    for rev, sha, dt, cpu, (lb, la), packages in results:
        print(f"| {rev} ({sha}) | {dt:.1f} s | {cpu:.1f} s | {lb:.1f} → {la:.1f} | {packages} |")
    print(f"{os.cpu_count()} CPUs; goal: make demo on a fresh clone ≤ 60 s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--skip-ephemeral", action="store_true", help="skip the temporary-server cases (~1 min)")
    ap.add_argument("--skip-server", action="store_true", help="skip the running-server case")
    ap.add_argument("--fresh-clone", nargs="+", metavar="REV",
                    help="instead: time `make demo` in a fresh clone of each revision")
    ap.add_argument("--cold-cache", action="store_true", help="with --fresh-clone: an empty installer cache")
    args = ap.parse_args()
    if args.fresh_clone:
        fresh_clone(args.fresh_clone, cold_cache=args.cold_cache)
        return
    rows: list[tuple[str, float]] = []
    ref, ref_cpu = reference_us_per_line(), reference_us_per_line(clock=time.process_time)
    work = Path(tempfile.mkdtemp(prefix="skillreach-demo-time-"))
    pycache = work / "pycache"  # the bytecode every case but "no bytecode" writes and reads
    try:
        home = work / "prefect-home"
        n = 0

        def timed(label: str, env: dict[str, str], cmd: list[str]) -> None:
            rows.append((label, _timed(cmd, env, work)))
            print(f"{label:42} {rows[-1][1]:6.1f} s  {CPU[rows[-1][1]]:6.1f} s CPU", flush=True)

        def run(label: str, env: dict[str, str]) -> None:
            nonlocal n
            n += 1
            timed(label, env, [SKILLREACH, "run", "--out", str(work / f"out{n}")])

        run("skillreach run — local, cold", _env(home, pycache=pycache))
        run("skillreach run — local, warm", _env(home, pycache=pycache))
        run("skillreach run — local, warm (again)", _env(home, pycache=pycache))
        run("skillreach run — local, warm, no bytecode", _env(home, pycache=work / "empty", bytecode=False))
        run("skillreach run — local, warm (third)", _env(home, pycache=pycache))
        py = sys.executable
        timed("python -c pass", _env(home, pycache=pycache), [py, "-c", "pass"])
        timed("import prefect", _env(home, pycache=pycache), [py, "-c", "import prefect"])
        timed("import skillreach.flows.study", _env(home, pycache=pycache),
              [py, "-c", "import skillreach.flows.study"])
        if not args.skip_server:
            port = _free_port()
            api = f"http://127.0.0.1:{port}/api"
            server_home = work / "server-home"
            server = subprocess.Popen(
                [py, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                env=_env(server_home, pycache=pycache), cwd=work, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, start_new_session=True,
            )
            try:
                rows.append(("prefect server start → healthy", _wait_health(api)))
                print(f"{'prefect server start → healthy':42} {rows[-1][1]:6.1f} s", flush=True)
                run("skillreach run — running server", _env(server_home, api, pycache=pycache))
                run("skillreach run — running server (again)", _env(server_home, api, pycache=pycache))
            finally:
                server.terminate()
                try:
                    server.wait(20)
                except subprocess.TimeoutExpired:
                    server.kill()
        if not args.skip_ephemeral:
            eph_home = work / "ephemeral-home"
            for label in ("study flow — ephemeral server, cold", "study flow — ephemeral server, warm"):
                n += 1
                cmd = [py, "-c", EPHEMERAL, str(work / f"out{n}"), str(work / "store")]
                timed(label, {**_env(eph_home, pycache=pycache), "PYTHONPATH": str(REPO)}, cmd)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    load = os.getloadavg()
    print(f"\n{'case':44} {'wall s':>7} {'cpu s':>6}")
    for label, secs in rows:
        cpu = CPU.get(secs)
        print(f"{label:44} {secs:7.1f} {'' if cpu is None else f'{cpu:6.1f}'}")
    warm = [s for label, s in rows if "local, warm" in label and "no bytecode" not in label]
    quiet = quiet_seconds(min(warm), ref)
    quiet_cpu = quiet_seconds(min(CPU[s] for s in warm), ref_cpu)
    cold_src = next(s for label, s in rows if "no bytecode" in label)
    floor = next(s for label, s in rows if label == "import skillreach.flows.study")
    print(f"\nreference: stdlib json.loads of a probe line {ref:.2f} µs wall, {ref_cpu:.2f} µs CPU "
          f"({QUIET_US_PER_LINE} µs when the goals were set)")
    print(f"best warm {min(warm):.1f} s = {quiet:.1f} s at the reference's quiet speed; "
          f"CPU {min(CPU[s] for s in warm):.1f} s = {quiet_cpu:.1f} s")
    print(f"without bytecode: {quiet_seconds(CPU[cold_src], ref_cpu):.1f} s (CPU, quiet); "
          f"the imports of the in-process study (Prefect and ours) take "
          f"{CPU[floor] / min(CPU[s] for s in warm):.0%} of a warm run's CPU")
    print(f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} on {os.cpu_count()} CPUs")
    print(calibrate.verdict("make demo warm (skillreach run), quiet seconds (wall)", quiet, 5.0, " s"))
    print(calibrate.verdict("make demo warm (skillreach run), quiet seconds (CPU)", quiet_cpu, 5.0, " s"))


if __name__ == "__main__":
    main()
