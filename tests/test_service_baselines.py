"""The service's baselines only move when a person says so, and only the gating study gates — the service
flows in-process (their own bodies), the anthropic runtime against the local Messages API stand-in, a
temporary git repository of skills, alerts to a local webhook sink (tests/helpers/week.py's world).

- a fresh install's first nightly alerts once ("no baselines yet") and its re-baselining records every skill;
- a skill added that takes one of beta's four cases: an inconclusive drop, kept as a candidate with one
  alert saying how many cases would decide it; an edit of that skill re-gates (still waiting);
- a model snapshot change keeps the waiting candidate waiting under the new pin, and the drift report says
  so; the next nightly does not ask for a re-baselining a person must decide;
- a study on another runtime is "not compared", once: no alert, no commit.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from skillreach.flows.service import nightly_compliance, rebaseline_all
from skillreach.service.alerts import BASELINE_EXPIRED
from skillreach.service.watch import MODEL_SNAPSHOT_CHANGED, SKILL_ADDED, SKILL_CHANGED
from tests.fakes.messages_api import MessagesAPI, Reply, ScriptResponder
from tests.helpers.webhooks import WebhookSink
from tests.helpers.week import (
    ALIAS,
    NEW,
    OLD,
    SKILLS,
    THIEF,
    alerts,
    branch_files,
    git,
    make_week,
    service_config,
    write_skill,
)
from tests.helpers.world import run


class OneCaseThief:
    """The agent behind the stand-in: each query reaches its skill, except beta's case 0, which the thief
    takes once it is in the listing (one of four cases: a drop past the gate the interval cannot decide)."""

    def __call__(self, body: dict[str, Any]) -> Reply:
        listing = json.dumps({"system": body.get("system"), "tools": body.get("tools")})
        script: dict[str, list[Any]] = {f"the {n} skill": [n] for n in [*SKILLS, THIEF[0]]}
        script.update({f"help with {n} task": [n] for n in SKILLS})
        if THIEF[0] in listing:
            script["help with beta task 0"] = [THIEF[0]]
        return ScriptResponder(script)(body)


def branch_json(repo: Path, path: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(git(repo, "show", f"skillreach/baselines:{path}"))
    return data


@pytest.fixture
def week(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    return make_week(tmp_path, monkeypatch)


def test_baselines_only_go_down_when_a_person_says_so(week: dict[str, Any]) -> None:
    repo = week["repo"]
    with MessagesAPI(OneCaseThief(), aliases={ALIAS: OLD}) as api, WebhookSink() as sink:
        # ---- a fresh install: the first nightly alerts once and asks for every skill's re-baselining
        cfg = service_config(week, api, sink, "night0")
        night = run(nightly_compliance, config_file=str(cfg))
        assert night["statuses"] == {"alpha": "no baseline", "beta": "no baseline", "gamma": "no baseline"}
        assert night["breaches"] == 0  # not a breach: the run is not Failed, the one alert is the notice
        assert "No baselines yet: re-baselining every skill" in night["gate_report"]
        texts = alerts(sink)
        assert len(texts) == 1, texts
        assert texts[0].startswith(
            f"skillreach {BASELINE_EXPIRED}: *: no baselines yet: re-baselining every skill")
        # what the event starts (prefect.yaml: skill "*" from the payload)
        first = run(rebaseline_all, config_file=str(service_config(week, api, sink, "rb0")),
                    reason=BASELINE_EXPIRED, skill="*")
        assert first["skill"] is None
        assert first["statuses"] == {"alpha": "no baseline", "beta": "no baseline", "gamma": "no baseline"}
        assert branch_files(repo) == ["baselines/alpha.json", "baselines/beta.json", "baselines/gamma.json"]
        assert "(*)" not in git(repo, "log", "-1", "--format=%B", "skillreach/baselines")
        assert alerts(sink) == []

        # ---- a skill is added that takes one of beta's four cases: inconclusive, kept, one alert
        write_skill(week["skills"], *THIEF)
        git(repo, "add", ".")
        git(repo, "commit", "-q", "-m", "add delta")
        added = run(rebaseline_all, config_file=str(service_config(week, api, sink, "rb1")),
                    reason=SKILL_ADDED, skill="delta")
        assert added["statuses"] == {"alpha": "ok", "beta": "inconclusive", "delta": "no queries",
                                     "gamma": "ok"}
        texts = alerts(sink)
        beta = [t for t in texts if "beta" in t]
        assert len(beta) == 1, texts
        assert beta[0].startswith("skillreach skillreach.gate.inconclusive: beta: drop past the gate, "
                                  "interval undecided: activation changed -0.250")
        assert "positive cases for beta (now 4)" in beta[0]  # what would decide it, in cases to add
        assert "skillreach baseline accept beta" in beta[0]
        assert "; lost 1 of 4 cases to delta; the baseline" in beta[0]  # the cause, from the new probes
        assert f"else fix {week['skills'] / 'delta' / 'SKILL.md'}" in beta[0]  # the file to fix
        assert branch_files(repo) == ["baselines/alpha.json", "baselines/candidates/beta.json",
                                      "baselines/gamma.json"]
        assert branch_json(repo, "baselines/beta.json")["metrics"]["activation"]["value"] == 1.0  # the bar

        # ---- the thief's description is edited: the same re-gating; beta still waits, its verdict (the
        # same drop, the same cause) already said: stored as a repeat, not sent again (issue 39)
        write_skill(week["skills"], THIEF[0], THIEF[1] + " Also images.")
        git(repo, "commit", "-q", "-am", "edit delta")
        edited = run(rebaseline_all, config_file=str(service_config(week, api, sink, "rb2")),
                     reason=SKILL_CHANGED, skill="delta")
        assert edited["statuses"]["beta"] == "inconclusive"
        assert [t for t in alerts(sink) if "beta" in t] == []
        assert branch_json(repo, "baselines/beta.json")["metrics"]["activation"]["value"] == 1.0

        # ---- a new model snapshot: the waiting candidate keeps waiting, under the new pin
        api.aliases[ALIAS] = NEW
        drift = run(rebaseline_all, config_file=str(service_config(week, api, sink, "rb3")),
                    reason=MODEL_SNAPSHOT_CHANGED, model_snapshot=NEW)
        assert "Candidates kept waiting under the new pin" in drift["gate_report"]
        assert "decides): beta." in drift["gate_report"]
        changed = git(repo, "show", "--name-only", "--format=", "skillreach/baselines").splitlines()
        assert sorted(changed) == ["baselines/alpha.json", "baselines/candidates/beta.json",
                                   "baselines/gamma.json"]
        assert branch_json(repo, "baselines/candidates/beta.json")["model"] == NEW
        assert branch_json(repo, "baselines/beta.json")["model"] == OLD  # never promoted
        assert branch_json(repo, "baselines/alpha.json")["model"] == NEW
        alerts(sink)

        # ---- the next nightly: beta's baseline is of the old snapshot and its candidate waits for a
        # person: said in the report, no alert (a re-baselining could not decide it)
        later = run(nightly_compliance, config_file=str(service_config(week, api, sink, "night1")))
        assert later["statuses"]["beta"] == "expired"
        assert "its candidate waits (skillreach baseline accept beta)" in later["gate_report"]
        assert alerts(sink) == []


def fake_runtime_config(world: dict[str, Any], sink: WebhookSink, out: str) -> Path:
    path = world["tmp"] / f"{out}.toml"
    script = world["tmp"] / "fake-script.json"
    script.write_text(json.dumps({"*": ["alpha"]}))  # an exploratory runtime: every query reaches alpha
    path.write_text(
        f'skills = ["{world["skills"]}"]\nqueries = "{world["repo"] / "evals" / "queries.json"}"\n'
        f'runtime = "fake"\nattempts = 2\nhome = "{world["tmp"] / "home"}"\n'
        f'out = "{world["tmp"] / "runs" / out}"\n'
        f'alert_webhooks = ["{sink.base_url}/services/T0/B0/SECRET"]\n'
        f'[runtime_options]\nscript = "{script}"\n'
    )
    return path


def test_a_study_on_another_runtime_is_not_compared(week: dict[str, Any]) -> None:
    repo = week["repo"]
    with MessagesAPI(OneCaseThief(), aliases={ALIAS: OLD}) as api, WebhookSink() as sink:
        run(rebaseline_all, config_file=str(service_config(week, api, sink, "rb0")), reason="manual")
        commits = git(repo, "rev-list", "--count", "skillreach/baselines")
        alerts(sink)
        for flow, params in ((nightly_compliance, {}), (rebaseline_all, {"reason": BASELINE_EXPIRED})):
            result = run(flow, config_file=str(fake_runtime_config(week, sink, f"fake-{flow.name}")),
                         **params)
            assert result["statuses"] == {}
            report = result["gate_report"]
            assert report.count("Not compared: different runtime: baselines anthropic, this study fake") == 1
            assert alerts(sink) == []  # no alert, so no baseline.expired event either
            assert git(repo, "rev-list", "--count", "skillreach/baselines") == commits  # nothing recorded
