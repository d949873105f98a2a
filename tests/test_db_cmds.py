"""``skillreach db upgrade`` and ``db copy SRC DST`` (SQLite → PostgreSQL), through the CLI. The
PostgreSQL case uses ``SKILLREACH_TEST_PG_URL`` (skipped without it, failed under ``CI=true``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from skillreach.cli import main
from skillreach.store import Store
from skillreach.store.database import HEAD
from tests.helpers.world import cfg, run, store_of

PG_URL = os.environ.get("SKILLREACH_TEST_PG_URL")


def _reset_pg(url: str) -> None:
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text("DROP SCHEMA public CASCADE"))
        conn.execute(text("CREATE SCHEMA public"))
    engine.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def dst_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'copy.db'}"
    if not PG_URL:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("SKILLREACH_TEST_PG_URL is unset under CI=true: .ci/run must start PostgreSQL")
        pytest.skip("no PostgreSQL: set SKILLREACH_TEST_PG_URL (bash .ci/run starts one)")
    _reset_pg(PG_URL)
    return PG_URL


def _counts(store: Store) -> tuple[int, int, int, int]:
    studies = store.studies()
    probes = sum(store.count_probes(s.id) for s in studies)
    return len(studies), probes, len(store.alerts()), len(store.baselines())


def test_db_copy_moves_every_row_and_refuses_a_store_that_is_not_empty(
    world: dict[str, Path], dst_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from skillreach.flows.service import rebaseline_all
    from skillreach.flows.study import study

    run(rebaseline_all, cfg(world, "base"))
    run(study, cfg(world, "bad", runtime_script="bad"))  # an alert too
    src_url = f"sqlite:///{world['home'] / 'skillreach.db'}"
    with store_of(world) as src:
        before = _counts(src)
    assert before[0] >= 2
    assert before[2] >= 1

    assert main(["db", "copy", src_url, dst_url]) == 0
    assert "copied" in capsys.readouterr().out
    with Store(dst_url) as dst:
        assert _counts(dst) == before
        assert dst.revision() == HEAD
        # the ids go on after the copied ones
        dst.add_alert({"event": "skillreach.gate.breached", "skill": "x", "metric": "activation"})
    assert main(["db", "copy", src_url, dst_url]) == 2  # not empty: one line, exit 2
    err = capsys.readouterr().err
    assert "not empty" in err
    assert len(err.strip().splitlines()) == 1


def test_db_upgrade_says_what_it_did(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'new.db'}"
    assert main(["db", "upgrade", url]) == 0
    assert f"schema (empty) → {HEAD}" in capsys.readouterr().out
    assert main(["db", "upgrade", url]) == 0
    assert f"schema {HEAD}, up to date" in capsys.readouterr().out
