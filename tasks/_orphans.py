"""A deployment run's process ends with the worker that started it.

Prefect's process worker starts each flow run as a child process; killed with ``kill -9``, the worker
leaves that child running (issue 29: an orphaned nightly probed on for 7+ minutes and wrote probes
after its run was marked Crashed). :func:`watch_parent` starts a daemon thread in the flow-run process
(``PREFECT__FLOW_RUN_ID`` set: a worker started it) that notices its parent is gone (the process was
re-parented) within ``interval_s`` and sends SIGTERM to its own process group when it leads one
(the runtimes' agent CLIs with it), else to itself: the run stops as on Ctrl-C, keeping what it wrote.
"""

from __future__ import annotations

import logging
import os
import signal
import threading

__all__ = ["watch_parent"]

_started: list[threading.Thread] = []
_lock = threading.Lock()


def _end(log: logging.Logger, parent: int) -> None:
    log.warning("the worker that started this flow run (pid %d) is gone; stopping the run", parent)
    if os.getpgid(0) == os.getpid():
        os.killpg(os.getpid(), signal.SIGTERM)
    else:
        os.kill(os.getpid(), signal.SIGTERM)


def watch_parent(interval_s: float = 1.0, *, force: bool = False) -> bool:
    """Start the watch once per process, only in a worker-started flow run (or ``force``); whether it
    runs."""
    if not force and not os.environ.get("PREFECT__FLOW_RUN_ID"):
        return False
    with _lock:
        if _started:
            return True
        parent = os.getppid()
        log = logging.getLogger("skillreach")

        def run() -> None:
            while True:
                threading.Event().wait(interval_s)
                if os.getppid() != parent:
                    _end(log, parent)
                    return

        thread = threading.Thread(target=run, name="skillreach-parent-watch", daemon=True)
        thread.start()
        _started.append(thread)
    return True
