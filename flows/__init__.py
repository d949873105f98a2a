"""Thin async Prefect flows that compose the tasks of ``skillreach.tasks``: the study (``study``), the
service's flows (``service``: nightly compliance, re-baselining, watching skills and pins), staged
checks, A/B diffs, sweeps, clusters, query generation, optimisation and uplift. No SQL, HTTP, file I/O
or prompt rendering in a flow body.
"""

from skillreach._io.redact import install_redaction

install_redaction()  # a flow run in a worker's process: its log records (Prefect's too) masked
