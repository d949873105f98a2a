"""One study: probe every (query, attempt) pair of one query set against one catalog with one runtime,
grade, score, gate and record. The study's home:

- :mod:`~skillreach.study.contract` — what runtimes implement (ProbeOptions, Tracker, Outcome, Runtime);
- :mod:`~skillreach.study.config` — :class:`StudyConfig`, the one resolved configuration;
- :mod:`~skillreach.study.plan` — inputs, plan, batches, study id, output folder;
- :mod:`~skillreach.study.probe_log` — the only reader and writer of ``probes.jsonl``;
- :mod:`~skillreach.study.runner` — the probe loop, canaries, fingerprint, model resolution;
- :mod:`~skillreach.study.cost` — the estimate and the cap;
- :mod:`~skillreach.study.grading` — which probes the judge grades, and the grades kept.

The Prefect flow (``skillreach.flows.study``) composes the tasks that wrap these; everything here is
plain data and functions, usable without Prefect.
"""

from __future__ import annotations

from skillreach.study.config import STUDY_ONLY_KEYS, CatalogStrategy, StudyConfig, redact
from skillreach.study.plan import StudyResult, default_out_dir

__all__ = ["STUDY_ONLY_KEYS", "CatalogStrategy", "StudyConfig", "StudyResult", "default_out_dir", "redact"]
