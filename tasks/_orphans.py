"""A deployment run's process ends with the worker that started it.

Prefect's process worker starts each flow run as a child process; killed with ``kill -9``, the worker
leaves that child running (issue 29: an orphaned nightly probed on for 7+ minutes and wrote probes
after its run was marked Crashed). :func:`watch_parent` starts a daemon thread in the flow-run process
(``PREFECT__FLOW_RUN_ID`` set: a worker started it) that notices its parent is gone (the process was
re-parented) within ``interval_s`` and sends SIGTERM to its own process group when it leads one
(the runtimes' agent CLIs with it), else to itself: the run stops as on Ctrl-C, keeping what it wrote —
and SIGKILL :data:`GRACE_S` later if it has not (a real Prefect engine catches SIGTERM in its main thread
while probe batches run on in worker threads, which hold the interpreter open at exit).
"""

from __future__ import annotations

import logging
import os
import signal
import threading

__all__ = ["watch_parent"]

_started: list[threading.Thread] = []
_lock = threading.Lock()


GRACE_S = 3.0
"""How long the run has, after SIGTERM, to say Crashed and stop before it is killed (SIGKILL)."""


def _signal(sig: int) -> None:
    if os.getpgid(0) == os.getpid():
        os.killpg(os.getpid(), sig)
    else:
        os.kill(os.getpid(), sig)


def _end(log: logging.Logger, parent: int, grace_s: float = GRACE_S) -> None:
    """SIGTERM (Prefect's engine reports the run Crashed), then SIGKILL after ``grace_s``: the engine's
    handler only raises in the main thread, and a probe batch running in a thread pool would keep the
    interpreter alive at exit (and write probes) for as long as the batch lasts."""
    _signal(signal.SIGTERM)  # signals first: a log line may block (its handler writes to a dead pipe)
    threading.Thread(target=log.warning, args=("the worker that started this flow run (pid %d) is gone; "
                                               "stopping the run", parent), daemon=True).start()
    threading.Event().wait(grace_s)
    _signal(signal.SIGKILL)


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
