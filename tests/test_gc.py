"""``skillreach gc --keep 30d``: old run folders and their store rows go; baselines, their studies and
folders, and recent studies stay (issue 29, problem 10)."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import update

from skillreach.cli import main
from skillreach.store import StudyRow
from tests.helpers.world import cfg, run, store_of


def _age(world: dict[str, Path], study_id: str, folder: Path, days: int) -> None:
    when = datetime.now(UTC) - timedelta(days=days)
    with store_of(world) as store, store.writing() as s:
        s.execute(update(StudyRow).where(StudyRow.id == study_id).values(finished_at=when, created_at=when))
    stamp = time.time() - days * 86400
    for root, _dirs, files in os.walk(folder):
        for name in files:
            os.utime(Path(root) / name, (stamp, stamp))
    os.utime(folder, (stamp, stamp))


def test_gc_deletes_old_runs_and_rows_and_never_a_baseline(
    world: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from skillreach.flows.service import rebaseline_all
    from skillreach.flows.study import study

    monkeypatch.setenv("SKILLREACH_HOME", str(world["home"]))
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    base = run(rebaseline_all, cfg(world, "runs/base"))
    old = run(study, cfg(world, "runs/old", runtime_script="bad"))  # with an alert
    new = run(study, cfg(world, "runs/new"))
    _age(world, base["study_id"], world["root"] / "runs/base", 90)
    _age(world, old.study_id, old.out, 40)
    with store_of(world) as store:
        baselines = len(store.baselines())
        assert store.count_probes(old.study_id) > 0

    assert main(["gc", "--keep", "30d", "--dry-run"]) == 0
    assert "would delete 1 run folder(s)" in capsys.readouterr().out
    assert old.out.is_dir()

    assert main(["gc", "--keep", "30d"]) == 0
    out = capsys.readouterr().out
    assert "deleted 1 run folder(s)" in out
    assert "store: deleted 1 studies" in out
    assert not old.out.exists()
    assert (world["root"] / "runs/base").is_dir()  # a baseline's study: kept, however old
    assert new.out.is_dir()
    with store_of(world) as store:
        assert store.get_study(old.study_id) is None
        assert store.count_probes(old.study_id) == 0
        assert store.get_study(base["study_id"]) is not None
        assert store.get_study(new.study_id) is not None
        assert len(store.baselines()) == baselines
        assert all(a.study_id != old.study_id for a in store.alerts())
    assert main(["gc", "--keep", "soon"]) == 2
