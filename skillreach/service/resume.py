"""Which crashed runs the service resumes by itself, and how often (pure).

A crashed ``nightly-compliance`` or ``rebaseline-all`` run — its process killed, its machine restarted
under it — is resumed once without a person: ``resolve-crashed`` (triggered by Prefect's
``prefect.flow-run.Crashed`` event) schedules the *same* flow run again, as ``prefect flow-run retry``
does (same id, same parameters, same expected start, so the same study folder: the study resumes from its
probes). A run that crashes again after that (its ``run_count`` says it ran twice) is left Crashed, and is
alerted as any run that ended badly.
"""

from __future__ import annotations

__all__ = ["RESUMED_DEPLOYMENTS", "RESUMES", "resumes_automatically"]

RESUMED_DEPLOYMENTS = frozenset({"nightly-compliance", "rebaseline-all"})
"""The deployments whose crashed runs are resumed without a person."""
RESUMES = 1
"""How many times one run is resumed."""


def resumes_automatically(deployment: str | None, run_count: int) -> bool:
    """Whether a crashed run of ``deployment`` that ran ``run_count`` times is resumed by the service
    (then it is no alert yet: the resumed run says how it ends)."""
    return deployment in RESUMED_DEPLOYMENTS and run_count <= RESUMES
