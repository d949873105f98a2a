"""Catalog changes the service handles (issue 39, problem 6), in-process on a git repository of skills: the
first watch compares with the recorded baselines; a removed skill is one alert and the studies run on the
rest; a rename carries the baseline history and says so."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.gitworld import BRANCH, git, git_world, on_branch
from tests.helpers.world import SKILLS, cfg, make_skills, run, store_of


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """The flow tests' world (three skills, 13 queries, the fake runtime), in a git repository."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    return git_world(tmp_path)


def alerts(world: dict[str, Path], event: str) -> list[Any]:
    with store_of(world) as store:
        return [a for a in store.alerts() if a.event == event]


def test_the_first_watch_compares_the_catalog_with_the_recorded_baselines(repo: dict[str, Path]) -> None:
    from skillreach.flows.service import rebaseline_all, watch

    run(rebaseline_all, cfg(repo, "r0"), reason="manual")
    assert on_branch(repo["root"]) == ["baselines/alpha.json", "baselines/beta.json", "baselines/gamma.json"]
    # before the service's first watch: a skill added, another edited (both committed)
    make_skills(repo["skills"], {"delta": "Summarise meeting notes. Use for minutes of a meeting."})
    make_skills(repo["skills"], {"alpha": SKILLS["alpha"] + " Also plots."})
    git(repo["root"], "add", ".")
    git(repo["root"], "commit", "-q", "-m", "add delta, edit alpha")
    first = run(watch, cfg(repo, "w0"))
    assert first["first_snapshot"] is False  # not an empty snapshot: the baselines were the reference
    assert first["from_baselines"] is True
    assert first["added"] == ["delta"]
    assert first["changed"] == ["alpha"]
    assert sorted(first["events"]) == ["skillreach.skill.added", "skillreach.skill.changed"]
    assert run(watch, cfg(repo, "w1"))["events"] == []  # said once: the next watch compares snapshots


def test_a_fresh_install_still_takes_its_first_snapshot_quietly(repo: dict[str, Path]) -> None:
    from skillreach.flows.service import watch

    first = run(watch, cfg(repo, "w0"))
    assert (first["first_snapshot"], first["events"]) == (True, [])


def test_a_removed_skill_is_one_alert_and_the_studies_run_on_the_rest(repo: dict[str, Path]) -> None:
    from skillreach.flows.service import nightly_compliance, rebaseline_all

    run(rebaseline_all, cfg(repo, "r0"), reason="manual")
    shutil.rmtree(repo["skills"] / "gamma")  # removed; its four cases still in queries.json
    git(repo["root"], "commit", "-q", "-am", "remove gamma")
    night = run(nightly_compliance, cfg(repo, "n1"))
    assert night["statuses"] == {"alpha": "ok", "beta": "ok"}  # no "skill name(s) not in the catalog"
    [gone] = alerts(repo, "skillreach.skill.gone")
    message = gone.payload["message"]
    assert gone.skill == "gamma"
    assert "4 case(s) of queries.json name it (gamma-0, gamma-1, gamma-2, gamma-3)" in message
    assert "remove its cases from queries.json or restore the skill" in message
    # the re-baselining the removal triggers runs on the rest too, and records it
    again = run(rebaseline_all, cfg(repo, "r1"), reason="skillreach.skill.removed", skill="gamma")
    assert again["statuses"] == {"alpha": "ok", "beta": "ok"}
    assert len(alerts(repo, "skillreach.skill.gone")) == 2  # one per study, the repeat rules decide sending
    # the team removes the cases: nothing is left out, nothing is said
    data = json.loads(repo["queries"].read_text())
    data["queries"] = [q for q in data["queries"] if q["expected_skill"] != "gamma"]
    repo["queries"].write_text(json.dumps(data))
    run(nightly_compliance, cfg(repo, "n2"))
    assert len(alerts(repo, "skillreach.skill.gone")) == 2


@pytest.mark.parametrize("trigger", ["renamed", "another event"])
def test_a_renamed_skill_carries_its_baseline_history_and_says_so(
    repo: dict[str, Path], trigger: str
) -> None:
    """Carried by the re-baselining its event starts, or — when another re-baselining ran first and the
    rename's was dropped (rebaseline-all keeps one of two triggered at once) — by that one."""
    from skillreach.flows.service import rebaseline_all, watch
    from skillreach.service.watch import SKILL_RENAMED

    run(rebaseline_all, cfg(repo, "r0"), reason="manual")
    run(watch, cfg(repo, "w0"))  # the first snapshot
    # one commit: the folder and the name change, the description and body stay; the cases relabelled
    (repo["skills"] / "gamma").rename(repo["skills"] / "translate")
    md = repo["skills"] / "translate" / "SKILL.md"
    md.write_text(md.read_text().replace("name: gamma", "name: translate"))
    text = repo["queries"].read_text().replace('"expected_skill": "gamma"', '"expected_skill": "translate"')
    repo["queries"].write_text(text)
    script_file = repo["good"]
    script_file.write_text(script_file.read_text().replace('["gamma"]', '["translate"]'))
    git(repo["root"], "add", "-A")
    git(repo["root"], "commit", "-q", "-m", "rename gamma to translate")
    seen = run(watch, cfg(repo, "w1"))
    assert seen["renamed"] == {"translate": "gamma"}
    assert (seen["added"], seen["removed"]) == ([], [])
    assert [e for e in seen["events"] if e.startswith("skillreach.skill.")] == [SKILL_RENAMED]
    if trigger == "renamed":
        result = run(rebaseline_all, cfg(repo, "r1"), reason=SKILL_RENAMED, skill="translate",
                     renamed_from="gamma")
    else:
        result = run(rebaseline_all, cfg(repo, "r1"), reason="skillreach.skill.removed", skill="epsilon")
    # gated against the carried record (its cases relabelled and paired), not a fresh start
    assert result["statuses"] == {"alpha": "ok", "beta": "ok", "translate": "ok"}
    assert "| translate | activation | +1.000 | +1.000 |" in result["gate_report"]  # compared, paired
    assert on_branch(repo["root"]) == ["baselines/alpha.json", "baselines/beta.json",
                                       "baselines/translate.json"]
    log = git(repo["root"], "log", "--format=%s", BRANCH)
    assert "baselines: gamma renamed to translate — its baseline gamma@" in log
    record = json.loads(git(repo["root"], "show", f"{BRANCH}:baselines/translate.json"))
    assert record["skill"] == "translate"
    [carried] = alerts(repo, "skillreach.baseline.carried")
    assert carried.skill == "translate"
    assert "gamma was renamed to translate: its baseline gamma@" in carried.payload["message"]
    assert "(13 of 13 cases paired under it" in carried.payload["message"]
    assert alerts(repo, "skillreach.skill.gone") == []  # the cases were relabelled in the same commit
