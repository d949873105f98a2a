"""The layering holds: the domain package imports neither Prefect, network clients, nor the mapped
orchestration packages (flows, tasks, runtimes, deployments); the wheel installs them under the
``skillreach`` namespace only."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
import tomllib
from pathlib import Path

import skillreach

FORBIDDEN = ("prefect", "anthropic", "openai", "httpx", "aiohttp")
ORCHESTRATION = ("skillreach.runtimes", "skillreach.tasks", "skillreach.flows", "skillreach.deployments")
REPO = Path(__file__).resolve().parents[1]


def domain_modules() -> list[str]:
    return [
        m.name
        for m in pkgutil.walk_packages(skillreach.__path__, "skillreach.")
        if not m.name.startswith(("skillreach.cli", "skillreach.store.migrations", *ORCHESTRATION))
    ]


def test_domain_modules_import_no_orchestrator_network_client_or_runtime() -> None:
    modules = domain_modules()
    assert {"skillreach.scoring.core", "skillreach.study.runner", "skillreach.study.config"} <= set(modules)
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        f"top = {{n.split('.')[0] for n in sys.modules}} & set({FORBIDDEN!r})\n"
        f"ours = {{n for n in sys.modules if n.startswith({ORCHESTRATION!r})}}\n"
        "print(' '.join(sorted(top | ours)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"domain modules pulled in: {out.stdout.strip()}"


def test_the_wheel_installs_no_generic_top_level_package() -> None:
    """flows/, tasks/, runtimes/ and deployments/ are mapped under skillreach; nothing else is top level."""
    tool = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    tops = {p.split(".")[0] for p in tool["packages"]}
    assert tops == {"skillreach"}
    mapping = tool["package-dir"]
    assert {k: v for k, v in mapping.items() if k in ORCHESTRATION} == {
        "skillreach.runtimes": "runtimes", "skillreach.tasks": "tasks", "skillreach.flows": "flows",
        "skillreach.deployments": "deployments",
    }
    for folder in mapping.values():
        assert (REPO / folder / "__init__.py").is_file()


def test_no_task_reads_the_settings_from_the_environment() -> None:
    """Tasks take the study's resolved configuration; only where a study enters are settings loaded."""
    offenders = [p.name for p in (REPO / "tasks").glob("*.py") if "load_settings" in p.read_text("utf-8")]
    assert offenders == []


HEAVY = ("prefect", "pydantic", "pydantic_settings", "scipy", "numpy", "asyncio", "jinja2", "yaml", "rich")


def test_the_cli_starts_without_heavy_modules() -> None:
    """``skillreach --help`` and every command's start pay only for typer: each command imports what
    it needs when it runs (``python -X importtime -c 'import skillreach.cli'`` shows the rest)."""
    code = (
        "import sys, skillreach.cli\n"
        f"print(' '.join(sorted({{n.split('.')[0] for n in sys.modules}} & set({HEAVY!r}))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"importing the CLI pulled in: {out.stdout.strip()}"
