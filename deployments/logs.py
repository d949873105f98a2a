"""The service log: rotating files under ``.skillreach/logs/`` (``$SKILLREACH_HOME/logs``).

- ``server.log``: the Prefect server ``serve`` started (its output, which was discarded);
- ``worker.log``: the process worker (also echoed to the terminal, as before);
- ``runs.log``: every deployment run — the flow-run processes the worker starts read the logging
  configuration ``serve`` writes (``PREFECT_LOGGING_SETTINGS_PATH``): Prefect's own, plus this file.

Each rotates at 10 MB and keeps five old files (``server.log.1`` …). Secrets never reach them: the
payloads hold none, and the CLI's error lines are redacted where they are printed.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import threading
from pathlib import Path
from typing import IO

__all__ = ["BACKUPS", "MAX_BYTES", "log_dir", "pump", "rotating_logger", "write_logging_config"]

MAX_BYTES = 10 * 1024 * 1024
BACKUPS = 5


def log_dir(env: dict[str, str], repo: Path) -> Path:
    """``$SKILLREACH_HOME/logs``, else ``.skillreach/logs`` beside prefect.yaml; created."""
    home = Path(env.get("SKILLREACH_HOME") or repo / ".skillreach")
    folder = (home if home.is_absolute() else repo / home) / "logs"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def rotating_logger(path: Path, name: str) -> logging.Logger:
    """A logger writing each line as it is to ``path``, rotated at :data:`MAX_BYTES`."""
    log = logging.getLogger(f"skillreach.service.{name}")
    log.propagate = False
    log.setLevel(logging.INFO)
    for old in list(log.handlers):
        log.removeHandler(old)
        old.close()
    handler = logging.handlers.RotatingFileHandler(path, maxBytes=MAX_BYTES, backupCount=BACKUPS,
                                                   encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(message)s"))
    log.addHandler(handler)
    return log


def pump(stream: IO[bytes], log: logging.Logger, echo: IO[str] | None = None) -> threading.Thread:
    """A daemon thread copying ``stream``'s lines into ``log`` (and to ``echo``) until it closes."""

    def run() -> None:
        out = echo
        for raw in iter(stream.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\n")
            log.info(line)
            if out is not None:
                try:
                    out.write(line + "\n")
                    out.flush()
                except (OSError, ValueError):
                    out = None  # the terminal went away: the file still gets every line
        stream.close()

    thread = threading.Thread(target=run, name=f"pump-{log.name}", daemon=True)
    thread.start()
    return thread


def write_logging_config(folder: Path) -> Path:
    """Prefect's logging configuration plus a rotating ``runs.log`` on the root logger (every
    flow-run and task-run line, and every warning), written to ``folder/logging.yml``."""
    import yaml
    from prefect.logging.configuration import DEFAULT_LOGGING_SETTINGS_PATH

    config = yaml.safe_load(Path(DEFAULT_LOGGING_SETTINGS_PATH).read_text(encoding="utf-8"))
    config["formatters"]["service"] = {
        "format": "%(asctime)s | %(process)d | %(levelname)-7s | %(name)s - %(message)s",
        "datefmt": "%Y-%m-%d %H:%M:%S",
    }
    config["handlers"]["service_file"] = {
        "level": "INFO", "class": "logging.handlers.RotatingFileHandler", "formatter": "service",
        "filename": os.fspath(folder / "runs.log"), "maxBytes": MAX_BYTES, "backupCount": BACKUPS,
        "encoding": "utf-8",
    }
    config["root"]["handlers"] = [*config["root"].get("handlers", []), "service_file"]
    path = folder / "logging.yml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path
