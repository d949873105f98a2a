"""The flows, called in-process (``flow.fn``) with no Prefect server: study end to end on the bundled
example, batching and resume, the cost cap, gates and alerts, rebaseline/nightly/watch, and the CLI."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skillreach.errors import BudgetExceeded, ConfigError, InputError
from skillreach.flows.service import nightly_compliance, rebaseline_all, watch
from skillreach.flows.study import study
from skillreach.models import Query
from skillreach.store.database import Store
from skillreach.study import StudyConfig, redact
from skillreach.study.plan import batch_key, batch_pairs, finer_tail, study_id_for
from skillreach.tasks._context import set_progress
from tests.helpers.webhooks import WebhookSink
from tests.helpers.world import cfg, fake_charging, make_skills, run, store_of

# ------------------------------------------------------------------------------------------ study


def test_the_bundled_example_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SKILLREACH_DATABASE_URL", raising=False)
    seen: list[Any] = []
    planned: list[tuple[int, int]] = []

    class Progress:
        def plan(self, total: int, done: int) -> None:
            planned.append((total, done))

        def __call__(self, record: Any) -> None:
            seen.append(record)

    config = StudyConfig(out=tmp_path / "demo", home=tmp_path / "home", batch_size=25)
    set_progress(str(config.out), Progress())
    try:
        result = run(study, config)
    finally:
        set_progress(str(config.out), None)
    example = Path(__file__).parents[1] / "skillreach/example/queries.json"
    n = len(json.loads(example.read_text())["queries"])
    assert planned == [(n, 0)]
    assert len(seen) == n
    for name in ("probes.jsonl", "artifact.json", "report.html"):
        assert (tmp_path / "demo" / name).is_file()
    assert len((tmp_path / "demo/probes.jsonl").read_text().splitlines()) == n
    assert result.artifact.counts.probes == n
    assert result.artifact.runtime.name == "keyword"
    with Store(f"sqlite:///{tmp_path / 'home/skillreach.db'}") as s:
        row = s.get_study(result.study_id)
        assert row is not None
        assert row.status == "done"
        assert row.headline["probes"] == n
        assert row.headline["top1_accuracy"] == round(result.artifact.metrics.top1_accuracy, 4)
        assert s.count_probes(result.study_id) == n
        art = s.latest_artifact(result.study_id)
        assert art is not None
        assert art.digest == result.artifact.digest


def test_batches_resume_and_rerun(world: dict[str, Path]) -> None:
    config = cfg(world, "out", batch_size=7)
    first = run(study, config)
    assert (first.probes_run, first.probes_resumed) == (26, 0)
    again = run(study, config)
    assert (again.probes_run, again.probes_resumed) == (0, 26)
    assert again.study_id == first.study_id
    # lose the last 5 records (a crash): only those are probed again
    log = world["root"] / "out/probes.jsonl"
    lines = log.read_text().splitlines()
    log.write_text("\n".join(lines[:-5]) + "\n")
    third = run(study, config)
    assert (third.probes_run, third.probes_resumed) == (5, 21)
    assert third.artifact.counts.probes == 26
    with store_of(world) as s:
        assert s.count_probes(first.study_id) == 26
        assert len(s.studies()) == 1


def test_batch_pairs_are_attempt_major_and_skip_done(world: dict[str, Path]) -> None:
    from skillreach.queries.sets import load_query_set

    qs = load_query_set(world["queries"])
    batches = batch_pairs(qs.queries, 2, 7, done={("alpha-0", 1)})
    assert [len(b) for b in batches] == [7, 7, 7, 4]
    flat = [(q.id, a) for b in batches for q, a in b]
    assert ("alpha-0", 1) not in flat
    assert [a for _, a in flat] == sorted(a for _, a in flat)


def test_cost_cap_stops_and_keeps_what_was_paid(world: dict[str, Path]) -> None:
    config = cfg(world, "capped", max_cost=5.0, concurrency=1)
    with fake_charging(1.0), pytest.raises(BudgetExceeded):
        run(study, config)
    lines = (world["root"] / "capped/probes.jsonl").read_text().splitlines()
    assert len(lines) == 5
    with store_of(world) as s:
        [row] = s.studies()
        assert row.status == "failed"
        assert "cost cap" in (row.error or "")
        assert s.count_probes(row.id) == 5


def test_bad_configuration_is_one_clear_error(world: dict[str, Path]) -> None:
    with pytest.raises(ConfigError, match="needs both --skills and --queries"):
        run(study, StudyConfig(skills=(world["skills"],), home=world["home"]))
    with pytest.raises(ConfigError, match="target"):
        run(study, cfg(world, "o", catalog="singleton"))


def test_a_target_catalog_probes_the_queries_it_can_answer(world: dict[str, Path]) -> None:
    result = run(study, cfg(world, "single", catalog="singleton", target="beta", attempts=1))
    assert result.artifact.catalog.id == "singleton:beta"
    assert result.artifact.catalog.skills == ["beta"]
    assert result.artifact.counts.probes == 5  # beta's four queries and the out-of-scope one
    make_skills(world["skills"], {"delta": "Plot maps from coordinates. Use for maps."})
    with pytest.raises(InputError, match="no query expects the target skill 'delta'"):
        run(study, cfg(world, "single2", catalog="singleton", target="delta"))


# ------------------------------------------------------------------------------ gates and alerts


def test_a_regressed_run_posts_exactly_one_alert(world: dict[str, Path], monkeypatch: pytest.MonkeyPatch,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    base = run(rebaseline_all, cfg(world, "base"))
    assert base["reason"] == "manual"
    with store_of(world) as s:
        assert sorted(b.skill for b in s.baselines()) == ["alpha", "beta", "gamma"]
    assert (world["root"] / "base/baselines/alpha.json").is_file()

    with WebhookSink() as sink:
        secret_url = f"{sink.base_url}/services/T0/B0/SECRETTOKEN"
        monkeypatch.setenv("SKILLREACH_ALERT_WEBHOOKS", json.dumps([secret_url]))
        result = run(study, cfg(world, "new", runtime_script="bad"))
    assert [(b["skill"], b["metric"]) for b in result.breaches] == [("alpha", "activation")]
    [req] = sink.requests
    assert req["path"] == "/services/T0/B0/SECRETTOKEN"
    text = req["body"]["text"]
    assert "alpha activation changed -1.000" in text
    assert "alpha@" in text
    assert (world["root"] / "new/report.html").resolve().as_uri() in text
    breach = result.breaches[0]
    assert breach["delta"] == -1.0
    assert breach["interval"] == pytest.approx([-1.0, -0.541218], abs=1e-6)  # Newcombe's, over 5 cases
    assert breach["baseline_id"].startswith("alpha@")
    assert "**breach**" in result.gate_report
    with store_of(world) as s:
        [alert] = s.alerts()
        assert (alert.skill, alert.metric, alert.delivery, alert.delivered) == ("alpha", "activation",
                                                                                "delivered", True)
    # the webhook's token is nowhere: logs, database
    assert "SECRETTOKEN" not in caplog.text
    db = (world["home"] / "skillreach.db").read_bytes()
    assert b"SECRETTOKEN" not in db
    for extra in world["home"].glob("skillreach.db-*"):
        assert b"SECRETTOKEN" not in extra.read_bytes()


def test_an_unchanged_run_breaches_nothing(world: dict[str, Path]) -> None:
    run(rebaseline_all, cfg(world, "base"))
    result = run(study, cfg(world, "again"))
    assert result.breaches == ()
    assert "0 breaches" in result.gate_report
    with store_of(world) as s:
        assert s.alerts() == []


def test_nightly_compliance_judges_what_the_agent_did(world: dict[str, Path]) -> None:
    data = json.loads(world["queries"].read_text())
    checks = {"requires": [{"tool": "Bash", "pattern": "make preflight"}]}
    for q in data["queries"]:
        if q["id"] in ("alpha-0", "alpha-1"):
            q["checks"] = checks
    world["queries"].write_text(json.dumps(data))
    entries = json.loads(world["good"].read_text())
    def bash(cmd: str) -> dict[str, Any]:
        return {"invoked": ["alpha"], "tool_calls": [{"tool": "Bash", "input": {"cmd": cmd}}]}

    entries["alpha-0"] = bash("make preflight")
    entries["alpha-1"] = bash("rm -rf /")
    world["good"].write_text(json.dumps(entries))
    out = run(nightly_compliance, cfg(world, "nightly"))
    with store_of(world) as s:
        row = s.get_study(out["study_id"])
        assert row is not None
        assert row.kind == "compliance"
        assert row.config["compliance"] is True
    from skillreach.scoring.artifact import read_artifact

    artifact = read_artifact(Path(out["out"]) / "artifact.json")
    judged = {(o.query_id, o.attempt): o.compliance for o in artifact.outcomes if o.compliance is not None}
    assert judged == {("alpha-0", 1): True, ("alpha-0", 2): True,
                      ("alpha-1", 1): False, ("alpha-1", 2): False}


# ------------------------------------------------------------------------------------------ watch


def test_watch_reports_added_changed_removed_skills(world: dict[str, Path]) -> None:
    config = cfg(world, "w")
    first = run(watch, config)
    assert first["first_snapshot"] is True
    assert first["events"] == []
    (world["skills"] / "delta").mkdir()
    (world["skills"] / "delta/SKILL.md").write_text("---\nname: delta\ndescription: Plot maps.\n---\nbody\n")
    (world["skills"] / "beta/SKILL.md").write_text("---\nname: beta\ndescription: Docker, changed.\n---\nx\n")
    import shutil

    shutil.rmtree(world["skills"] / "gamma")
    second = run(watch, config)
    assert (second["added"], second["changed"], second["removed"]) == (["delta"], ["beta"], ["gamma"])
    assert second["events"] == ["skillreach.skill.added", "skillreach.skill.changed",
                                "skillreach.skill.removed"]
    assert second["emitted"] == 0  # no Prefect server: nothing to emit to
    third = run(watch, config)
    assert third["events"] == []


def test_watch_sees_a_new_model_snapshot(world: dict[str, Path]) -> None:
    from skillreach.runtimes.fake import FakeRuntime

    snapshots = iter(["model-2025", "model-2025", "model-2026"])

    async def resolve(self: Any, model: str | None = None) -> str:
        return next(snapshots)

    mp = pytest.MonkeyPatch()
    mp.setattr(FakeRuntime, "resolve_model", resolve, raising=False)
    try:
        config = cfg(world, "w", model="fake-latest")
        assert run(watch, config)["model_changed"] is False
        assert run(watch, config)["model_changed"] is False
        third = run(watch, config)
    finally:
        mp.undo()
    assert third["model_changed"] is True
    assert third["events"] == ["skillreach.model.snapshot.changed"]


# -------------------------------------------------------------------------------------------- CLI


def test_cli_run_without_arguments_runs_the_example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from skillreach.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.delenv("SKILLREACH_DATABASE_URL", raising=False)
    assert main(["run", "--out", "demo"]) == 0
    out = capsys.readouterr().out
    assert "artifact" in out
    assert "demo" in out
    for name in ("probes.jsonl", "artifact.json", "report.html"):
        assert (tmp_path / "demo" / name).is_file()
    assert (tmp_path / ".skillreach/skillreach.db").is_file()


def test_cli_bad_webhook_variable_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    from skillreach.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SKILLREACH_ALERT_WEBHOOKS", "https://hooks.example/services/T/B/SECRET")
    assert main(["run"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("skillreach: error: environment")
    assert "SKILLREACH_ALERT_WEBHOOKS" in err
    assert "not valid" in err
    assert "SECRET" not in err
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize(("argv", "needle"), [
    (["run", "--queries", "missing.json", "--skills", "."], "missing.json: no such file"),
    (["run", "--catalog", "bogus"], "--catalog bogus"),
    (["run", "--config", "nope.toml"], "nope.toml"),
    (["run", "--runtime", "nonesuch"], "unknown runtime 'nonesuch'"),
])
def test_cli_bad_input_is_one_line_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str], argv: list[str],
                                         needle: str) -> None:
    from skillreach.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err
    assert len(err.splitlines()) == 1


def test_cli_config_file_and_flags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "study.toml").write_text(
        'skills = ["sk"]\nqueries = "q.json"\nattempts = 3\nruntime = "fake"\nmax_cost_usd = 2.5\n')
    built = StudyConfig.build(tmp_path / "study.toml", attempts=2)
    assert built.skills == (tmp_path / "sk",)
    assert built.queries == tmp_path / "q.json"
    assert (built.attempts, built.runtime, built.max_cost) == (2, "fake", 2.5)
    (tmp_path / "bad.toml").write_text("atempts = 3\n")
    with pytest.raises(ConfigError, match=r"bad\.toml: atempts"):
        StudyConfig.build(tmp_path / "bad.toml")


def test_a_study_without_out_resumes_in_the_folder_of_its_fingerprint(world: dict[str, Path]) -> None:
    from datetime import UTC, datetime

    from skillreach.study.plan import default_out_dir

    config = cfg(world, "x").model_copy(update={"out": None})
    a = run(study, config)
    b = run(study, config)
    assert a.out == b.out  # the same study: the second run resumes and probes nothing
    assert (a.probes_resumed, b.probes_run) == (0, 0)
    assert b.probes_resumed == a.probes_run + a.probes_resumed > 0
    assert a.out.parent == Path("runs")
    more = run(study, config.model_copy(update={"attempts": config.attempts + 1}))
    assert (more.out, more.probes_resumed) == (a.out, b.probes_resumed)  # more attempts extend the study
    other = run(study, config.model_copy(update={"runtime": "keyword", "runtime_options": {}}))
    assert other.out != a.out
    assert other.probes_resumed == 0
    fp = "sha256:" + "0123456789abcdef" * 4
    assert default_out_dir(config, fingerprint=fp) == Path("runs/study-fake-0123456789ab")
    assert default_out_dir(config, kind="compliance", fingerprint=fp, slot="2026-12-01") == Path(
        "runs/compliance-fake-0123456789ab-2026-12-01")
    now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)  # a sweep (no one fingerprint) keeps the time stamp
    assert default_out_dir(config, now, kind="sweep") == Path("runs/20260102T030405Z-sweep-fake")


def test_watch_survives_a_model_that_cannot_be_resolved(world: dict[str, Path]) -> None:
    from skillreach.errors import ProbeFailed
    from skillreach.runtimes.fake import FakeRuntime

    async def unreachable(self: Any, model: str | None = None) -> str:
        raise ProbeFailed("models endpoint unreachable")

    mp = pytest.MonkeyPatch()
    mp.setattr(FakeRuntime, "resolve_model", unreachable, raising=False)
    try:
        got = run(watch, cfg(world, "w", model="fake-latest"))
    finally:
        mp.undo()
    assert got["first_snapshot"] is True
    assert got["model_changed"] is False


def test_a_batch_is_retried_for_infrastructure_failures_only() -> None:
    from prefect.states import Failed

    from skillreach.tasks.study import _retry_unless_our_error, probe_batch

    assert probe_batch.retries == 2
    assert _retry_unless_our_error(None, None, Failed(data=OSError("disk full"))) is True
    assert _retry_unless_our_error(None, None, Failed(data=BudgetExceeded("cap"))) is False
    assert _retry_unless_our_error(None, None, Failed(data=ConfigError("bad option"))) is False


# ---------------------------------------------------------------------------------- pure helpers

@given(st.integers(1, 30), st.integers(1, 4), st.integers(1, 50), st.sets(st.tuples(st.integers(0, 29),
                                                                                  st.integers(1, 4))))
def test_batch_pairs_cover_every_pending_pair_once(n: int, attempts: int, size: int,
                                                   done_idx: set[tuple[int, int]]) -> None:
    queries = [Query(id=f"q{i}", text="t", expected_skill="s") for i in range(n)]
    done = {(f"q{i}", a) for i, a in done_idx}
    batches = batch_pairs(queries, attempts, size, done=done)
    flat = [(q.id, a) for b in batches for q, a in b]
    expected = {(q.id, a) for q in queries for a in range(1, attempts + 1)} - done
    assert sorted(flat) == sorted(expected)
    assert len(flat) == len(set(flat))
    assert all(0 < len(b) <= size for b in batches)


def test_finer_tail_shrinks_the_batches_as_the_study_nears_its_end() -> None:
    pairs = [(f"q{i}", 1) for i in range(2000)]
    batches = [pairs[i : i + 50] for i in range(0, 2000, 50)]
    cut = finer_tail(batches, workers=3)
    sizes = [len(b) for b in cut]
    assert [p for b in cut for p in b] == pairs  # same pairs, same order (attempt-major kept)
    assert sizes[:29] == [50] * 29  # full while 1/12 of what is left is at least a batch (600 pairs)
    assert sizes[29:33] == [46, 42, 39, 36]  # then a twelfth (4 × 3 workers) of what is left
    assert sizes == sorted(sizes, reverse=True)
    assert min(sizes[:-1]) == 7  # never below an eighth of a batch (the last one holds what is left)
    assert len(cut) == 62
    # one worker: a quarter of what is left; a study smaller than that: small batches from the start
    assert [len(b) for b in finer_tail(batches[:1], workers=1)] == [13, 10, 7, 7, 7, 6]


@given(st.lists(st.integers(1, 60), min_size=0, max_size=30), st.integers(1, 50), st.integers(0, 8))
def test_finer_tail_keeps_every_pair_in_order(sizes: list[int], size: int, workers: int) -> None:
    flat = [(f"q{i}", 1) for i in range(sum(sizes))]
    batches = batch_pairs([Query(id=q, text="t", expected_skill="s") for q, _ in flat], 1, size)
    plain = [tuple((q.id, a) for q, a in b) for b in batches]
    cut = finer_tail(plain, workers)
    assert [p for b in cut for p in b] == flat
    assert all(0 < len(b) <= size for b in cut)
    biggest = max(map(len, plain), default=0)
    if workers and biggest >= 2:  # each batch: a (4 × workers)-th of what is left, within [size / 8, size]
        left = len(flat)
        for b in cut:
            want = min(biggest, max(-(-biggest // 8), -(-left // (4 * workers))))
            assert len(b) == min(want, left)
            left -= len(b)
    else:
        assert cut == plain


def test_batch_key_is_order_free_and_provenance_bound() -> None:
    pairs = [("q1", 1), ("q2", 1), ("q1", 2)]
    assert batch_key("fp", pairs) == batch_key("fp", list(reversed(pairs)))
    assert batch_key("fp", pairs) != batch_key("fp2", pairs)
    assert batch_key("fp", pairs) != batch_key("fp", pairs[:2])


def test_study_id_is_the_same_for_the_same_fingerprint_and_folder(tmp_path: Path) -> None:
    assert study_id_for("fp", tmp_path / "a") == study_id_for("fp", tmp_path / "a")
    assert study_id_for("fp", tmp_path / "a") != study_id_for("fp", tmp_path / "b")
    assert study_id_for("fp", tmp_path / "a") != study_id_for("fp2", tmp_path / "a")


def test_redact_blanks_secrets_everywhere() -> None:
    data = {"api_key": "sk-1", "nested": [{"token": "t"}, "postgresql+psycopg://u:pw@h/db"],
            "hook": "https://hooks.slack.com/services/T/B/X", "plain": "keyword", "model": "m"}
    out = redact(data)
    text = json.dumps(out)
    for secret in ("sk-1", '"t"', ":pw@", "T/B/X"):
        assert secret not in text
    assert out["plain"] == "keyword"
    assert out["model"] == "m"
