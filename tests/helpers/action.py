"""``action.yml``'s steps run as a script, as GitHub runs a composite action's ``run:`` steps (bash
``-eo pipefail``, inputs through ``env:`` only), the ``uses:`` set-up steps skipped: what
``tests/test_team_kit.py`` and ``tests/test_pr_gate.py`` run instead of GitHub."""

from __future__ import annotations

import re
from collections.abc import Collection
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import REPO
from tests.helpers import hang

__all__ = ["ALLOWED_USES", "run_action"]

ALLOWED_USES = {"actions/setup-python", "actions/cache"}
"""What the action's ``uses:`` steps may be: set-up a script run on this machine does not need."""
_EXPR = re.compile(r"\$\{\{\s*(.+?)\s*\}\}")


def _condition(cond: str | None, inputs: dict[str, str], failed: bool) -> bool:
    """The ``if:`` forms the action uses: ``always()``, ``inputs.X == 'v'``, ``inputs.X != ''``, joined
    with ``&&``. Without ``always()`` a step runs only when no step before it failed."""
    if cond is None:
        return not failed
    parts = [p.strip() for p in cond.split("&&")]
    ok = "always()" in parts or not failed
    for part in parts:
        if part == "always()":
            continue
        m = re.fullmatch(r"inputs\.([\w-]+) (==|!=) '([^']*)'", part)
        assert m, f"the test runner does not know the condition {part!r}; teach it"
        same = inputs[m.group(1)] == m.group(3)
        ok = ok and (same if m.group(2) == "==" else not same)
    return ok


def run_action(
    inputs: dict[str, str],
    cwd: Path,
    env: dict[str, str],
    runner_temp: Path,
    *,
    skip: Collection[str] = (),
    timeout: float = 600,
) -> list[dict[str, Any]]:
    """Every step of ``action.yml`` (those named in ``skip`` left out: ``Install skillreach`` when the
    skillreach on PATH is the one under test). Returns each step's name, whether it ran, exit code and
    output."""
    spec = yaml.safe_load((REPO / "action.yml").read_text(encoding="utf-8"))
    assert spec["runs"]["using"] == "composite"
    unknown = set(inputs) - set(spec["inputs"])
    assert not unknown, f"the action has no inputs {unknown}"
    values = {k: str(v.get("default", "")) for k, v in spec["inputs"].items()} | inputs
    context = {"github.action_path": str(REPO), "github.action_ref": "test", "runner.os": "Linux"}

    def expand(text: str) -> str:
        def one(m: re.Match[str]) -> str:
            key = m.group(1)
            if key.startswith("inputs."):
                return values[key.removeprefix("inputs.")]
            return context[key]

        return _EXPR.sub(one, text)

    results: list[dict[str, Any]] = []
    failed = False
    for step in spec["runs"]["steps"]:
        if "uses" in step:
            assert step["uses"].split("@")[0] in ALLOWED_USES, step["uses"]
            results.append({"name": step["name"], "ran": False, "rc": None, "out": ""})
            continue
        if step["name"] in skip or not _condition(step.get("if"), values, failed):
            results.append({"name": step["name"], "ran": False, "rc": None, "out": ""})
            continue
        assert "${{" not in step["run"], f"{step['name']}: inputs reach a script through env: only"
        assert step["shell"] == "bash"
        step_env = {**env, "RUNNER_TEMP": str(runner_temp)}
        step_env.update({k: expand(str(v)) for k, v in step.get("env", {}).items()})
        proc = hang.finish(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
            limit_s=timeout,
            cwd=cwd,
            env=step_env,
        )
        failed = failed or proc.returncode != 0
        results.append(
            {
                "name": step["name"],
                "ran": True,
                "rc": proc.returncode,
                "out": proc.stdout + proc.stderr,
                "stdout": proc.stdout,
                "stderr": proc.stderr,
            }
        )
    return results
