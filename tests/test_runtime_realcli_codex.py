"""The codex runtime with the REAL Codex CLI (``@openai/codex`` 0.171.0) against the local Responses API
stand-in: through ``skillreach run --runtime codex`` at concurrency 4, killed half-way and resumed; one
probe's signals and early exit; and Codex's capped skills listing as :mod:`skillreach.skills.agent_listing`
predicts it, on the real corpora.

Skipped, never passed, when the CLI is not installed: ``SKILLREACH_REAL_CODEX`` or the cache folder that
``.ci/run`` installs into (``~/.cache/skillreach/codex``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from skillreach.models import Catalog
from skillreach.settings import Settings
from skillreach.skills.agent_listing import codex_listing, codex_listing_text
from tests.fakes.kit import folder_catalog, probe, query
from tests.fakes.responses_api import (
    ResponsesAPI,
    ResponsesReply,
    ResponsesScript,
    function_call,
    listing_of,
    message,
    query_of,
    skill_read,
    turn_of,
)
from tests.helpers.clis import Orphans, real_codex
from tests.helpers.codex_study import killed_half_way_and_resumed

pytestmark = pytest.mark.realcli


@pytest.fixture
def codex() -> str:
    path = real_codex()
    if path is None:
        pytest.skip("the real Codex CLI is not installed (set SKILLREACH_REAL_CODEX or run .ci/run)")
    return path


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state not in ("Z", "X")


# ------------------------------------------------------------------------------------ one probe


async def test_real_codex_reads_a_skill_otel_signal_and_early_exit(codex: str, tmp_path: Path) -> None:
    from skillreach.runtimes.codex import CodexRuntime

    catalog = folder_catalog(tmp_path)
    script = ResponsesScript({"rotate the keys": ["pdf", "secrets", "rollback"]})
    with ResponsesAPI(script) as api:
        rt = CodexRuntime(
            "fake-model", codex_path=codex, settings=Settings(), base_url=api.base_url, api_key="sk-test"
        )
        out, _ = await probe(rt, catalog, query("please rotate the keys now", "secrets"), timeout_s=90)
        await rt.aclose()
    assert out.error is None, out.error
    assert out.invoked == ["pdf", "secrets"]
    assert out.early_exit
    # Codex's own record counts the reads (it arrives before the command's event; on a loaded machine
    # the command may win a race, and the read still counts once)
    assert rt.signals["otel"] >= 1
    assert sum(rt.signals.values()) == 2
    assert len(api.requests) == 2  # killed before the request after the target's read
    assert not any(alive(pid) for pid in rt.pids)
    assert api.headers[0]["authorization"] == "Bearer sk-test"
    first = api.requests[0]
    listing = listing_of(first)
    assert listing is not None
    for skill in catalog.skills:  # the catalog and nothing else
        assert f"- {skill.name}: {skill.description} (file: r0/{skill.name}/SKILL.md)" in listing
    assert listing.count("(file: ") == 3
    assert "PDF BODY" not in json.dumps(first)
    assert out.usage.input_tokens > 0
    # turns come from Codex's OTel ``response.completed`` records, which Codex exports in batches: when
    # the probe is killed at the target's read, the second one may not have left yet (seen once in a
    # fresh-clone run), so an early exit can count fewer turns than the requests the server saw, never more
    assert 1 <= out.turns <= len(api.requests)


async def test_real_codex_without_otel_falls_back_to_the_command(codex: str, tmp_path: Path) -> None:
    from skillreach.runtimes.codex import CodexRuntime

    catalog = folder_catalog(tmp_path)
    with ResponsesAPI(ResponsesScript({"undo": ["rollback"], "weather": []})) as api:
        rt = CodexRuntime(
            "fake-model",
            codex_path=codex,
            settings=Settings(),
            base_url=api.base_url,
            api_key="sk-test",
            otel=False,
        )
        out, _ = await probe(rt, catalog, query("undo the deploy", "rollback"), timeout_s=90)
        none, _ = await probe(rt, catalog, query("what is the weather", None), timeout_s=90)
        await rt.aclose()
    assert out.error is None, out.error
    assert none.error is None, none.error
    assert out.invoked == ["rollback"]
    assert out.early_exit
    assert none.invoked == []
    assert none.final_text == "Done."
    assert rt.signals == {"command": 1}


# ------------------------------------------------------------------------ skillreach run, resumed


def test_real_codex_through_skillreach_run_killed_half_way_and_resumed(codex: str, tmp_path: Path) -> None:
    print("\n" + killed_half_way_and_resumed(codex, tmp_path, "codex-cli 0.171.0"))


# ------------------------------------------------------------------------------- the listing


async def test_codex_listing_of_the_real_corpora_is_what_codex_sends(
    codex: str, corpora: Path, tmp_path: Path
) -> None:
    """240-odd real skills, a 100,000-token window: 2,000 tokens, so descriptions go and skills are
    dropped; a 272,000-token window (Codex's own for an unknown model): every description shortened."""
    from skillreach.runtimes.codex import CodexRuntime
    from skillreach.skills.discovery import discover

    skills = discover([corpora]).skills
    catalog = Catalog(id="corpora", skills=tuple(skills))
    for window, dropped in ((100_000, True), (None, False)):
        with ResponsesAPI(ResponsesScript()) as api:
            rt = CodexRuntime(
                "fake-model",
                codex_path=codex,
                settings=Settings(),
                base_url=api.base_url,
                api_key="sk-test",
                context_window=window,
                keep_workdirs=True,
            )
            out, _ = await probe(rt, catalog, query("hello", None), timeout_s=120)
            work = next(rt._root.glob("probe-*")) / "work"
            await rt.aclose()
        assert out.error is None, out.error
        sent = listing_of(api.requests[0])
        predicted = codex_listing(skills, context_window=rt.effective_context_window)
        assert sent == codex_listing_text(predicted, str(work / ".agents" / "skills"))
        assert bool(predicted.dropped) is dropped
        assert len(predicted.shortened) > 0 if not dropped else len(predicted.dropped) > 50
        assert rt.listing_warning(catalog) is not None


async def test_real_codex_compliance_records_commands_and_the_sandbox_keeps_them_read_only(
    codex: str, tmp_path: Path
) -> None:
    from skillreach.runtimes.codex import CodexRuntime

    catalog = folder_catalog(tmp_path)
    script = ResponsesScript(
        {
            "fill the form": [
                "pdf",
                {"tool": "exec_command", "arguments": {"cmd": "touch made-by-agent"}},
                {"text": "Filled."},
            ]
        }
    )
    with ResponsesAPI(script) as api:
        rt = CodexRuntime(
            "fake-model",
            codex_path=codex,
            settings=Settings(),
            base_url=api.base_url,
            api_key="sk-test",
            keep_workdirs=True,
        )
        out, _ = await probe(
            rt, catalog, query("fill the form please", "pdf"), compliance=True, early_exit=False, timeout_s=90
        )
        made = list(rt._root.glob("probe-*/work/made-by-agent"))
        await rt.aclose()
    assert out.error is None, out.error
    assert out.invoked == ["pdf"]
    assert [c.tool for c in out.tool_calls] == ["exec_command"]
    assert out.tool_calls[0].input == {"cmd": "touch made-by-agent"}  # refused: --json never showed it
    assert out.final_text == "Filled."
    assert made == []  # the read-only sandbox refused the write
    assert len(api.requests) == 3


async def test_real_codex_past_its_timeout_is_ended_with_its_group(codex: str, tmp_path: Path) -> None:
    from skillreach.runtimes.codex import CodexRuntime

    catalog = folder_catalog(tmp_path)
    with ResponsesAPI(ResponsesScript({"slow": ["pdf"]}), delay_s=8.0) as api:
        rt = CodexRuntime(
            "fake-model", codex_path=codex, settings=Settings(), base_url=api.base_url, api_key="sk-test"
        )
        t0 = time.monotonic()
        out, _ = await probe(rt, catalog, query("a slow one", "pdf"), timeout_s=4)
        took = time.monotonic() - t0
        await rt.aclose()
    assert out.error == "codex did not finish within 4s"
    assert out.invoked == []
    assert took < 7
    assert not any(alive(pid) for pid in rt.pids)


# ------------------------------------------------------------------------- nothing left behind


async def test_fifty_early_stops_of_codex_in_a_row_leave_no_process(codex: str, tmp_path: Path) -> None:
    """Each response runs a long command in Codex's sandbox (``codex-linux-sandbox`` and ``bwrap``, in a
    session of their own) beside the target's read: the probe stops at the read while they run, and none
    of them may outlive it (they lived 18-20 minutes when only the process group was ended)."""
    from skillreach.models import Query, QueryKind
    from skillreach.runtimes.codex import CodexRuntime
    from skillreach.study.contract import ProbeOptions
    from skillreach.study.runner import ListSink, run_probes

    catalog = folder_catalog(tmp_path)
    names = sorted(catalog.names)

    def responder(body: dict[str, object]) -> ResponsesReply:
        if turn_of(body) == 0:
            target = names[int(query_of(body).split()[-1]) % len(names)]
            return ResponsesReply(
                [function_call("exec_command", {"cmd": "sleep 60"}), skill_read(body, target)]
            )
        return ResponsesReply([message("Done.")])

    queries = [
        Query(
            id=f"q{i:02d}",
            text=f"stop number {i}",
            expected_skill=names[i % len(names)],
            kind=QueryKind.implicit,
        )
        for i in range(50)
    ]
    with Orphans() as orphans:
        with ResponsesAPI(responder) as api:
            rt = CodexRuntime(
                "fake-model", codex_path=codex, settings=Settings(), base_url=api.base_url, api_key="sk-test"
            )
            sink = ListSink()
            t0 = time.monotonic()
            try:
                await run_probes(
                    rt, catalog, [(q, 1) for q in queries], options=ProbeOptions(timeout_s=120.0), sink=sink,
                    concurrency=4, fingerprint="fifty-stops",
                )  # fmt: skip
            finally:
                await rt.aclose()
            took = time.monotonic() - t0
        left = orphans.left(within_s=5.0)
    records = sorted(sink.records, key=lambda r: r.query_id)
    assert [r.error for r in records if r.error] == []
    assert [r.invoked for r in records] == [(q.expected_skill,) for q in queries]
    assert all(r.early_exit for r in records)
    assert len(api.requests) == 50  # stopped at the read: never the request after it
    assert left == []
    print(f"\n50 early stops of codex at concurrency 4: {took:.1f}s, nothing left behind")
