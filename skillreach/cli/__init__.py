"""The ``skillreach`` command. Each command group lives in its own module and registers itself here.

Errors the user caused (:class:`~skillreach.errors.SkillreachError`) print one line on stderr and exit
with the error's code; never a traceback. So do signals: Ctrl-C (SIGINT) is one line and exit 130, SIGTERM
one line and exit 143 (the console script's handler turns it into the same interruption, so a study
records what it probed on the way out; a second SIGTERM ends the process at once).
"""

from __future__ import annotations

import errno
import importlib
import logging
import os
import signal
import sys
from contextlib import nullcontext

import typer

from skillreach._io.console import escape, guard_streams
from skillreach._io.redact import redact_text
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
    "baseline_cmds",  # baseline record|compare|status|accept|show
    "check_cmds",  # check
    "rebaseline_cmds",  # baseline rebaseline (adds to ``baseline_app``)
    "diff_cmds",  # diff
    "sweep_cmds",  # sweep
    "cluster_cmds",  # cluster
    "optimize_cmds",  # optimize, uplift
    "alerts_cmds",  # alerts list|mute|unmute
    "status_cmds",  # status
    "usage_cmds",  # usage
    "db_cmds",  # db upgrade|copy
    "gc_cmds",  # gc
    "ingest_cmds",  # ingest
    "ui_cmds",  # ui
    "project_cmds",  # --version, init, config show|docs — last: it plains every command's help
)

_INTERRUPTED = 130
_INTERRUPTED_LINE = "skillreach: interrupted; results written so far are kept (a re-run resumes)"
_TERMINATED = 128 + signal.SIGTERM  # 143
_TERMINATED_LINE = "skillreach: terminated (SIGTERM); results written so far are kept (a re-run resumes)"
_signalled: list[int] = []
"""The signals the console script's handler turned into an interruption (SIGTERM), in order."""


def _interrupted() -> int:
    """Say the one line of an interruption; its exit code (143 after SIGTERM, else 130)."""
    if signal.SIGTERM in _signalled:
        print(_TERMINATED_LINE, file=sys.stderr)
        return _TERMINATED
    print(_INTERRUPTED_LINE, file=sys.stderr)
    return _INTERRUPTED


def _on_sigterm(signum: int, frame: object) -> None:
    """SIGTERM interrupts the main thread as Ctrl-C does (every cleanup path runs); a second one while
    that cleanup runs ends the process at once."""
    if _signalled:
        os._exit(_TERMINATED)
    _signalled.append(signum)
    raise KeyboardInterrupt


def _install_sigterm() -> None:
    """SIGTERM → :func:`_on_sigterm`, unless whoever started us ignores it."""
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_IGN:
        signal.signal(signal.SIGTERM, _on_sigterm)


if os.path.basename(getattr(sys.modules.get("__main__"), "__file__", None) or "") == "skillreach":
    _install_sigterm()  # the console script, from its first import on (never a process that imports us)

try:
    for _mod in _COMMAND_MODULES:
        importlib.import_module(f"skillreach.cli.{_mod}").register(app)
except KeyboardInterrupt:  # Ctrl-C or SIGTERM while the command is still starting: the same one line
    raise SystemExit(_interrupted()) from None


