"""Shared fixtures. ``../shared`` (the corpora) sits beside the checkout; tests that need it skip cleanly."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
_BESIDE = (REPO.parent / "shared", REPO.parent.parent / "shared")
SHARED = Path(os.environ.get("SKILLREACH_TEST_SHARED")
               or next((p for p in _BESIDE if p.is_dir()), _BESIDE[0]))
"""``../shared`` beside the checkout (or beside the folder of git worktrees); ``SKILLREACH_TEST_SHARED``
names it for a checkout elsewhere."""
CORPORA = SHARED / "corpora"
EXAMPLE = REPO / "skillreach" / "example"


@pytest.fixture
def corpora() -> Path:
    if not CORPORA.is_dir():
        pytest.skip("../shared/corpora is not present beside the checkout")
    return CORPORA


pytest_plugins = ["tests.helpers.world"]  # the `world` fixture of the flow tests


def _own_worker_resources(worker: str) -> None:
    """Under ``pytest -n`` (pytest-xdist) each worker process gets a Prefect home and a PostgreSQL
    database of its own: two workers sharing the ephemeral server's SQLite file, or one worker's store
    tests emptying tables another's scale-out test writes, would fail for reasons no user meets."""
    home = os.environ.get("PREFECT_HOME") or str(Path.home() / ".prefect")
    os.environ["PREFECT_HOME"] = str(Path(home) / f"xdist-{worker}")
    url = os.environ.get("SKILLREACH_TEST_PG_URL")
    if not url:
        return
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    base = make_url(url)
    name = f"{base.database}_{worker}"
    from sqlalchemy.exc import OperationalError

    engine = create_engine(base.set(database="postgres"), isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            known = conn.execute(text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": name}).first()
            if known is None:
                conn.execute(text(f'CREATE DATABASE "{name}"'))
    except OperationalError:
        return  # the server does not answer: the postgres tests say so themselves
    finally:
        engine.dispose()
    os.environ["SKILLREACH_TEST_PG_URL"] = base.set(database=name).render_as_string(hide_password=False)


if os.environ.get("PYTEST_XDIST_WORKER"):  # before any test module imports Prefect
    _own_worker_resources(os.environ["PYTEST_XDIST_WORKER"])


SERIAL_MODULES = frozenset({
    "tests/test_bad_input_3_serve.py",
    "tests/test_crash_resume.py",
    "tests/test_flows_integration.py",
    "tests/test_live_service.py",
    "tests/test_operator_alerts.py",
    "tests/test_operator_service.py",
    "tests/test_operator_week.py",
    "tests/test_prefect_adapter.py",
    "tests/test_realserver.py",
    "tests/test_scale_out.py",
    "tests/test_team_kit.py",
    "tests/test_unattended_integration.py",
})
"""The modules of the real-Prefect integration tests, and the real model server's (``llama-server`` takes
both cores): under ``pytest -n`` they run one after another in two units of work, one a worker (each
starts servers and worker processes of its own, and times what they do)."""


SERIAL_UNIT_B = frozenset({
    "tests/test_bad_input_3_serve.py",
    "tests/test_crash_resume.py",
    "tests/test_operator_service.py",
    "tests/test_realserver.py",
    "tests/test_scale_out.py",
    "tests/test_team_kit.py",
})
"""The second unit of work of the serial modules (the rest are the first): under ``pytest -n`` the two
units run side by side from the start, each on a worker of its own, each module of a unit after the other —
one Prefect-serving module per worker at a time. Balanced by a quiet run's durations (--durations=0,
2026-12-05: 1,046 s and 1,062 s of the 2,107 s the serial modules took as one unit, which ran alone for
the suite's last 15 minutes with the cores half idle)."""


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``pytest -n`` (pytest-xdist): a module's tests stay on one worker (its module-scoped servers start
    once) and the modules of SERIAL_MODULES make two units of work (SERIAL_UNIT_B and the rest), each in
    collection order. (xdist's own
    ``--dist loadgroup`` renames node ids, which pytest 9 no longer reads.)"""
    from xdist.scheduler import LoadScopeScheduling

    class ByModule(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            if module in SERIAL_MODULES:
                return "integration-b" if module in SERIAL_UNIT_B else "integration-a"
            return module

    config.option.loadscopereorder = False
    return ByModule(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """An integration test outside SERIAL_MODULES would run beside the others under ``pytest -n``. The
    serial modules are collected first (in their order), so their two units of work — the longest of the
    suite — are the first each worker takes, and the other modules fill in around them."""
    items.sort(key=lambda i: i.nodeid.split("::", 1)[0] not in SERIAL_MODULES)  # stable: order kept
    stray = sorted({i.nodeid.split("::", 1)[0] for i in items if i.get_closest_marker("integration")}
                   - SERIAL_MODULES)
    if stray:
        raise pytest.UsageError(f"integration tests in {', '.join(stray)}: add the module to "
                                "SERIAL_MODULES in tests/conftest.py")

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    """``SKILLREACH_TEST_CPU_LOG=FILE``: one JSON line per test with its wall time and CPU time — this
    process's and its reaped descendants' (servers, CLIs, worker processes and the flow runs they reaped),
    a module's fixtures counted in its first and last test — for ``bench/suite_cpu.py``, which says where
    the suite's CPU goes (the suite is CPU-bound on two cores)."""
    import json
    import resource

    path = os.environ.get("SKILLREACH_TEST_CPU_LOG")
    if not path:
        yield
        return
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    start, own = time.monotonic(), time.process_time()
    yield
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    row = {"test": item.nodeid, "worker": os.environ.get("PYTEST_XDIST_WORKER", "-"),
           "wall_s": round(time.monotonic() - start, 3), "cpu_s": round(time.process_time() - own, 3),
           "children_cpu_s": round(after.ru_utime + after.ru_stime - kids.ru_utime - kids.ru_stime, 3)}
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps(row) + "\n")


# Variables of the test infrastructure itself (where PostgreSQL and the real agent CLIs are), kept.
_KEEP = {"SKILLREACH_TEST_PG_URL", "SKILLREACH_CLAUDE_CACHE", "SKILLREACH_PI_CACHE", "SKILLREACH_LLAMA_CACHE",
         "SKILLREACH_CODEX_CACHE", "SKILLREACH_REAL_CODEX"}
_PROVIDER = ("ANTHROPIC_", "OPENAI_", "GEMINI_", "GOOGLE_API_KEY", "GOOSE_")


@pytest.fixture(autouse=True)
def isolated_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test sees the developer's settings or keys: every ``SKILLREACH_*`` setting and every provider
    variable is removed (a test that needs one sets it with ``monkeypatch``)."""
    import os

    for name in list(os.environ):
        if (name.startswith("SKILLREACH_") and name not in _KEEP) or name.startswith(_PROVIDER):
            monkeypatch.delenv(name, raising=False)
