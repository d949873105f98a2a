"""Wall time of ``skillreach run`` on the bundled example (the ``make demo`` path), and what Prefect's
start costs. Prints a table; exits non-zero if a run fails.

Cases (each a fresh process, a fresh output folder, the same offline example):

- ``local, cold``   — no Prefect server, a brand-new PREFECT_HOME: ``skillreach run`` runs the study
  flow in-process (``study.fn``); this is ``make demo`` on a new machine.
- ``local, warm``   — the same again (PREFECT_HOME and bytecode caches exist). Goal: ≤ 5 s, seconds
  converted to the quiet machine's by the same-process reference (bench/_calibrate.py).
- ``server``        — ``skillreach run`` against a running ``prefect server start`` (tracked flow run).
- ``ephemeral, cold/warm`` — for comparison, the plain Prefect call ``await study(config)`` with no
  server configured: Prefect starts its temporary server for the run.
- ``import prefect`` and ``prefect server start`` → healthy, to show where the time goes.

Usage: ``python bench/demo_time.py [--skip-ephemeral] [--skip-server]``
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


def _env(prefect_home: Path, api: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(prefect_home), PREFECT_SERVER_ANALYTICS_ENABLED="false", DO_NOT_TRACK="1",
               PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="180")
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--skip-ephemeral", action="store_true", help="skip the temporary-server cases (~1 min)")
    ap.add_argument("--skip-server", action="store_true", help="skip the running-server case")
    args = ap.parse_args()
    rows: list[tuple[str, float]] = []
    ref = reference_us_per_line()
    work = Path(tempfile.mkdtemp(prefix="skillreach-demo-time-"))
    try:
        home = work / "prefect-home"
        n = 0

        def run(label: str, env: dict[str, str], cmd: list[str] | None = None) -> None:
            nonlocal n
            n += 1
            out = work / f"out{n}"
            cmd = cmd or [SKILLREACH, "run", "--out", str(out)]
            rows.append((label, _timed(cmd, env, work)))
            print(f"{label:34} {rows[-1][1]:6.1f} s", flush=True)

        rows.append(("import prefect", _timed([sys.executable, "-c", "import prefect"], _env(home), work)))
        print(f"{'import prefect':34} {rows[-1][1]:6.1f} s", flush=True)
        run("skillreach run — local, cold", _env(home))
        run("skillreach run — local, warm", _env(home))
        run("skillreach run — local, warm (again)", _env(home))
        if not args.skip_server:
            port = _free_port()
            api = f"http://127.0.0.1:{port}/api"
            server_home = work / "server-home"
            server = subprocess.Popen(
                [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1",
                 "--port", str(port)],
                env=_env(server_home), cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            try:
                rows.append(("prefect server start → healthy", _wait_health(api)))
                print(f"{'prefect server start → healthy':34} {rows[-1][1]:6.1f} s", flush=True)
                run("skillreach run — running server", _env(server_home, api))
                run("skillreach run — running server (again)", _env(server_home, api))
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
                cmd = [sys.executable, "-c", EPHEMERAL, str(work / f"out{n}"), str(work / "store")]
                rows.append((label, _timed(cmd, {**_env(eph_home), "PYTHONPATH": str(REPO)}, work)))
                print(f"{label:34} {rows[-1][1]:6.1f} s", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    load = os.getloadavg()
    print(f"\n{'case':40} {'wall s':>7} {'cpu s':>6}")
    for label, secs in rows:
        cpu = CPU.get(secs)
        print(f"{label:40} {secs:7.1f} {'' if cpu is None else f'{cpu:6.1f}'}")
    warm = [s for label, s in rows if "local, warm" in label]
    quiet = quiet_seconds(min(warm), ref)
    print(f"\nreference: stdlib json.loads of a probe line {ref:.2f} µs ({QUIET_US_PER_LINE} µs when the "
          f"goals were set); best warm {min(warm):.1f} s = {quiet:.1f} s at the reference's quiet speed")
    print(f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} on {os.cpu_count()} CPUs")
    print(calibrate.verdict("make demo warm (skillreach run), quiet seconds", quiet, 5.0, " s"))


if __name__ == "__main__":
    main()
