"""The domain package imports neither Prefect nor network clients (DEVELOPERS.md)."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import skillreach

FORBIDDEN = ("prefect", "anthropic", "openai", "httpx", "aiohttp")


def test_domain_modules_import_no_orchestrator_or_network_client() -> None:
    modules = [
        m.name
        for m in pkgutil.walk_packages(skillreach.__path__, "skillreach.")
        if not m.name.startswith(("skillreach.cli", "skillreach.migrations"))
    ]
    assert "skillreach.scoring" in modules
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        f"print(' '.join(sorted({{n.split('.')[0] for n in sys.modules}} & set({FORBIDDEN!r}))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"domain modules pulled in: {out.stdout.strip()}"


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
