"""Never two at once: a study holds a lock on itself for its whole run (an advisory lock on PostgreSQL, a
file lock beside the probe log otherwise), so two ``skillreach run`` processes of the same study pay for
each (query, attempt) once; the second exits 2 with one line naming the holder. A study given no
``--out`` writes under a folder derived from its fingerprint, so running it again resumes.

PostgreSQL comes from ``SKILLREACH_TEST_PG_URL`` (skipped without it). The two-process tests take
~20–40 s each (two CLI processes and a slow Messages-API stand-in on 127.0.0.1).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from skillreach.errors import StudyLocked
from skillreach.settings import Settings
from skillreach.store.database import LOCK_FILE, StudyLock, lock_holder, lock_study
from tests.fakes.messages_api import MessagesAPI, query_text, turn_of
from tests.helpers import hang
from tests.helpers.live import responder

PG_URL = os.environ.get("SKILLREACH_TEST_PG_URL")
SKILLREACH = Path(sys.executable).with_name("skillreach")


def _reset_pg(url: str) -> None:
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text("DROP SCHEMA public CASCADE"))
        conn.execute(text("CREATE SCHEMA public"))
    engine.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest) -> str | None:
    """``None`` for the SQLite store under SKILLREACH_HOME, else the PostgreSQL URL."""
    if request.param == "sqlite":
        return None
    if not PG_URL:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("SKILLREACH_TEST_PG_URL is unset under CI=true: .ci/run must start PostgreSQL")
        pytest.skip("no PostgreSQL: set SKILLREACH_TEST_PG_URL (bash .ci/run starts one)")
    _reset_pg(PG_URL)
    return PG_URL


def test_the_lock_names_its_holder_and_is_free_again_after_release(
    tmp_path: Path, database_url: str | None
) -> None:
    settings = Settings(home=tmp_path / "home", database_url=database_url)
    first = lock_study(settings, "st-one", tmp_path / "out", holder=lock_holder("1234-run"))
    assert first.held
    if database_url is None:
        assert (tmp_path / "out" / LOCK_FILE).read_text().strip() == "flow run 1234-run"
    with pytest.raises(StudyLocked) as refused:
        lock_study(settings, "st-one", tmp_path / "out", holder=lock_holder(None))
    assert str(refused.value) == (
        f"study st-one ({tmp_path / 'out'}) is already running in flow run 1234-run; "
        "wait for it to finish (a re-run then resumes) or stop it"
    )
    other = lock_study(settings, "st-two", tmp_path / "other", holder="x")  # another study: free
    other.release()
    started = time.monotonic()
    with pytest.raises(StudyLocked):  # a bounded wait, then the same refusal
        StudyLock("st-one", url=database_url, folder=tmp_path / "out", holder="y").acquire(wait_s=1.0)
    assert 0.9 <= time.monotonic() - started < 5
    first.release()
    first.release()  # idempotent
    with lock_study(settings, "st-one", tmp_path / "out", holder="z") as again:
        assert again.held
    assert not again.held


def _env(world: dict[str, Path], database_url: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SKILLREACH_", "ANTHROPIC_", "PREFECT_API_URL"))}
    env.update(SKILLREACH_HOME=str(world["home"]), ANTHROPIC_API_KEY="sk-test-not-a-secret",
               PREFECT_SERVER_ANALYTICS_ENABLED="false", COLUMNS="200")
    if database_url:
        env["SKILLREACH_DATABASE_URL"] = database_url
    return env


def _study_file(world: dict[str, Path], api: MessagesAPI) -> Path:
    path = world["root"] / "study.toml"
    path.write_text(
        'skills = ["skills"]\nqueries = "queries.json"\nruntime = "anthropic"\nmodel = "claude-sonnet-4-6"\n'
        f'attempts = 1\nconcurrency = 2\n[runtime_options]\nbase_url = "{api.base_url}"\n',
        encoding="utf-8",
    )
    return path


def _paid_pairs(api: MessagesAPI, texts: set[str]) -> list[str]:
    """The first request of every probe conversation of the query set (canaries excluded)."""
    return [query_text(body) for body in api.requests if turn_of(body) == 0 and query_text(body) in texts]


def test_two_run_processes_of_one_study_pay_for_each_probe_once(
    world: dict[str, Path], database_url: str | None
) -> None:
    queries = json.loads((world["queries"]).read_text())
    texts = {q["text"] for q in (queries["queries"] if isinstance(queries, dict) else queries)}
    with MessagesAPI(responder(), latency=0.15) as api:
        argv = [str(SKILLREACH), "run", "--config", str(_study_file(world, api))]
        env = _env(world, database_url)
        procs = [subprocess.Popen(argv, cwd=world["root"], env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(2)]
        outs = [hang.communicate(p, 240) for p in procs]
        results = [(p.returncode, *out) for p, out in zip(procs, outs, strict=True)]
        codes = sorted(code for code, _, _ in results)
        assert codes == [0, 2], results
        refused = next(err for code, _, err in results if code == 2).strip()
        assert len(refused.splitlines()) == 1, refused
        assert refused.startswith("skillreach: error: study st-")
        assert "is already running in pid " in refused
        assert "wait for it to finish" in refused
        paid = _paid_pairs(api, texts)
        assert sorted(paid) == sorted(texts)  # each (query, attempt) paid once
        # the same study again (no --out: the folder of its fingerprint) resumes and pays for nothing
        again = hang.finish(argv, cwd=world["root"], env=env, limit_s=240)
        assert again.returncode == 0, again.stderr
        assert "(0 probed, 13 resumed" in " ".join(again.stdout.split()), again.stdout
        assert len(_paid_pairs(api, texts)) == len(paid)
    folders = [p for p in (world["root"] / "runs").iterdir() if p.is_dir()]
    assert [f.name.rsplit("-", 1)[0] for f in folders] == ["study-anthropic-claude-sonnet-4-6"]
    assert (folders[0] / "skillreach.log").read_text(encoding="utf-8")  # the CLI's log found its folder
