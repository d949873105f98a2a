"""Shared fixtures. ``../shared`` (the corpora) sits beside the checkout; tests that need it skip cleanly."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """For ``pytest -n 2 --dist loadgroup``: a module's tests stay on one worker (its module-scoped
    servers start once), and the real-Prefect integration tests run one after another on one worker
    (each starts servers and worker processes of its own, and times what they do)."""
    for item in items:
        group = "integration" if item.get_closest_marker("integration") else item.nodeid.split("::")[0]
        item.add_marker(pytest.mark.xdist_group(group))

# Variables of the test infrastructure itself (where PostgreSQL and the real agent CLIs are), kept.
_KEEP = {"SKILLREACH_TEST_PG_URL", "SKILLREACH_CLAUDE_CACHE", "SKILLREACH_PI_CACHE"}
_PROVIDER = ("ANTHROPIC_", "OPENAI_", "GEMINI_", "GOOGLE_API_KEY", "GOOSE_")


@pytest.fixture(autouse=True)
def isolated_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test sees the developer's settings or keys: every ``SKILLREACH_*`` setting and every provider
    variable is removed (a test that needs one sets it with ``monkeypatch``)."""
    import os

    for name in list(os.environ):
        if (name.startswith("SKILLREACH_") and name not in _KEEP) or name.startswith(_PROVIDER):
            monkeypatch.delenv(name, raising=False)
