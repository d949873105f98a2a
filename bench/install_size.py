"""What ``pip install skillreach`` costs: site-packages size, package count and wall time of installing
this checkout's wheel into a clean venv, with uv and with pip (whose size includes the bytecode it
compiles and its own copy of pip), each with an empty cache; then what each dependency costs.

The per-dependency table: for each direct dependency of skillreach (from the installed metadata), the
megabytes of the distributions only it pulls in (itself and the dependencies no other direct one
needs) — what leaving it out of the default install would save — and, beside it, every distribution's
own size (its files, bytecode included).

Usage: ``python bench/install_size.py [--extras fast] [--only pip|uv] [--wheel PATH] [--top 25]``

Run it at low priority beside other work (``nice``); the seconds are wall seconds on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
UV = shutil.which("uv") or str(Path(sys.executable).with_name("uv"))
MB = 1e6

_INSPECT = r"""
import json, os, re, sys, sysconfig
from importlib import metadata
site = sysconfig.get_paths()["purelib"]

def norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()

def size(path):
    # (bytes of the files, bytes of disk they take: what du counts, directories included)
    if os.path.islink(path) or not os.path.exists(path):
        return [0, 0]
    st = os.stat(path)
    if os.path.isfile(path):
        return [st.st_size, st.st_blocks * 512]
    total = [0, st.st_blocks * 512]
    for root, dirs, files in os.walk(path):
        for d in dirs:
            p = os.path.join(root, d)
            if not os.path.islink(p):
                total[1] += os.stat(p).st_blocks * 512
        for f in files:
            p = os.path.join(root, f)
            if not os.path.islink(p):
                st = os.stat(p)
                total[0] += st.st_size
                total[1] += st.st_blocks * 512
    return total

dists = {}
owner = {}
for d in metadata.distributions(path=[site]):
    name = norm(d.metadata["Name"])
    tops = set()
    for f in d.files or []:
        parts = f.parts
        if parts and parts[0] not in ("..",) and not parts[0].endswith(".dist-info"):
            tops.add(parts[0])
        elif parts and parts[0].endswith(".dist-info"):
            tops.add(parts[0])
    reqs = []
    for r in d.requires or []:
        if "extra ==" in r:
            continue
        m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", r)
        if m:
            reqs.append(norm(m.group(1)))
    dists[name] = {"tops": sorted(tops), "requires": reqs, "version": d.version}
    for t in tops:
        owner.setdefault(t, name)
# a top-level entry counted once, for the distribution that lists it first
for name, info in dists.items():
    sizes = [size(os.path.join(site, t)) for t in info["tops"] if owner.get(t) == name]
    info["bytes"] = sum(s[0] for s in sizes)
    info["disk"] = sum(s[1] for s in sizes)
total = size(site)
print(json.dumps({"site": site, "total": total, "dists": dists}))
"""


def run(args: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, check=True, capture_output=True, text=True, **kw)


def build_wheel(work: Path) -> Path:
    src = work / "src"
    shutil.copytree(
        REPO,
        src,
        symlinks=True,
        ignore=shutil.ignore_patterns(
            ".venv*",  # .venv and make test-latest's .venv-latest
            ".git",
            "build",
            "dist",
            "*.egg-info",
            "__pycache__",
            ".*_cache",
            ".skillreach",
            ".prefect",
            "runs",
            ".hypothesis",
        ),
    )
    run([UV, "build", "--wheel", "--quiet", "-o", str(work / "dist"), str(src)], cwd=src)
    return next((work / "dist").glob("skillreach-*.whl"))


def _children_cpu() -> float:
    """CPU seconds (user + system) of the finished child processes: steadier than wall under load."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def install(tool: str, wheel: Path, extras: str, work: Path) -> tuple[float, dict[str, Any]]:
    venv = work / f"venv-{tool}"
    target = f"{wheel}[{extras}]" if extras else str(wheel)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON"))}
    if tool == "uv":
        run([UV, "venv", "--quiet", "--python", sys.executable, str(venv)], env=env)
        py = str(venv / "bin" / "python")
        cmd = [UV, "pip", "install", "--quiet", "--no-cache", "--python", py, target]
    else:
        base = getattr(sys, "_base_executable", sys.executable)
        run([base, "-m", "venv", str(venv)], env=env)
        cmd = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-cache-dir", target]
    start, cpu = time.monotonic(), _children_cpu()
    run(cmd, env=env)
    seconds = time.monotonic() - start
    info_cpu = _children_cpu() - cpu
    info = json.loads(run([str(venv / "bin" / "python"), "-c", _INSPECT], env=env).stdout)
    info["cpu"] = info_cpu
    return seconds, info


