"""``skillreach serve``'s set-up of the server, in one process: ``python -m skillreach.deployments.setup``.

Started by ``serve`` as soon as the server process is, so that this process's imports (Prefect, its CLI,
skillreach) overlap the server's boot; it waits for ``/api/health`` itself, then, in order:

1. the process work pool (``prefect work-pool create POOL --type process --overwrite``),
2. the deployments (``prefect --no-prompt deploy --all --prefect-file SPEC``),
3. the automations (``deployments/automations.py``),
4. the shared rate limits (``deployments/limits.py``),
5. the Prefect variable ``skillreach-service`` naming the service's folder (``status`` anywhere finds it).

The two Prefect commands run through Prefect's own CLI entry point in this process (the same code and
output as the ``prefect`` program, without an interpreter and an ``import prefect`` each: several seconds
apiece on a loaded machine). Each step prints one line ``@@setup {json}`` (``{"step", "ok", "said"}``,
or ``{"step", "error"}`` with the line of Prefect's output that says why); serve logs them as they come.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

__all__ = ["MARK", "main", "run_prefect_cli", "why"]

MARK = "@@setup "


def why(text: str) -> str:
    """The line of a Prefect command's output that says what went wrong: the last one naming an error,
    else the last non-empty one."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for line in reversed(lines):
        if any(w in line.lower() for w in ("error", "exception", "failed", "invalid", "not found")):
            return line
    return lines[-1] if lines else "(no output)"


def _say(**fields: Any) -> None:
    sys.__stdout__.write(MARK + json.dumps(fields) + "\n")  # type: ignore[union-attr]
    sys.__stdout__.flush()  # type: ignore[union-attr]


def run_prefect_cli(*args: str) -> tuple[int, str]:
    """``prefect ARGS`` through Prefect's CLI entry point in this process: (exit code, its output)."""
    from prefect.cli import app

    out = io.StringIO()
    argv = sys.argv
    sys.argv = ["prefect", *args]
    code = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            try:
                app()
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.argv = argv
    return code, out.getvalue()


def _healthy(api: str, timeout_s: float) -> bool:
    import httpx

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{api}/health", timeout=2).status_code == 200:
                return True
        time.sleep(0.25)
    return False


async def _set_variable(name: str, value: dict[str, Any]) -> str:
    from prefect.variables import Variable

    await Variable.aset(name, value, overwrite=True)
    return name


def _step(name: str, fn: Callable[[], Any]) -> Any:
    try:
        said = fn()
    except Exception as exc:  # a step that fails: one line, and the steps after it do not run
        _say(step=name, error=f"{type(exc).__name__}: {exc}")
        raise SystemExit(1) from exc
    _say(step=name, ok=True, said=said)
    return said


def main(argv: list[str] | None = None) -> int:
    """``POOL SPEC VARIABLE_JSON``: the work pool, the prefect.yaml to deploy, the variable's value."""
    pool, spec, variable = (argv if argv is not None else sys.argv[1:])[:3]
    from prefect.cli import app  # noqa: F401 - imported while the server boots

    from skillreach.deployments.automations import upsert_automations
    from skillreach.deployments.limits import ensure_from_settings
    api = os.environ["PREFECT_API_URL"].rstrip("/")
    _say(step="imported", ok=True)
    if not _healthy(api, float(os.environ.get("SKILLREACH_SERVE_HEALTH_TIMEOUT_S", "300"))):
        _say(step="health", error=f"no answer from {api}/health")
        return 1

    def cli(what: str, *args: str) -> Callable[[], str]:
        def run() -> str:
            code, text = run_prefect_cli(*args)
            if code != 0:
                raise RuntimeError(f"{what} failed with exit code {code}: {why(text)}")
            return ""

        return run

    try:
        _step("work pool", cli("prefect work-pool create", "work-pool", "create", pool, "--type", "process",
                               "--overwrite"))
        _step("deploy", cli("prefect deploy", "--no-prompt", "deploy", "--all", "--prefect-file", spec))
        _step("automations", lambda: asyncio.run(upsert_automations()))
        _step("limits", lambda: asyncio.run(ensure_from_settings()))
        _step("variable", lambda: asyncio.run(_set_variable("skillreach-service", json.loads(variable))))
    except SystemExit as exc:
        return int(exc.code or 1)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
