"""The service log under ``.skillreach/logs/`` (issue 29, problem 10): the server's and the worker's
output copied into rotating files, and every deployment run's log lines into ``runs.log`` through the
logging configuration ``serve`` hands the worker (``PREFECT_LOGGING_SETTINGS_PATH``)."""

from __future__ import annotations

import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

from skillreach.deployments.logs import log_dir, pump, rotating_logger, write_logging_config
from tests.helpers import hang


def test_a_process_output_goes_to_its_rotating_file_and_the_terminal(tmp_path: Path) -> None:
    folder = log_dir({"SKILLREACH_HOME": str(tmp_path / "home")}, tmp_path)
    assert folder == tmp_path / "home" / "logs"
    log = rotating_logger(folder / "worker.log", "worker-test")
    proc = subprocess.Popen([sys.executable, "-c", "print('worker up'); print('picked up run x')"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.stdout is not None
    echo = StringIO()
    thread = pump(proc.stdout, log, echo=echo)
    proc.wait(30)
    thread.join(10)
    for handler in log.handlers:
        handler.flush()
    lines = ["worker up", "picked up run x"]
    assert (folder / "worker.log").read_text(encoding="utf-8").splitlines() == lines
    assert echo.getvalue().splitlines() == ["worker up", "picked up run x"]
    handler = log.handlers[0]
    assert getattr(handler, "maxBytes", 0) == 10 * 1024 * 1024
    assert getattr(handler, "backupCount", 0) == 5


def test_a_flow_runs_log_lines_reach_runs_log(tmp_path: Path) -> None:
    folder = log_dir({}, tmp_path)
    assert folder == tmp_path / ".skillreach" / "logs"
    config = write_logging_config(folder)
    code = ("from prefect.logging.configuration import setup_logging; setup_logging(); import logging; "
            "logging.getLogger('prefect.flow_runs').info('nightly-2026-12-03: 1 gate breach'); "
            "logging.getLogger('prefect.task_runs').debug('not at debug')")
    env = {**os.environ, "PREFECT_LOGGING_SETTINGS_PATH": str(config),
           "PREFECT_LOGGING_TO_API_ENABLED": "false"}
    hang.finish([sys.executable, "-c", code], limit_s=60, check=True, env=env)
    text = (folder / "runs.log").read_text(encoding="utf-8")
    assert "nightly-2026-12-03: 1 gate breach" in text
    assert "not at debug" not in text
