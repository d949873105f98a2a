"""Resolving a service flow's configuration: a given StudyConfig, a config file, or the bundled example."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from skillreach.study import StudyConfig

__all__ = ["CONFIG_ENV", "resolve_config"]

CONFIG_ENV = "SKILLREACH_STUDY_CONFIG"
"""A config file (TOML/YAML) the deployments read when they are given none."""


@task(name="resolve_config", cache_policy=NO_CACHE)
async def resolve_config(
    config: StudyConfig | None = None, config_file: str | None = None, **updates: Any
) -> StudyConfig:
    """``config`` as given, else built from ``config_file`` (or ``$SKILLREACH_STUDY_CONFIG``), else the
    bundled example; then ``updates`` applied (what the calling flow needs, e.g. compliance=True). A
    grown version of the query set waiting on the service branch is studied instead of the working
    tree's (:func:`skillreach.tasks.corpus.adopt_grown_corpus`)."""
    if config is None:
        path = config_file or os.environ.get(CONFIG_ENV)
        config = StudyConfig.build(Path(path)) if path else StudyConfig.build()
    from skillreach.tasks.corpus import adopt_grown_corpus

    config = config.model_copy(update={k: v for k, v in updates.items() if v is not None})
    return adopt_grown_corpus(config)
