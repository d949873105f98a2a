"""The start-up of ``skillreach`` (``make demo`` is mostly start-up, ``bench/demo_time.py``): what
``import skillreach.cli`` loads, the lazily read version, and the garbage collector paused while
``skillreach run`` loads its modules and on again for the study.

Two tests run the bundled example in a fresh process (a few seconds each on a quiet machine)."""

from __future__ import annotations

import gc
import importlib.metadata
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from skillreach.cli import main

SKILLREACH = str(Path(sys.executable).parent / "skillreach")

HEAVY = ("prefect", "pydantic", "numpy", "scipy", "sqlalchemy", "jinja2", "rich", "httpx", "yaml",
         "importlib.metadata")
"""Modules a command loads when it needs them, never while the command line is read."""


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "SKILLREACH_"))}
    env.update(PREFECT_HOME=str(tmp_path / "prefect-home"), PREFECT_SERVER_ANALYTICS_ENABLED="false",
               DO_NOT_TRACK="1", SKILLREACH_HOME=str(tmp_path / "home"))
    return env


def test_reading_the_command_line_loads_no_heavy_module(tmp_path: Path) -> None:
    code = f"import sys, skillreach.cli; print(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False,
                          env=_env(tmp_path), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == []


def test_version_is_the_installed_distributions() -> None:
    import skillreach
    from skillreach import __version__

    assert __version__ == skillreach.__version__ == importlib.metadata.version("skillreach")
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        _ = skillreach.no_such_name  # type: ignore[attr-defined]


GC_PHASES = """
import gc, sys
phase = {"main": False}
collections = {"start-up": 0, "study": 0}
frozen = []

def seen(event, info):
    if event == "start" and phase["main"]:
        collections["study" if "skillreach.flows.study" in sys.modules else "start-up"] += 1
        frozen.append(gc.get_freeze_count())

gc.callbacks.append(seen)
from skillreach.cli import main
phase["main"] = True
code = main(["run", "--out", sys.argv[1]])
print(code, gc.isenabled(), collections["start-up"], collections["study"], min(frozen),
      gc.get_freeze_count())
"""


def test_run_loads_its_modules_without_collections_and_collects_during_the_study(tmp_path: Path) -> None:
    """Without the pause the start-up of a run starts hundreds of collections (Prefect and its models
    load before ``skillreach.flows.study``); the study itself collects, over its own objects only (the
    loaded modules are frozen while it runs, and thawed when the command returns)."""
    proc = subprocess.run([sys.executable, "-c", GC_PHASES, "out"], capture_output=True, text=True,
                          check=False, env=_env(tmp_path), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    code, enabled, start_up, study, frozen_in_study, frozen_after = proc.stdout.split()[-6:]
    assert (code, enabled) == ("0", "True")
    assert int(start_up) == 0
    assert int(study) > 0
    assert int(frozen_in_study) > 100_000  # the modules' objects
    assert frozen_after == "0"
    assert (tmp_path / "out" / "artifact.json").is_file()


def test_a_refused_run_leaves_the_collector_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert gc.isenabled()
    assert main(["run", "--catalog", "bogus"]) == 2
    assert gc.isenabled()
    assert "--catalog bogus" in capsys.readouterr().err


def test_a_caller_that_turned_the_collector_off_keeps_it_off(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    gc.disable()
    try:
        assert main(["run", "--config", "missing.toml"]) == 2
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_the_demo_command_prints_the_artifacts_figures(tmp_path: Path) -> None:
    """``skillreach run`` as ``make demo`` runs it (the console script, the bundled example)."""
    proc = subprocess.run([SKILLREACH, "run", "--out", "demo"], capture_output=True, text=True,
                          check=False, env={**_env(tmp_path), "COLUMNS": "200"}, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    metrics = json.loads((tmp_path / "demo" / "artifact.json").read_text())["metrics"]
    printed = dict(re.findall(r"^(\w+)\s+│\s+([0-9.]+)", proc.stdout, flags=re.MULTILINE))
    assert printed.keys() >= {"top1_accuracy", "macro_f1", "abstention_rate"}
    for name, value in printed.items():
        assert float(value) == pytest.approx(metrics[name], abs=5e-4), name
    assert "Traceback" not in proc.stderr