def exclusive(dists: dict[str, dict[str, Any]], root: str) -> dict[str, set[str]]:
    """For each direct dependency of ``root``: the distributions only it brings in (itself and what
    no other direct dependency needs): what leaving it out would remove."""

    def closure(start: list[str]) -> set[str]:
        seen: set[str] = set()
        todo = list(start)
        while todo:
            n = todo.pop()
            if n in seen or n not in dists:
                continue
            seen.add(n)
            todo.extend(dists[n]["requires"])
        return seen

    direct = [r for r in dists[root]["requires"] if r in dists]
    everything = closure(direct)
    return {dep: everything - closure([d for d in direct if d != dep]) for dep in direct}


def _mb(n: int) -> str:
    return f"{n / MB:.1f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--extras", default="", help="e.g. fast or fast,postgres")
    ap.add_argument("--only", choices=("uv", "pip"), help="one installer only")
    ap.add_argument("--wheel", type=Path, help="a built wheel (else this checkout's, built now)")
    ap.add_argument("--top", type=int, default=25, help="rows of the per-distribution table")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="install-size-") as tmp:
        work = Path(tmp)
        wheel = args.wheel or build_wheel(work)
        label = f"skillreach[{args.extras}]" if args.extras else "skillreach"
        print(f"{label} from {wheel.name} (MB = 10^6 bytes; disk: what du counts, files: their bytes)")
        print()
        print("| installer | site-packages, disk | files | distributions | wall s (empty cache) | CPU s |")
        print("|---|---:|---:|---:|---:|---:|")
        results = {}
        for tool in ("uv", "pip"):
            if args.only and tool != args.only:
                continue
            seconds, info = install(tool, wheel, args.extras, work)
            results[tool] = info
            disk, files = int(info["total"][1]), int(info["total"][0])
            n = len(info["dists"])
            cpu = float(info["cpu"])
            print(
                f"| {tool} | {disk / MB:.0f} MB | {files / MB:.0f} MB | {n} | {seconds:.1f} | {cpu:.1f} |",
                flush=True,
            )
        which = "pip" if "pip" in results else "uv"
        dists: dict[str, dict[str, Any]] = results[which]["dists"]
        print()
        print(f"What each direct dependency brings in alone ({which}: what leaving it out would save):")
        print()
        print("| dependency | disk MB | files MB | distributions |")
        print("|---|---:|---:|---|")
        only = exclusive(dists, "skillreach")
        rows = sorted(only.items(), key=lambda kv: -sum(int(dists[n]["disk"]) for n in kv[1]))
        for dep, names in rows:
            disk = sum(int(dists[n]["disk"]) for n in names)
            files = sum(int(dists[n]["bytes"]) for n in names)
            print(f"| {dep} | {_mb(disk)} | {_mb(files)} | {', '.join(sorted(names)) or '(shared)'} |")
        print()
        print(f"The largest distributions ({which}; their own files, bytecode included):")
        print()
        print("| distribution | version | disk MB | files MB |")
        print("|---|---|---:|---:|")
        ordered = sorted(dists.items(), key=lambda kv: -int(kv[1]["disk"]))
        for name, d in ordered[: args.top]:
            print(f"| {name} | {d['version']} | {_mb(int(d['disk']))} | {_mb(int(d['bytes']))} |")
        rest = ordered[args.top :]
        print(
            f"| {len(rest)} others | | {_mb(sum(int(d['disk']) for _, d in rest))} | "
            f"{_mb(sum(int(d['bytes']) for _, d in rest))} |"
        )
    return 0


if __name__ == "__main__":
    if not Path(UV).exists():
        sys.exit("bench/install_size.py: uv is not installed (make .venv/.installed installs it)")
    sys.exit(main())
