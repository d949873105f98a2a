"""The codex runtime through ``skillreach run --runtime codex`` with the stand-in ``codex`` executable
(``tests/fakes/codex_stub/codex``: what Codex 0.171.0 does headless, without npm) against the Responses API
stand-in: concurrency 4, killed half-way and resumed, activations from the OTel records. The same
scenario with the real CLI is ``tests/test_runtime_realcli_codex.py``."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.codex_study import CODEX_STUB, killed_half_way_and_resumed


def test_codex_through_skillreach_run_killed_half_way_and_resumed(tmp_path: Path) -> None:
    killed_half_way_and_resumed(str(CODEX_STUB), tmp_path, "codex-cli 0.171.0-stub")
