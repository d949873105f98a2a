"""Thin async Prefect flows that compose the tasks of ``skillreach.tasks``: the study (``study``), the
service's flows (``service``: nightly compliance, re-baselining, watching skills and pins), staged
checks, A/B diffs, sweeps, clusters, query generation, optimisation and uplift. No SQL, HTTP, file I/O
or prompt rendering in a flow body.
"""

from skillreach._io.redact import install_redaction, redact_text

install_redaction()  # a flow run in a worker's process: its log records (Prefect's too) masked


def _redact_failed_states() -> None:
    """Prefect writes a failed run's state message from the exception itself (``prefect.states.
    format_exception``, called by ``exception_to_failed_state`` for every task and flow run), not
    through a logger: that text is masked too, whichever exception it is (ours already are)."""
    import prefect.states

    original = getattr(prefect.states, "format_exception", None)
    if original is None or getattr(original, "skillreach_redacts", False):
        return

    def format_exception(exc: BaseException, tb: object = None) -> str:
        return redact_text(original(exc, tb))

    format_exception.skillreach_redacts = True  # type: ignore[attr-defined]
    prefect.states.format_exception = format_exception


_redact_failed_states()
