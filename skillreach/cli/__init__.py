"""The ``skillreach`` command. Each command group lives in its own module and registers itself here.

Errors the user caused (:class:`~skillreach.errors.SkillreachError`) print one line on stderr and exit
with the error's code; never a traceback.
"""

from __future__ import annotations

import importlib
import sys
from contextlib import nullcontext

import typer

from skillreach.cli._startup import startup_gc
from skillreach.errors import SkillreachError

__all__ = ["app", "main"]

app = typer.Typer(
    name="skillreach",
    help="Measure whether LLM agents reach the right Agent Skill.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Each module defines ``register(app)``.
_COMMAND_MODULES = (
    "skills_cmds",  # lint, overlap
    "queries_cmds",  # queries seal|verify|import (defines ``queries_app``)
    "generate_cmds",  # queries generate (adds to ``queries_app``)
    "score_cmds",  # score, report
    "run_cmds",  # run, serve
    "worker_cmds",  # worker
    "doctor_cmds",  # doctor
    "baseline_cmds",  # baseline record|compare, check
    "diff_cmds",  # diff
    "sweep_cmds",  # sweep
    "cluster_cmds",  # cluster
    "optimize_cmds",  # optimize, uplift
    "project_cmds",  # --version, init, config show|docs
)

try:
    for _mod in _COMMAND_MODULES:
        importlib.import_module(f"skillreach.cli.{_mod}").register(app)
except KeyboardInterrupt:  # Ctrl-C while the command is still starting: the same one line
    print("skillreach: interrupted", file=sys.stderr)
    raise SystemExit(130) from None


_INTERRUPTED = 130
_INTERRUPTED_LINE = "skillreach: interrupted; results written so far are kept (a re-run resumes)"


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the app, turning our errors into one line and an exit code."""
    args = sys.argv[1:] if argv is None else argv
    # ``run`` loads its modules with the garbage collector paused, until the study starts (_startup.py)
    paused = startup_gc.paused() if args[:1] == ["run"] else nullcontext()
    try:
        with paused:
            # In non-standalone mode click returns a command's ``typer.Exit`` code instead of exiting.
            rv = app(args=argv, standalone_mode=False)
    except SkillreachError as exc:
        print(f"skillreach: error: {exc.message}", file=sys.stderr)
        return exc.exit_code
    except typer.Exit as exc:
        return int(exc.exit_code or 0)
    except (KeyboardInterrupt, typer.Abort):  # click turns Ctrl-C into Abort outside standalone mode
        print(_INTERRUPTED_LINE, file=sys.stderr)
        return _INTERRUPTED
    except OSError as exc:  # a path the user gave that no command translated: still one line, exit 2
        print(f"skillreach: error: {_os_error_line(exc)}", file=sys.stderr)
        return 2
    except typer.TyperException as exc:  # usage errors from typer's bundled click: one line too
        message = getattr(exc, "format_message", None)
        if message is None:
            raise
        ctx = getattr(exc, "ctx", None)
        path = getattr(ctx, "command_path", None) or "skillreach"
        text = "; ".join(line.strip() for line in str(message()).splitlines() if line.strip()).rstrip(".")
        print(f"skillreach: error: {text}; see '{path} --help'", file=sys.stderr)
        return int(getattr(exc, "exit_code", 2))
    if rv == _INTERRUPTED:  # typer turns Ctrl-C inside a command into a bare Exit(130); no command uses 130
        print(_INTERRUPTED_LINE, file=sys.stderr)
    return rv if isinstance(rv, int) else 0


def _os_error_line(exc: OSError) -> str:
    """``PATH: what went wrong; check the path`` from an OS error no command translated."""
    where = exc.filename if exc.filename is not None else None
    what = exc.strerror or str(exc) or type(exc).__name__
    if where is None:
        return f"{what}; check the paths and folders given"
    dest = f" → {exc.filename2}" if exc.filename2 is not None else ""
    return f"{where}{dest}: {what}; check this path"


def _console_main() -> None:  # pragma: no cover
    sys.exit(main())
