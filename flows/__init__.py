"""Thin async Prefect flows that compose the tasks of ``skillreach.tasks``: the study (``study``), the
service's flows (``service``: nightly compliance, re-baselining, watching skills and pins), staged
checks, A/B diffs, sweeps, clusters, query generation, optimisation and uplift. No SQL, HTTP, file I/O
or prompt rendering in a flow body.
"""
