"""One store, on purpose: a study given its configuration as a flow parameter (JSON through the API,
secrets excluded) takes the store and the webhooks from the service's environment; a parameter never
chooses them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import SecretStr

from skillreach.store import Store
from skillreach.study import StudyConfig
from tests.helpers.world import cfg, run

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _as_a_deployment_run_gets_it(config: StudyConfig) -> StudyConfig:
    """What a deployment run's ``config`` parameter becomes: the dump (no secrets) validated again."""
    return StudyConfig.model_validate(json.loads(config.model_dump_json()))


def test_a_study_given_a_config_parameter_writes_to_the_services_store(
    world: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from skillreach.flows.study import study

    service_db = world["root"] / "service.db"
    monkeypatch.setenv("SKILLREACH_DATABASE_URL", f"sqlite:///{service_db}")
    param = _as_a_deployment_run_gets_it(cfg(world, "run"))
    assert param.database_url is None  # the parameter carries no store
    result = run(study, param)
    assert Store(f"sqlite:///{service_db}").get_study(result.study_id) is not None
    assert not (world["home"] / "skillreach.db").exists()  # never the default SQLite store


def test_in_a_deployment_run_a_parameter_never_chooses_the_store(monkeypatch: pytest.MonkeyPatch) -> None:
    from skillreach.tasks.config import with_service_secrets

    monkeypatch.setenv("SKILLREACH_DATABASE_URL", "postgresql+psycopg://svc@db/skillreach")
    monkeypatch.setenv("SKILLREACH_ALERT_WEBHOOKS", '["https://hooks.example.com/T/1"]')
    given = StudyConfig.model_validate({"database_url": "sqlite:///elsewhere.db", "runtime": "fake"})
    resolved = with_service_secrets(given, deployment=True)
    assert resolved.database_url is not None
    assert resolved.database_url.get_secret_value() == "postgresql+psycopg://svc@db/skillreach"
    assert resolved.webhook_urls() == ["https://hooks.example.com/T/1"]
    assert resolved.runtime == "fake"  # the study is the parameter's
    # outside a deployment run a configuration built in this process keeps its own store, and one
    # without a store gets the environment's instead of the default SQLite file
    own = given.model_copy(update={"database_url": SecretStr("sqlite:///mine.db")})
    assert with_service_secrets(own, deployment=False).database_url == own.database_url
    bare = _as_a_deployment_run_gets_it(own)
    filled = with_service_secrets(bare, deployment=False).database_url
    assert filled is not None
    assert filled.get_secret_value().startswith("postgresql")


def test_a_config_file_parameter_never_chooses_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    from prefect.logging import disable_run_logger

    from skillreach.tasks import config as config_tasks

    study_file = tmp_path / "study.toml"
    study_file.write_text('runtime = "fake"\ndatabase_url = "sqlite:///from-the-file.db"\n', encoding="utf-8")
    monkeypatch.setenv("SKILLREACH_DATABASE_URL", "sqlite:///service.db")
    monkeypatch.setattr(config_tasks, "_deployment_run", lambda: True)
    with disable_run_logger():
        resolved = asyncio.run(config_tasks.resolve_config.fn(None, str(study_file)))
    assert resolved.runtime == "fake"
    assert resolved.database_url is not None
    assert resolved.database_url.get_secret_value() == "sqlite:///service.db"
