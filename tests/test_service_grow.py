"""A skill added without queries, with a generator model configured: the service generates its queries
with the generation flow, seals the grown set as a new corpus version, gates every other skill on the old
set's cases (the added skill steals a neighbour's traffic: one alert, a candidate), baselines the new
skill from the grown set, and commits the grown set with the records in one commit on the service
branch. The next watch sees no change of its own making, and the nightly run gates every skill — the new
one included — against the grown corpus without anyone merging first.

The service flows run in-process (their own bodies), the anthropic runtime and the generation flow speak
to the local Messages API stand-in, baselines live in a temporary git repository.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from skillreach.baselines.records import corpus_version
from skillreach.cli import main
from skillreach.flows.service import nightly_compliance, rebaseline_all, watch
from skillreach.queries.sets import verify_query_set
from skillreach.service.watch import SKILL_ADDED
from tests.fakes.messages_api import MessagesAPI, Reply, ScriptResponder, query_text
from tests.helpers.webhooks import WebhookSink
from tests.helpers.week import ALIAS, OLD, THIEF, Agent, alerts, branch_files, git, make_week, service_config
from tests.helpers.week import write_skill as add_skill
from tests.helpers.world import run

GENERATOR = "claude-gen-1"
_BODY = re.compile(r'<skill_body id="([A-Z0-9-]+)">\n(.*?)\n</skill_body>', re.DOTALL)
_KIND = re.compile(r'^- "([a-z_]+)":', re.MULTILINE)
DELTA_BODY = ("Run docker build with BuildKit and cache mounts for faster image builds.\n"
              "Inspect failing container layers with docker history before changing the Dockerfile.\n"
              "Pin base images by digest so rebuilds stay reproducible across machines.\n")


class Service(Agent):
    """The agent of tests/helpers/week.py (delta steals beta's queries), which also routes the generated
    delta queries to delta; and the generator model, which writes drafts cited from the shown body."""

    def __init__(self) -> None:
        super().__init__()
        self.generation_requests = 0

    def __call__(self, body: dict[str, Any]) -> Reply:
        content = body["messages"][0]["content"]
        if isinstance(content, str) and "<skill_body" in content:
            self.generation_requests += 1
            return self.drafts(content)
        if "help with delta task" in query_text(body):
            return ScriptResponder({"help with delta task": ["delta"]})(body)
        return super().__call__(body)

    def drafts(self, prompt: str) -> str:
        shown = dict(_BODY.findall(prompt))
        lines = [ln for ln in shown["SKILL"].splitlines() if len(ln.split()) >= 6]
        per_kind = int(re.search(r"Write (\d+) requests? of each", prompt).group(1))  # type: ignore[union-attr]
        out = []
        for kind in _KIND.findall(prompt):
            for i in range(per_kind):
                words = " ".join(f"{kind[:3]}w{i}x{j}" for j in range(4))
                routed = kind in ("implicit", "contextual")
                text = (f"please help with delta task {words}" if routed
                        else f"something else entirely {words}")
                item = {"kind": kind, "text": text, "citation": " ".join(lines[i % len(lines)].split()[:6])}
                if kind == "neighbor_negative":
                    item["rival"] = "RIVAL-1"
                out.append(item)
        return json.dumps({"queries": out})


def config_with_generator(world: dict[str, Any], api: MessagesAPI, sink: WebhookSink, out: str) -> Path:
    path = service_config(world, api, sink, out)
    path.write_text(f'generator_model = "{GENERATOR}"\n' + path.read_text())
    return path


def test_a_skill_added_without_queries_is_generated_for_gated_and_baselined(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    world = make_week(tmp_path, monkeypatch)
    repo = world["repo"]
    queries_file = repo / "evals" / "queries.json"
    agent = Service()
    with MessagesAPI(agent, aliases={ALIAS: OLD, GENERATOR: GENERATOR + "-20261101"}) as api, \
            WebhookSink() as sink, pytest.MonkeyPatch.context() as mp:
        agent.api = api
        mp.setenv("ANTHROPIC_BASE_URL", api.base_url)  # the generation flow's SDK reads the endpoint here
        # ---- day 0: baselines of the three skills on the authored set
        cfg0 = config_with_generator(world, api, sink, "day0")
        assert run(watch, config_file=str(cfg0))["first_snapshot"] is True
        run(rebaseline_all, config_file=str(cfg0), reason="manual")
        authored = verify_or_load(queries_file)
        assert agent.generation_requests == 0  # every skill had queries: nothing generated

        # ---- day 1: delta arrives without queries; it also takes beta's docker work
        add_skill(world["skills"], *THIEF, body=DELTA_BODY)
        git(repo, "add", ".")
        git(repo, "commit", "-q", "-m", "add delta")
        cfg1 = config_with_generator(world, api, sink, "day1")
        assert run(watch, config_file=str(cfg1))["added"] == ["delta"]
        day1 = run(rebaseline_all, config_file=str(cfg1), reason=SKILL_ADDED, skill="delta")
        assert day1["queries_grown"] is True
        assert agent.generation_requests == 1  # one request: the added skill only
        # every old skill gated on the authored set's cases; delta baselined from the grown set
        assert day1["statuses"] == {"alpha": "ok", "beta": "breach", "delta": "no baseline", "gamma": "ok"}
        texts = alerts(sink)
        assert [t.split(" (")[0] for t in texts if "beta" in t] == [
            next(t for t in texts if t.startswith("skillreach gate breach: beta activation")).split(" (")[0]]
        assert not any("no_queries" in t for t in texts), texts  # delta has queries now

        # one commit on the service branch: the grown set and the records made from it
        assert git(repo, "rev-list", "--count", "main..skillreach/baselines") == "2"
        assert branch_files(repo) == ["baselines/alpha.json", "baselines/candidates/beta.json",
                                      "baselines/delta.json", "baselines/gamma.json", "evals/queries.json"]
        assert git(repo, "status", "--porcelain") == ""  # the team's working tree untouched
        message = git(repo, "log", "-1", "--format=%B", "skillreach/baselines")
        assert "query set grown" in message
        assert "skill.added (delta)" in message
        grown = json.loads(git(repo, "show", "skillreach/baselines:evals/queries.json"))
        prov = grown["provenance"]
        assert prov["origin"] == "grown"
        assert prov["parent_digest"] == authored
        assert prov["lineage"] == [authored]
        assert prov["grown_for"] == "delta"
        assert prov["generator_model"] == GENERATOR + "-20261101"  # the resolved snapshot, kept
        old_ids = {q["id"] for q in json.loads(queries_file.read_text())["queries"]}
        assert old_ids <= {q["id"] for q in grown["queries"]}  # every authored query kept
        delta_queries = [q for q in grown["queries"] if q["expected_skill"] == "delta"]
        assert len(delta_queries) >= 4
        # every record (and the candidate) is pinned to its own skill's cases of the grown set
        grown_file = tmp_path / "grown.json"
        grown_file.write_text(json.dumps(grown), encoding="utf-8")
        grown_set = verify_query_set(grown_file)
        for path in ("baselines/alpha.json", "baselines/delta.json", "baselines/candidates/beta.json"):
            rec = json.loads(git(repo, "show", f"skillreach/baselines:{path}"))
            assert rec["corpus_version"] == corpus_version(grown_set, rec["skill"]), path
        delta = json.loads(git(repo, "show", "skillreach/baselines:baselines/delta.json"))
        assert delta["metrics"]["activation"]["value"] == 1.0
        assert delta["cases"]["positive"] == len(delta_queries)

        # ---- day 2: watch sees nothing of its own making; the nightly gates the grown corpus
        cfg2 = config_with_generator(world, api, sink, "day2")
        assert run(watch, config_file=str(cfg2))["events"] == []
        night = run(nightly_compliance, config_file=str(cfg2))
        # beta's candidate waits: its stored record (authored set) is gated on those cases, still a breach
        assert night["statuses"] == {"alpha": "ok", "beta": "breach", "delta": "ok", "gamma": "ok"}
        assert [t for t in alerts(sink) if "beta" in t] == []  # the same open verdict: said on day 1
        # the team accepts beta's candidate: the next night says the verdict closed, nothing else
        assert main(["baseline", "accept", "beta", "--baselines", str(repo / "baselines")]) == 0
        capsys.readouterr()
        cfg3 = config_with_generator(world, api, sink, "day3")
        night = run(nightly_compliance, config_file=str(cfg3))
        assert night["statuses"] == {"alpha": "ok", "beta": "ok", "delta": "ok", "gamma": "ok"}
        [closed] = alerts(sink)
        assert closed.startswith("skillreach skillreach.verdict.closed: beta: activation is back within")
        assert agent.generation_requests == 1  # nothing generated twice


def verify_or_load(path: Path) -> str:
    try:
        qs = verify_query_set(path)
    except Exception:
        from skillreach.queries.sets import load_query_set

        qs = load_query_set(path)
    return qs.provenance.digest or qs.compute_digest()
