"""``skillreach run``: --batch (the anthropic runtime's Message Batches mode, refused elsewhere), --target
(a singleton/neighborhood catalog from the command line) and the cost estimate printed before a live run."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from skillreach.cli import main
from skillreach.scoring.artifact import read_artifact
from skillreach.study.probe_log import read_probes
from tests.fakes.messages_api import MessagesAPI
from tests.helpers.live import SNAPSHOT, responder


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith("skillreach: error: ")
    return err


def test_help_shows_batch_and_target(capsys: pytest.CaptureFixture[str],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["run", "--help"]) == 0
    text = capsys.readouterr().out
    assert "--batch" in text
    assert "--target" in text
    assert "--judge-model" in text
    assert "half price" in text
    assert "results so far are kept" in text  # --max-cost says what the cap does


@pytest.mark.parametrize("runtime", ["keyword", "fake", "claude-code"])
def test_batch_is_refused_for_a_runtime_without_batch_mode(world: dict[str, Path], runtime: str,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--runtime", runtime, "--batch"]) == 2
    err = one_error_line(capsys)
    assert f"--batch: the {runtime} runtime has no batch mode" in err
    assert not Path("runs").exists()  # refused before anything ran


def test_batch_runs_through_the_batches_api_at_half_price(world: dict[str, Path],
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-a-secret")
    monkeypatch.setenv("COLUMNS", "200")
    with MessagesAPI(responder(), batch_polls=1) as api:
        (world["root"] / "study.toml").write_text(
            'skills = ["skills"]\nqueries = "queries.json"\nruntime = "anthropic"\n'
            'model = "claude-sonnet-4-6"\n'
            f'[runtime_options]\nbase_url = "{api.base_url}"\npoll_initial_s = 0.01\npoll_max_s = 0.05\n',
            encoding="utf-8",
        )
        code = main(["run", "--config", "study.toml", "--batch", "--out", "nightly"])
        captured = capsys.readouterr()
        assert code == 0, captured.err
        paths = [c.path for c in api.calls]
    assert any(p.startswith("/v1/messages/batches") for p in paths)
    assert "/v1/messages" not in paths  # no direct Messages request: all went through batches
    assert re.search(rf"cost estimate: about \$\d+\.\d\d for 13 probes \({SNAPSHOT}, cached listing, "
                     r"batch: half price\)", captured.err), captured.err
    probes = read_probes(world["root"] / "nightly/probes.jsonl")
    assert len(probes) == 13
    assert all(p.error is None and p.resolved_model == SNAPSHOT for p in probes)
    # the runtime billed half price: compare one probe's cost with its usage at the full price
    from skillreach.settings import Settings
    from skillreach.study.contract import cost_of

    price = Settings().price_for(SNAPSHOT)
    p = probes[0]
    full = cost_of(p.usage, price)
    assert full is not None
    assert p.cost_usd == pytest.approx(full / 2)


def test_target_picks_a_singleton_catalog_from_the_command_line(world: dict[str, Path],
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    (world["root"] / "study.toml").write_text(
        f'runtime = "fake"\n[runtime_options]\nscript = "{world["good"]}"\n', encoding="utf-8"
    )
    argv = ["run", "--config", "study.toml", "--skills", "skills", "--queries", "queries.json",
            "--catalog", "singleton", "--target", "beta", "--out", "single"]
    assert main(argv) == 0, capsys.readouterr().err
    artifact = read_artifact(world["root"] / "single/artifact.json")
    assert artifact.catalog.id == "singleton:beta"
    assert artifact.counts.probes == 5  # beta's four queries and the out-of-scope one


def test_target_without_a_target_catalog_and_an_unknown_target_are_one_line(
    world: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["run", "--skills", "skills", "--queries", "queries.json"]
    assert main([*base, "--target", "beta"]) == 2
    assert "add --catalog singleton or --catalog neighborhood" in one_error_line(capsys)
    assert main([*base, "--catalog", "neighborhood", "--target", "nonesuch"]) == 2
    assert "no skill named 'nonesuch'" in one_error_line(capsys)
    assert main([*base, "--catalog", "singleton"]) == 2
    assert "--target NAME" in one_error_line(capsys)


def test_a_config_file_may_ask_for_batch_mode_too(world: dict[str, Path],
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """The same switch in a config file is checked the same way, the file named."""
    (world["root"] / "study.toml").write_text(
        'runtime = "keyword"\n[runtime_options]\nbatch = true\n', encoding="utf-8"
    )
    assert main(["run", "--config", "study.toml", "--skills", "skills", "--queries", "queries.json"]) == 2
    err = one_error_line(capsys)
    assert "study.toml: runtime_options.batch: the keyword runtime has no batch mode" in err
    assert json.loads((world["root"] / "queries.json").read_text())  # untouched


def test_the_cli_says_an_estimate_over_the_cap_once_then_stops_at_the_cap(
    world: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-a-secret")
    monkeypatch.setenv("COLUMNS", "400")
    with MessagesAPI(responder()) as api:
        (world["root"] / "study.toml").write_text(
            'skills = ["skills"]\nqueries = "queries.json"\nruntime = "anthropic"\n'
            f'model = "claude-sonnet-4-6"\n[runtime_options]\nbase_url = "{api.base_url}"\n',
            encoding="utf-8",
        )
        code = main(["run", "--config", "study.toml", "--max-cost", "0.001", "--concurrency", "1",
                     "--out", "capped"])
    err = capsys.readouterr().err
    assert code == 1, err
    assert err.count("cost estimate:") == 1, err
    assert "--max-cost leaves: the cap will stop the run after about 1 probe," in err
    assert "skillreach: error: the cost cap of $0.00 was reached" in err
    assert len(read_probes(world["root"] / "capped/probes.jsonl")) == 1  # the probe paid for is kept


def test_run_grades_rubrics_with_the_judge_it_is_given(world: dict[str, Path],
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    from skillreach.study.judge import FAKE_JUDGE_MODEL, rubric_version
    from tests.helpers.rubrics import ANSWERS, RUBRIC, with_rubrics

    monkeypatch.setenv("SKILLREACH_JUDGE_MODEL", "claude-haiku-4-5")  # the flag wins over it
    with_rubrics(world)
    (world["root"] / "study.toml").write_text(
        f'runtime = "fake"\n[runtime_options]\nscript = "{world["good"]}"\n', encoding="utf-8"
    )
    argv = ["run", "--config", "study.toml", "--skills", "skills", "--queries", "queries.json",
            "--compliance", "--judge-model", FAKE_JUDGE_MODEL, "--out", "judged"]
    assert main(argv) == 0, capsys.readouterr().err
    graded = read_probes(world["root"] / "judged/graded.jsonl")
    assert {p.rubric_version for p in graded} == {rubric_version(RUBRIC, FAKE_JUDGE_MODEL)}
    assert len(graded) == len(ANSWERS)  # one attempt each
