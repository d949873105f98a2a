"""Resolving a service flow's configuration: a given StudyConfig, a config file, or the bundled example.

The store, the webhooks (the secrets) come from the service's environment (``SKILLREACH_*`` and the file
``$SKILLREACH_STUDY_CONFIG`` names), never from a flow parameter: a deployment run's ``config`` came
through the API as JSON, which never carries them (they are excluded from every dump), and one that
named them would choose the store by accident.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from skillreach.study import StudyConfig

__all__ = ["CONFIG_ENV", "example_config", "resolve_config", "service_secrets", "with_service_secrets"]

CONFIG_ENV = "SKILLREACH_STUDY_CONFIG"
"""A config file (TOML/YAML) the deployments read when they are given none."""


def _deployment_run() -> bool:
    """True inside a flow run a deployment started (its parameters came through the API)."""
    from prefect.context import FlowRunContext

    ctx = FlowRunContext.get()
    return bool(ctx is not None and ctx.flow_run is not None and ctx.flow_run.deployment_id)


def service_environment() -> StudyConfig:
    """The configuration the service's environment gives (``$SKILLREACH_STUDY_CONFIG``, ``SKILLREACH_*``)."""
    path = os.environ.get(CONFIG_ENV)
    return StudyConfig.build(Path(path)) if path else StudyConfig.build()


def with_service_secrets(config: StudyConfig, *, deployment: bool) -> StudyConfig:
    """``config`` with the store and the webhooks of the service's environment. In a deployment run they
    are always the environment's (whatever a parameter said); elsewhere (a configuration built in this
    process, a subflow's) what ``config`` carries is kept and only what it lacks is filled in, so a
    study never falls back to the default SQLite store while the service runs on PostgreSQL."""
    env = service_environment()
    if deployment:
        return config.with_secrets_from(env)
    update: dict[str, Any] = {}
    if config.database_url is None and env.database_url is not None:
        update["database_url"] = env.database_url
    if not config.alert_webhooks and env.alert_webhooks:
        update["alert_webhooks"] = env.alert_webhooks
    return config.model_copy(update=update) if update else config


def example_config() -> StudyConfig:
    """The service's study when it is given none: the bundled example, on the ``fake`` runtime with the
    example's scripted agent (its compliance and task-quality checks answered), so an offline service
    shows every gate at work; ``SKILLREACH_RUNTIME`` (another runtime) is kept."""
    from skillreach.example import EXAMPLE_NIGHTLY_SCRIPT

    config = StudyConfig.build()
    if os.environ.get("SKILLREACH_RUNTIME"):
        return config
    return config.model_copy(update={"runtime": "fake",
                                     "runtime_options": {"script": str(EXAMPLE_NIGHTLY_SCRIPT)}})


@task(name="service_secrets", cache_policy=NO_CACHE)
async def service_secrets(config: StudyConfig) -> StudyConfig:
    """A study's configuration given as a parameter, with the service environment's store and webhooks
    (:func:`with_service_secrets`)."""
    return with_service_secrets(config, deployment=_deployment_run())


@task(name="resolve_config", cache_policy=NO_CACHE)
async def resolve_config(
    config: StudyConfig | None = None, config_file: str | None = None, **updates: Any
) -> StudyConfig:
    """``config`` as given, else built from ``config_file`` (or ``$SKILLREACH_STUDY_CONFIG``), else the
    bundled example; then ``updates`` applied (what the calling flow needs, e.g. compliance=True) and the
    store and webhooks taken from the service's environment (:func:`with_service_secrets`). A grown
    version of the query set waiting on the service branch is studied instead of the working tree's
    (:func:`skillreach.tasks.corpus.adopt_grown_corpus`)."""
    deployment = _deployment_run()
    if config is None:
        path = config_file or os.environ.get(CONFIG_ENV)
        config = StudyConfig.build(Path(path)) if path else example_config()
    config = with_service_secrets(config, deployment=deployment)
    from skillreach.tasks.corpus import adopt_grown_corpus

    config = config.model_copy(update={k: v for k, v in updates.items() if v is not None})
    return adopt_grown_corpus(config)
