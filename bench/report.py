"""The HTML report of a big study: 200 skills, 100,000 probes (10,000 queries × 10 attempts).

Scores a synthetic study (bench/score.py's generator), then times :func:`render_html` (best of 3)
against the same-process reference (bench/_calibrate.py: the stdlib json module decoding a probe
line), and prints the page size. With a headless Chromium on PATH (``chromium-headless-shell``,
``chromium`` or ``google-chrome``) it also loads the page and checks that the browser laid out every
class row, which is what "opens in a browser" means here; without one it says so.

Goals: render ≤ 2 s at the reference's quiet speed; page ≤ 3 MB; opens in a browser.

    .venv/bin/python bench/report.py [--probes 100000] [--skills 200] [--attempts 10]
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from _calibrate import load, quiet_seconds, reference_us_per_line, verdict
from score import make_study

from skillreach.reports import render_html
from skillreach.scoring import ProbeTable, score

BROWSERS = ("chromium-headless-shell", "chromium", "chromium-browser", "google-chrome", "headless_shell")


def browser_check(page: Path) -> tuple[str, bool | None]:
    """(what happened, whether the DOM the browser built holds the page's class rows)."""
    exe = next((shutil.which(b) for b in BROWSERS if shutil.which(b)), None)
    if exe is None:
        return "no headless Chromium on PATH (apt-get install chromium-headless-shell); not checked", None
    with tempfile.TemporaryDirectory() as profile:
        argv = [exe, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}"]
        argv += ["--virtual-time-budget=10000", "--dump-dom", page.as_uri()]
        t0 = time.perf_counter()
        res = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
        took = time.perf_counter() - t0
    if res.returncode != 0:
        return f"{exe} exited {res.returncode}: {res.stderr.strip().splitlines()[-1:]}", False
    want = len(re.findall(r"<tr[^>]*data-class=", page.read_text(encoding="utf-8")))
    got = len(re.findall(r"<tr[^>]*data-class=", res.stdout))
    what = f"{Path(exe).name} loaded it in {took:.1f} s: {got} of {want} class rows in its DOM"
    return what, got == want > 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--probes", type=int, default=100_000)
    ap.add_argument("--skills", type=int, default=200)
    ap.add_argument("--attempts", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", type=Path, help="also write the page here")
    args = ap.parse_args()

    qs, catalog, lines = make_study(args.probes, args.skills, args.attempts, args.seed)
    artifact = score(qs, ProbeTable.from_lines(lines, source="bench"), catalog)
    ref = reference_us_per_line()
    best, html = float("inf"), ""
    for _ in range(max(1, args.repeat)):
        t0 = time.perf_counter()
        html = render_html(artifact)
        best = min(best, time.perf_counter() - t0)
    size = len(html.encode("utf-8"))
    quiet = quiet_seconds(best, ref)
    cells = len(artifact.confusion)
    print(f"study: {args.skills} skills, {artifact.counts.probes:,} probes, {cells:,} confusion cells")
    print(f"render_html: {best:.3f} s (best of {args.repeat}; {quiet:.3f} s at the reference's quiet speed)")
    print(f"page: {size / 1e6:.2f} MB")
    with tempfile.TemporaryDirectory() as tmp:
        page = (args.keep or Path(tmp) / "report.html").resolve()
        page.write_text(html, encoding="utf-8")
        what, opened = browser_check(page)
    print(f"browser: {what}")
    print(verdict("render, quiet seconds", quiet, 2.0, " s"))
    print(verdict("page size", size / 1e6, 3.0, " MB"))
    print(f"GOAL opens in a browser: {'met' if opened else 'NOT checked' if opened is None else 'NOT met'}")
    print(load())


if __name__ == "__main__":
    main()