class _InterruptSaidOnce(logging.Filter):
    """Drops a library's log record of the interruption itself — SQLAlchemy's pool logs the
    KeyboardInterrupt that cut a connection's close, with its traceback — since the command says the
    interruption in its one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, KeyboardInterrupt)


def _quiet_interrupt_records() -> None:
    """:class:`_InterruptSaidOnce` on the handlers a library's record reaches: the root logger's and
    logging's last resort (a process without handlers prints there). Idempotent."""
    handlers = [logging.lastResort, *logging.getLogger().handlers]
    for handler in handlers:
        if handler is not None and not any(isinstance(f, _InterruptSaidOnce) for f in handler.filters):
            handler.addFilter(_InterruptSaidOnce())


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the app, turning our errors into one line and an exit code. The output streams
    are guarded for the command and given back as they were after it (a caller in the same process —
    a test, an embedding tool — keeps its own streams)."""
    streams = sys.stdout, sys.stderr
    try:
        return _main(argv)
    finally:
        sys.stdout, sys.stderr = streams


def _main(argv: list[str] | None) -> int:
    args = sys.argv[1:] if argv is None else argv
    from skillreach._io.redact import install_redaction

    install_redaction()  # every log record (Prefect's too) and uncaught traceback, masked
    _quiet_interrupt_records()  # an interruption is said once, in one line
    guard_streams()  # and every character printed that could drive the terminal, escaped
    # ``run`` loads its modules with the garbage collector paused, until the study starts (_startup.py)
    paused = startup_gc.paused() if args[:1] == ["run"] else nullcontext()
    try:
        with paused:
            # In non-standalone mode click returns a command's ``typer.Exit`` code instead of exiting.
            rv = app(args=argv, standalone_mode=False)
    except SkillreachError as exc:
        print(f"skillreach: error: {_shown(exc.message)}", file=sys.stderr)
        return exc.exit_code
    except typer.Exit as exc:
        return int(exc.exit_code or 0)
    except (KeyboardInterrupt, typer.Abort):  # click turns Ctrl-C into Abort outside standalone mode
        return _interrupted()
    except OSError as exc:  # a path the user gave that no command translated: still one line, exit 2
        print(f"skillreach: error: {_shown(_os_error_line(exc))}", file=sys.stderr)
        return 2
    except typer.TyperException as exc:  # usage errors from typer's bundled click: one line too
        message = getattr(exc, "format_message", None)
        if message is None:
            raise
        ctx = getattr(exc, "ctx", None)
        path = getattr(ctx, "command_path", None) or "skillreach"
        text = "; ".join(line.strip() for line in str(message()).splitlines() if line.strip()).rstrip(".")
        print(f"skillreach: error: {_shown(text)}; see '{path} --help'", file=sys.stderr)
        return int(getattr(exc, "exit_code", 2))
    except ModuleNotFoundError as exc:  # an optional dependency the default install leaves out
        line = missing_extra_line(exc)
        if line is None:
            raise
        print(f"skillreach: error: {line}", file=sys.stderr)
        return 2
    except Exception as exc:  # a database error no command translated (a disk full mid-study): one line
        line = _database_error_line(exc)
        if line is None:
            raise
        print(f"skillreach: error: {_shown(line)}", file=sys.stderr)
        return 2
    if rv == _INTERRUPTED:  # typer turns Ctrl-C inside a command into a bare Exit(130); no command uses 130
        return _interrupted()
    return rv if isinstance(rv, int) else 0


def _shown(message: str) -> str:
    """An error message as printed: redacted, and escaped onto one line (a name in it may hold ESC or a
    newline)."""
    return escape(redact_text(message))


_EXTRAS = {
    "anthropic": (
        "anthropic",
        "the Anthropic SDK (the anthropic runtime, the rubric judge, generate, optimize)",
    ),
    "aiohttp": ("anthropic", "aiohttp (the anthropic runtime's transport)"),
    "openai": ("openai", "the OpenAI SDK (the openai-compatible runtimes)"),
    "psycopg": ("postgres", "the PostgreSQL driver psycopg"),
    "google.antigravity": ("antigravity", "Google's Antigravity SDK (the antigravity-sdk runtime)"),
}
"""A module the default install leaves out -> (the extra that brings it, what it is for)."""


def missing_extra_line(exc: ModuleNotFoundError) -> str | None:
    """One line naming the extra to install for a module the default install leaves out, else None."""
    name = exc.name or ""
    for module, (extra, what) in _EXTRAS.items():
        if name == module or name.startswith(module + "."):
            return f"{what} is not installed: pip install 'skillreach[{extra}]'"
    return None


def _database_error_line(exc: BaseException) -> str | None:
    if not type(exc).__module__.startswith("sqlalchemy"):
        return None  # sqlalchemy is not loaded for a light command: only look when it raised
    from skillreach.store.limits import database_error_line

    return database_error_line(exc)


def _os_error_line(exc: OSError) -> str:
    """``PATH: what went wrong; check the path`` from an OS error no command translated."""
    where = exc.filename if exc.filename is not None else None
    what = exc.strerror or str(exc) or type(exc).__name__
    if where is None:
        return f"{what}; check the paths and folders given"
    dest = f" → {exc.filename2}" if exc.filename2 is not None else ""
    if exc.errno in _FULL:
        return f"{where}{dest}: {what}; {_FULL[exc.errno]}"
    return f"{where}{dest}: {what}; check this path"


_AGAIN = "then run the same command again (a study keeps the probes it wrote and resumes from them)"
_FULL = {
    errno.ENOSPC: f"free space on that disk, {_AGAIN}",
    errno.EDQUOT: f"free space or raise your disk quota, {_AGAIN}",
    errno.EFBIG: f"the file reached a size limit (ulimit -f); raise it, {_AGAIN}",
}
"""A write that failed for want of space: what to do, since what was written is kept."""


def _console_main() -> None:  # pragma: no cover (run in a subprocess: tests/test_cli_signals.py)
    """The ``skillreach`` console script: SIGTERM becomes one line and exit 143 (a SIGTERM ignored by
    whoever started us stays ignored)."""
    _install_sigterm()
    try:
        code = main()
    except KeyboardInterrupt:  # a signal between main's handlers and here
        code = _interrupted()
    sys.exit(code)
