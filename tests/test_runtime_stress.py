"""Every runtime under load: 32 probes at concurrency 8 against its stand-in, 0 errors, and the state a
runtime shares between probes (per-catalog folders, residency checks, request prefixes) built once.

Issue 13: at ``--concurrency 4`` the claude-code runtime's per-catalog template folder was built by every
concurrent probe at once and probes failed with ``FileExistsError``; no test ran a CLI runtime above
concurrency 1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from skillreach.models import Catalog, ProbeRecord, Query, QueryKind
from skillreach.probing import ListSink, run_probes
from skillreach.settings import Settings
from skillreach.study.contract import ProbeOptions, Runtime
from tests.fakes.kit import folder_catalog

FAKES = Path(__file__).parent / "fakes"
PROBES = 32
CONCURRENCY = 8
SKILLS = tuple((f"skill-{i:02d}", f"Handle chores of kind {i:02d} for the team.") for i in range(26))


def stress_queries() -> list[Query]:
    """32 queries, each naming one of the 26 skills (so every probe activates one)."""
    return [
        Query(
            id=f"q{i:02d}",
            text=f"request {i:02d}: use {SKILLS[i % len(SKILLS)][0]}",
            expected_skill=SKILLS[i % len(SKILLS)][0],
            kind=QueryKind.implicit,
        )
        for i in range(PROBES)
    ]


@pytest.fixture
def catalog(tmp_path: Path) -> Catalog:
    return folder_catalog(tmp_path, SKILLS, with_path=True)


async def stress(runtime: Runtime, catalog: Catalog, **options: Any) -> list[ProbeRecord]:
    sink = ListSink()
    try:
        await run_probes(
            runtime,
            catalog,
            [(q, 1) for q in stress_queries()],
            options=ProbeOptions(**{"timeout_s": 60.0, **options}),
            sink=sink,
            concurrency=CONCURRENCY,
            fingerprint="stress",
        )
    finally:
        await runtime.aclose()
    errors = [r.error for r in sink.records if r.error]
    assert errors == [], f"{len(errors)} of {len(sink.records)} probes errored; first: {errors[0]}"
    assert len(sink.records) == PROBES
    return sink.records


def plan_all(prefix_key: str = "use ") -> dict[str, list[str]]:
    """Each stand-in's plan: a query naming ``skill-NN`` loads that skill."""
    return {f"{prefix_key}{name}": [name] for name, _ in SKILLS}


# ------------------------------------------------------------------------------------ claude-code


async def test_claude_code_under_load(tmp_path: Path, catalog: Catalog) -> None:
    import json

    from skillreach.runtimes.claude_code import ClaudeCodeRuntime

    script = tmp_path / "script.json"
    script.write_text(json.dumps({k: {"steps": v} for k, v in plan_all().items()}))
    rt = ClaudeCodeRuntime(
        claude_path=str(FAKES / "claude_stub" / "claude"),
        settings=Settings(),
        extra_env={"CLAUDE_STUB_SCRIPT": str(script), "ANTHROPIC_API_KEY": "sk-test"},
        concurrency=CONCURRENCY,
    )
    root = rt._root
    records = await stress(rt, catalog)
    assert all(r.invoked == (_expected(r),) for r in records)
    assert rt.template_builds == 1
    assert not root.exists()


def _expected(record: ProbeRecord) -> str:
    return SKILLS[int(record.query_id[1:]) % len(SKILLS)][0]
