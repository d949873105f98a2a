"""Every agent recorded exactly (issue 41), with the REAL agent CLIs against the project's stand-ins:
``skillreach run --runtime <agent> --concurrency 4`` on the two-skill test set of
:mod:`tests.helpers.two_skills` — two skill calls in one model response, in both orders, the target
first, second or neither — for claude-code, pi, codex, gemini-cli, opencode and copilot. Each records the
skills in the model's order, sends no request after its target, records the tokens, turns and cost the
stand-in served, carries its version though ``--version`` takes 21 s, and leaves no process behind.

Skipped, never passed, for an agent whose CLI is not installed (``.ci/run`` installs them into
``~/.cache/skillreach/``), or OpenCode without ripgrep.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.helpers import hang
from tests.helpers.two_skills import AGENTS, check, run_two_skill_set

pytestmark = pytest.mark.realcli


def installed(runtime: str) -> str:
    path = AGENTS[runtime].find()
    if path is None:
        pytest.skip(f"the real {runtime} CLI is not installed (run .ci/run)")
    if runtime == "opencode" and shutil.which("rg") is None:
        pytest.skip("ripgrep (rg) is not on PATH: OpenCode's skill tool cannot run offline without it")
    return path


@pytest.mark.parametrize("runtime", list(AGENTS))
def test_two_skills_in_one_response_recorded_exactly(runtime: str, tmp_path: Path) -> None:
    installed(runtime)
    agent = AGENTS[runtime]
    result = run_two_skill_set(agent, tmp_path)
    print("\n" + check(agent, result))


@pytest.mark.parametrize("runtime", list(AGENTS))
async def test_the_version_from_the_package_is_what_version_says(runtime: str) -> None:
    """The version read from the npm package's ``package.json`` is said as the CLI's own ``--version``."""
    from skillreach.runtimes import runtime_class
    from skillreach.runtimes._version import package_json_version

    path = installed(runtime)
    cls = runtime_class(runtime)
    packages, line = cls.packages, cls.version_line  # type: ignore[attr-defined]
    said = hang.finish([path, "--version"], limit_s=120)
    first = (said.stdout or said.stderr).strip().splitlines()[0]
    assert package_json_version(path, packages, line) == first == AGENTS[runtime].version
