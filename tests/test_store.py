"""The store, run against SQLite and PostgreSQL alike.

PostgreSQL comes from ``SKILLREACH_TEST_PG_URL`` (``.ci/run`` starts a throw-away server and sets it).
Outside CI the postgres cases skip with a reason when it is unset; under ``CI=true`` they fail instead,
so CI can never pass by silently skipping them.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect, text

from skillreach.errors import ConfigError
from skillreach.models import ProbeRecord, Usage
from skillreach.store.database import HEAD, Base, Store, open_store
from skillreach.study import StudyConfig

PG_URL = os.environ.get("SKILLREACH_TEST_PG_URL")


def _reset_pg(url: str) -> None:
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text("DROP SCHEMA public CASCADE"))
        conn.execute(text("CREATE SCHEMA public"))
    engine.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    if not PG_URL:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("SKILLREACH_TEST_PG_URL is unset under CI=true: .ci/run must start PostgreSQL")
        pytest.skip("no PostgreSQL: set SKILLREACH_TEST_PG_URL (bash .ci/run starts one)")
    _reset_pg(PG_URL)
    return PG_URL


@pytest.fixture
def store(db_url: str) -> Store:
    s = Store(db_url)
    yield s
    s.close()


def _probe(qid: str, attempt: int = 1, *, invoked: tuple[str, ...] = ("pdf",), error: str | None = None,
           cost: float | None = 0.001) -> ProbeRecord:
    return ProbeRecord(query_id=qid, attempt=attempt, invoked=invoked, error=error, runtime="keyword",
                       usage=Usage(input_tokens=10, output_tokens=2), cost_usd=cost, fingerprint="fp1")


def _study(store: Store, sid: str = "st-1", **kw: object) -> None:
    store.begin_study(
        sid, out_dir="/tmp/out", runtime="keyword", model=None, catalog_id="all",
        catalog_digest="sha256:" + "a" * 64, queries_digest="sha256:" + "b" * 64, fingerprint="fp1",
        attempts=2, config=kw.pop("config", {"runtime": "keyword"}), **kw,  # type: ignore[arg-type]
    )


def test_migrations_reach_head_and_match_the_models(store: Store) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    assert store.revision() == HEAD
    names = set(inspect(store.engine).get_table_names())
    assert {"studies", "probe_records", "artifacts", "baselines", "catalog_snapshots",
            "catalog_snapshot_entries", "model_snapshots", "alerts", "alembic_version"} <= names
    with store.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert diff == [], f"models and migrations disagree: {diff}"


def test_reopening_is_idempotent_and_keeps_data(db_url: str) -> None:
    with Store(db_url) as s:
        _study(s)
    with Store(db_url) as s:
        assert s.revision() == HEAD
        assert s.get_study("st-1") is not None


def test_study_lifecycle_and_resume(store: Store) -> None:
    _study(store, flow_run_id="run-a")
    row = store.get_study("st-1")
    assert row is not None
    assert row.status == "running"
    assert row.created_at.tzinfo is not None
    store.finish_study("st-1", status="failed", error="boom")
    _study(store, flow_run_id="run-b")  # a resume reopens the same row
    row = store.get_study("st-1")
    assert row is not None
    assert row.status == "running"
    assert row.error is None
    assert row.flow_run_id == "run-b"
    store.finish_study("st-1", headline={"top1_accuracy": 0.8}, resolved_model="m-2025")
    row = store.get_study("st-1")
    assert row is not None
    assert (row.status, row.headline, row.resolved_model) == ("done", {"top1_accuracy": 0.8}, "m-2025")
    assert row.finished_at is not None
    assert [r.id for r in store.studies()] == ["st-1"]
    assert store.studies(kind="rebaseline") == []
    with pytest.raises(KeyError):
        store.finish_study("nope")


def test_probes_round_trip_and_a_pair_is_replaced_not_duplicated(store: Store) -> None:
    _study(store)
    store.add_probes("st-1", [_probe("q1"), _probe("q2", error="timeout", cost=None), _probe("q1", 2)])
    assert store.count_probes("st-1") == 3
    store.add_probes("st-1", [_probe("q2", invoked=("xlsx",))])
    got = store.probes("st-1")
    assert [(p.query_id, p.attempt) for p in got] == [("q1", 1), ("q2", 1), ("q1", 2)]
    q2 = next(p for p in got if p.query_id == "q2")
    assert q2.invoked == ("xlsx",)
    assert q2.error is None
    assert got[0] == _probe("q1")
    assert store.add_probes("st-1", []) == 0


def test_a_probe_is_stored_as_its_own_json_and_reads_back_equal(store: Store) -> None:
    """The record column holds the record's ``model_dump_json`` as it is (no second encoding); every
    field, a non-ASCII answer and a small float included, reads back equal, and the JSON columns that
    are not probe records still go through ``json``."""
    _study(store)
    text_ = "Zürich — 東京 \u2028 \"quoted\""
    rec = _probe("q1").model_copy(update={"final_text": text_, "cost_usd": 2.7e-05, "resolved_model": "m-1"})
    store.add_probes("st-1", [rec])
    assert store.probes("st-1") == [rec]
    with store.engine.connect() as conn:
        stored = conn.execute(text("SELECT CAST(record AS TEXT) FROM probe_records")).scalar_one()
        config = conn.execute(text("SELECT CAST(config AS TEXT) FROM studies")).scalar_one()
    assert stored == rec.model_dump_json()  # as pydantic wrote it, not decoded and encoded again
    assert json.loads(config) == {"runtime": "keyword"}


def test_artifacts_baselines_snapshots(store: Store) -> None:
    _study(store)
    store.save_artifact("st-1", {"digest": "sha256:1", "schema_version": 1, "metrics": {"x": 1}}, "/a1")
    store.save_artifact("st-1", {"digest": "sha256:2", "schema_version": 1}, "/a2")
    art = store.latest_artifact("st-1")
    assert art is not None
    assert art.digest == "sha256:2"
    assert art.path == "/a2"

    rec = {"baseline_id": "pdf@2026-01-01", "skill": "pdf", "model": "m1", "runtime": "keyword",
           "corpus_version": "q.json@sha256:b", "metrics": {"activation": {"value": 0.9}}}
    store.add_baseline(rec, study_id="st-1")
    store.add_baseline({**rec, "baseline_id": "pdf@2026-02-01", "model": "m2"})
    store.add_baseline({**rec, "baseline_id": "xlsx@2026-01-01", "skill": "xlsx"})
    b = store.latest_baseline("pdf")
    assert b is not None
    assert b.baseline_id == "pdf@2026-02-01"
    b1 = store.latest_baseline("pdf", model="m1")
    assert b1 is not None
    assert b1.record["metrics"]["activation"]["value"] == 0.9
    assert store.latest_baseline("docx") is None
    assert [r.baseline_id for r in store.baselines()] == ["pdf@2026-02-01", "xlsx@2026-01-01"]

    assert store.last_catalog_snapshot("skills/") is None
    store.snapshot_catalog("skills/", {"pdf": "sha256:p1", "xlsx": "sha256:x1"})
    store.snapshot_catalog("other/", {"a": "sha256:a"})
    store.snapshot_catalog("skills/", {"pdf": "sha256:p2"})
    assert store.last_catalog_snapshot("skills/") == {"pdf": "sha256:p2"}
    assert store.last_catalog_snapshot("other/") == {"a": "sha256:a"}

    assert store.last_model_snapshot("anthropic", "claude-sonnet-4-5") is None
    store.record_model_snapshot("anthropic", "claude-sonnet-4-5", "claude-sonnet-4-5-20250929")
    store.record_model_snapshot("anthropic", "claude-sonnet-4-5", "claude-sonnet-4-5-20260101")
    assert store.last_model_snapshot("anthropic", "claude-sonnet-4-5") == "claude-sonnet-4-5-20260101"
    assert store.last_model_snapshot("claude-code", "claude-sonnet-4-5") is None


def test_alerts(store: Store) -> None:
    _study(store)
    payload = {"event": "skillreach.gate.breached", "skill": "pdf", "metric": "activation",
               "delta": -0.2, "interval": [-0.3, -0.1], "baseline_id": "pdf@2026-01-01",
               "run_link": "file:///tmp/out/report.html"}
    row = store.add_alert(payload, study_id="st-1")
    store.mark_alert(row.id, delivery="posted", delivered=True)
    [got] = store.alerts(study_id="st-1")
    assert (got.skill, got.metric, got.delta, got.interval_lo, got.interval_hi) == (
        "pdf", "activation", -0.2, -0.3, -0.1)
    assert got.delivered
    assert got.delivery == "posted"
    assert got.payload == payload


def test_secrets_are_never_stored(store: Store) -> None:
    config = {"runtime": "anthropic", "runtime_options": {"api_key": "sk-ant-SECRET", "base_url":
              "https://user:hunter2@proxy.example/v1"}, "webhook": "https://hooks.slack.com/services/T0/B0/XYZ"}
    _study(store, config=config)
    row = store.get_study("st-1")
    assert row is not None
    dumped = repr(row.config)
    for secret in ("sk-ant-SECRET", "hunter2", "T0/B0/XYZ"):
        assert secret not in dumped
    assert row.config["runtime_options"]["base_url"].startswith("https://user:***@proxy.example")
    with pytest.raises(ValueError, match="looks like a secret"):
        StudyConfig(runtime_options={"api_key": "sk-x"})


def test_bad_urls_give_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a database URL"):
        Store("nonsense")
    with pytest.raises(ConfigError) as err:
        Store("postgresql+psycopg://u:topsecret@127.0.0.1:1/nodb?connect_timeout=2")
    assert "topsecret" not in str(err.value)
    assert "cannot open the database" in str(err.value)
    assert "\n" not in str(err.value)


def test_sqlite_is_wal_with_a_busy_timeout(tmp_path: Path) -> None:
    with Store(f"sqlite:///{tmp_path / 'x.db'}") as s, s.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 30000


def test_open_store_defaults_to_sqlite_under_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SKILLREACH_DATABASE_URL", raising=False)
    monkeypatch.setenv("SKILLREACH_HOME", str(tmp_path / "home"))
    with open_store() as s:
        assert s.backend == "sqlite"
    assert (tmp_path / "home" / "skillreach.db").is_file()


def _writer(url: str, worker: int, n: int) -> None:
    with Store(url) as s:  # every process opens (and may migrate) at the same moment
        sid = f"st-w{worker}"
        s.begin_study(sid, out_dir="/o", runtime="fake", model=None, catalog_id="c", catalog_digest="d",
                      queries_digest="q", fingerprint="f", attempts=1, config={})
        for i in range(n):
            s.add_probes(sid, [_probe(f"q{i}")])
        s.finish_study(sid)


def test_several_processes_write_at_once(db_url: str) -> None:
    ctx = mp.get_context("fork")  # the store module is already imported
    procs = [ctx.Process(target=_writer, args=(db_url, w, 25)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    with Store(db_url) as s:
        assert sorted(r.id for r in s.studies()) == [f"st-w{w}" for w in range(4)]
        assert all(s.count_probes(f"st-w{w}") == 25 for w in range(4))
        assert all(r.status == "done" for r in s.studies())


def test_reopening_a_current_store_does_not_import_alembic(tmp_path: Path) -> None:
    import subprocess
    import sys

    url = f"sqlite:///{tmp_path / 'a.db'}"
    Store(url).close()
    code = ("import sys; from skillreach.store.database import Store; Store(sys.argv[1]).close(); "
            "print('alembic' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, url], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_alert_outbox_hands_each_try_to_one_claimer_and_opens_a_verdict_once(db_url: str) -> None:
    """Four connections pass over the outbox at once (SQLite and PostgreSQL): every due send is claimed
    by exactly one, and a verdict found by all four at once is opened by one (issue 39)."""
    import threading

    from skillreach.store import claim_due, open_once, queue_alert, record_try

    with Store(db_url) as s:
        for i in range(15):
            queue_alert(s, {"event": "skillreach.gate.breached", "skill": f"s{i}", "metric": "activation"},
                        key=f"k{i}", channels=["a#1", "b#2"])
    claimed: list[int] = []
    opened: list[bool] = []
    lock = threading.Lock()

    def pass_over() -> None:
        with Store(db_url) as s:
            mine = claim_due(s, claim_for=timedelta(minutes=1))
            first = open_once(s, "delivery:a#1", severity=1)
        with lock:
            claimed.extend(c.send_id for c in mine)
            opened.append(first)

    threads = [threading.Thread(target=pass_over) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(claimed) == len(set(claimed)) == 30
    assert sorted(opened) == [False, False, False, True]
    with Store(db_url) as s:
        [claim] = [c for c in claim_due(s, claim_for=timedelta(minutes=1),
                                       now=_now_plus(timedelta(minutes=2))) if c.channel == "a#1"][:1]
        assert record_try(s, claim, ok=True) == ("delivered", "pending")  # b#2 still to go
        [alert] = [a for a in s.alerts() if a.id == claim.alert_id]
        assert alert.delivery == "pending"


def _now_plus(delta: timedelta) -> datetime:
    return datetime.now(UTC) + delta
