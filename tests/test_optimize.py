"""``skillreach optimize``: split, rival context, candidates, static filter, the hold-out test, --apply.

The end-to-end tests run the real command against the local Messages API stand-in, which plays both
the agent (routing by the target's description as listed in the ``Skill`` tool) and the LLM proposing
candidates (a forced ``propose_descriptions`` tool call). One scripted candidate routes better on both
splits; another only on the train split.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from skillreach.author.optimize import (
    Candidate,
    heuristic_candidates,
    holdout_decision,
    rewrite_description,
    rival_context,
    split_queries,
    static_problems,
)
from skillreach.cli import main
from skillreach.errors import InputError
from skillreach.models import Query, QueryKind, QuerySet, Skill
from skillreach.queries.sets import seal, write_query_set
from skillreach.skills.discovery import read_frontmatter
from tests.fakes.messages_api import (
    MessagesAPI,
    Reply,
    query_text,
    skill_call,
    text_reply,
    tool_call,
    turn_of,
)
from tests.helpers.staged import CitedWriter, write_skill

CURRENT = "Deploy the web service."
GOOD = "Deploy the web service and roll out releases to the cluster. Use when the user asks to roll out."
TRAIN_ONLY = "Deploy the web service; roll out the releases seen in training."
STEALER = "Deploy the web service, roll out releases, and handle any files, PDFs included."

DEPLOY_BODY = (
    "# deploy\n\nRoll out with a canary first, then the rest of the cluster. Roll back with "
    "`kubectl rollout undo`. Helm charts live in charts/.\n"
)


def _queries() -> QuerySet:
    qs = [
        Query(id=f"d{i:02d}", text=f"roll out release d{i:02d} to the cluster", expected_skill="deploy")
        for i in range(10)
    ]
    qs += [
        Query(
            id=f"c{i:02d}",
            text=f"after the review, roll out c{i:02d}",
            expected_skill="deploy",
            kind=QueryKind.contextual,
        )
        for i in range(5)
    ]
    qs += [
        Query(id=f"p{i:02d}", text=f"merge these pdf files p{i:02d}", expected_skill="pdf") for i in range(5)
    ]
    qs += [
        Query(id=f"o{i:02d}", text=f"tell me a joke o{i:02d}", kind=QueryKind.out_of_scope) for i in range(3)
    ]
    return seal(QuerySet(catalog_id="opt", queries=tuple(qs)), source="test")


@pytest.fixture
def project(tmp_path: Path) -> dict[str, Path]:
    skills = tmp_path / "skills"
    deploy = write_skill(
        skills, "deploy", CURRENT, DEPLOY_BODY, {"license": "MIT", "metadata": {"owner": "ops"}}
    )
    write_skill(skills, "pdf", "Merge, split and fill PDF files.", "# pdf\n\nUse pypdf.\n")
    write_skill(skills, "notes", "Take meeting notes and summarise them.", "# notes\n")
    qpath = tmp_path / "queries.json"
    write_query_set(_queries(), qpath)
    return {"skills": skills, "deploy": deploy, "queries": qpath}


class Agent:
    """Routes by the deploy description it is shown; proposes ``proposal`` when asked for candidates."""

    def __init__(self, proposal: str, holdout: set[str]) -> None:
        self.proposal = proposal
        self.holdout = holdout
        self.asked = 0

    def __call__(self, body: dict[str, Any]) -> Any:
        tools = {t["name"]: t for t in body.get("tools") or []}
        if "propose_descriptions" in tools:
            self.asked += 1
            assert body.get("tool_choice") == {"type": "tool", "name": "propose_descriptions"}
            return Reply(
                [tool_call("propose_descriptions", {"candidates": [{"description": self.proposal}]})]
            )
        if turn_of(body) > 0 or "Skill" not in tools:
            return text_reply()
        listing = tools["Skill"]["description"]
        desc = re.search(r"^- deploy: (.*)$", listing, re.M)
        shown = desc.group(1) if desc else ""
        qid = re.search(r"\b([dcpo]\d\d)\b", query_text(body))
        assert qid is not None
        q = qid.group(1)
        if q.startswith("p"):
            return Reply([skill_call("deploy" if shown == STEALER else "pdf")])
        if shown == STEALER and q[0] in "dc":
            return Reply([skill_call("deploy")])
        if q[0] in "dc":
            if shown == GOOD or (shown == TRAIN_ONLY and q not in self.holdout):
                return Reply([skill_call("deploy")])
            if q in ("d00", "c00"):  # the current description reaches a couple
                return Reply([skill_call("deploy")])
        return text_reply()


def _run(
    project: dict[str, Path], agent: Agent, monkeypatch: pytest.MonkeyPatch, *extra: str
) -> tuple[int, list[dict[str, Any]]]:
    with MessagesAPI(agent, latency=0.0) as api:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        code = main(
            [
                "optimize",
                "deploy",
                "--skills",
                str(project["skills"]),
                "--queries",
                str(project["queries"]),
                "--runtime",
                "anthropic",
                "--model",
                "claude-sonnet-4-5",
                "--llm-model",
                "claude-haiku-4-5",
                "--llm-candidates",
                "1",
                "--max-chars",
                "200",
                "--rounds",
                "2",
                *extra,
            ]
        )
        return code, list(api.requests)


def _holdout() -> set[str]:
    return set(split_queries(_queries().queries, "deploy").holdout)


def test_optimize_picks_the_candidate_better_on_both_splits_and_applies_only_the_description(
    project: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    before = project["deploy"].read_text(encoding="utf-8")
    agent = Agent(GOOD, _holdout())
    code, requests = _run(project, agent, monkeypatch, "--format", "json", "--apply")
    out = capsys.readouterr()
    assert code == 0, out.err
    result = json.loads(out.out)
    assert result["accepted"] is True
    assert result["applied"] is True
    assert result["winner"]["description"] == GOOD
    assert result["winner"]["origin"] == "llm"
    rec = result["decision"]["deltas"]["recall"]
    assert rec["ci95"][0] > 0  # the paired hold-out interval excludes 0
    assert agent.asked == 2  # one LLM request per round
    # the LLM was shown the failures of the current description and the rival context
    ask = next(r for r in requests if any(t["name"] == "propose_descriptions" for t in r.get("tools", [])))
    prompt = ask["messages"][0]["content"]
    assert "roll out release d0" in prompt
    assert "kubectl" in prompt or "canary" in prompt or "helm" in prompt
    after = project["deploy"].read_text(encoding="utf-8")
    old_lines, new_lines = before.splitlines(), after.splitlines()
    assert len(old_lines) == len(new_lines)
    changed = [i for i, (a, b) in enumerate(zip(old_lines, new_lines, strict=True)) if a != b]
    assert len(changed) == 1
    assert new_lines[changed[0]].startswith("description:")
    fm = read_frontmatter(project["deploy"])
    assert fm.data["description"] == GOOD
    assert fm.data["metadata"] == {"owner": "ops"}
    assert not list(project["deploy"].parent.glob(".SKILL.md.*"))  # no temporary file left


def test_optimize_refuses_a_candidate_better_on_the_train_split_only(
    project: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    before = project["deploy"].read_text(encoding="utf-8")
    code, _ = _run(project, Agent(TRAIN_ONLY, _holdout()), monkeypatch, "--apply")
    out = capsys.readouterr()
    assert code == 1
    assert f"train winner (llm): {TRAIN_ONLY}" in out.out
    assert "refused:" in out.out
    assert "not better than the current description" in out.out
    assert "nothing changed" in out.out
    assert project["deploy"].read_text(encoding="utf-8") == before


def test_optimize_refuses_a_candidate_that_steals_a_neighbours_traffic(
    project: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Better recall everywhere, but the pdf skill's own queries now land on deploy: it loses on the
    train split already, and nothing changes."""
    before = project["deploy"].read_text(encoding="utf-8")
    code, _ = _run(project, Agent(STEALER, _holdout()), monkeypatch, "--apply", "--format", "json")
    result = json.loads(capsys.readouterr().out)
    assert code == 1
    assert result["winner"] is None
    scored = {c["description"]: c for r in result["rounds"] for c in r["candidates"]}
    stealer = scored[STEALER]
    assert stealer["deltas"]["recall"]["mean"] > 0.8  # it does reach deploy's queries
    assert stealer["deltas"]["rival_recall"]["mean"] == pytest.approx(-1.0)  # every train pdf query lost
    assert stealer["deltas"]["false_activation"]["mean"] > 0
    assert stealer["score"] < 0
    assert project["deploy"].read_text(encoding="utf-8") == before


def test_optimize_format_diff_and_max_cost(
    project: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    before = project["deploy"].read_text(encoding="utf-8")
    code, _ = _run(project, Agent(GOOD, _holdout()), monkeypatch, "--format", "diff")
    out = capsys.readouterr()
    assert code == 0, out.err
    assert out.out.startswith("--- a/")
    assert f"-description: {CURRENT}" in out.out
    assert f"+description: {GOOD}" in out.out
    assert project["deploy"].read_text(encoding="utf-8") == before  # no --apply: nothing written
    code, requests = _run(project, Agent(GOOD, _holdout()), monkeypatch, "--max-cost", "0.0001")
    err = capsys.readouterr().err
    assert code == 1
    assert "over --max-cost $0.00" in err
    assert "Traceback" not in err
    assert requests == []  # refused before any request


def test_optimize_bad_input(project: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    base = ["optimize", "--skills", str(project["skills"]), "--queries", str(project["queries"])]
    assert main([*base[:1], "nosuch", *base[1:]]) == 2
    assert "'nosuch'" in capsys.readouterr().err
    assert main([*base[:1], "deploy", *base[1:], "--format", "yaml"]) == 2
    assert "--format 'yaml'" in capsys.readouterr().err


# ------------------------------------------------------------------------------------ pure functions


def test_split_is_seeded_stratified_and_disjoint() -> None:
    qs = _queries().queries
    a, b = split_queries(qs, "deploy", seed=3), split_queries(qs, "deploy", seed=3)
    assert a == b
    assert not set(a.train) & set(a.holdout)
    assert set(a.train) | set(a.holdout) == {q.id for q in qs}
    held = {q.id: q for q in qs if q.id in a.holdout}
    # 20 % of each stratum, at least one: 2 of 10 implicit deploy, 1 of 5 contextual, 1 of 5 pdf, 1 of 3 oos
    assert sorted(q.id[0] for q in held.values()) == ["c", "d", "d", "o", "p"]
    assert split_queries(qs, "deploy", seed=4) != a
    with pytest.raises(InputError):
        split_queries(qs, "deploy", holdout=1.0)


def _skills() -> list[Skill]:
    return [
        Skill(
            name="deploy",
            description="Deploy the web service to production with the standard pipeline and checks.",
            body=DEPLOY_BODY,
        ),
        Skill(name="release-notes", description="Web service notes.", body="# n\n"),
        Skill(name="pdf", description="Merge, split and fill PDF files.", body="# p\n"),
    ]


def test_rival_context_names_rivals_contested_and_unclaimed_terms() -> None:
    ctx = rival_context(_skills(), "deploy")
    assert ctx.rivals[0] == "release-notes"
    assert ctx.contested["release-notes"] == ["web", "service"]  # the shorter rival out-scores them
    assert {"charts", "canary", "cluster"} <= set(ctx.unclaimed)  # body terms, most frequent first
    assert "web" not in ctx.unclaimed  # claimed by descriptions already


def test_heuristic_candidates() -> None:
    ctx = rival_context(_skills(), "deploy")
    first = heuristic_candidates("Deploy the web service to production.", ctx, 1)
    origins = [c.origin for c in first]
    assert origins == ["claim-terms", "contrast", "use-when", "contrast-only"]
    assert "— use release-notes." in first[1].description
    assert first[3].description.startswith("Not for ")
    later = heuristic_candidates("Deploy the web service to production.", ctx, 2)
    assert "contrast-only" not in [c.origin for c in later]
    for c in first:
        assert (
            static_problems(c.description, target="deploy", known=[s.name for s in _skills()], max_chars=300)
            == []
        )


def test_static_filter() -> None:
    known = ["deploy", "pdf"]
    assert (
        static_problems("Deploy it. Not for PDFs — use pdf.", target="deploy", known=known, max_chars=100)
        == []
    )
    probs = static_problems(
        "Deploy it. Not for docs — use doc-writer.", target="deploy", known=known, max_chars=100
    )
    assert any("doc-writer" in p for p in probs)
    assert any(
        "over the budget" in p for p in static_problems("x" * 60, target="deploy", known=known, max_chars=50)
    )
    assert any(
        "placeholder" in p
        for p in static_problems("Deploy TODO the service.", target="deploy", known=known, max_chars=100)
    )
    assert any(
        "short-description" in p
        for p in static_problems("Deploy.", target="deploy", known=known, max_chars=100)
    )


def test_static_filter_keeps_the_catalog_listing_within_its_budget() -> None:
    text = "Deploy the web service to production."
    line = len(f"- deploy: {text}\n")
    fits = static_problems(
        text, target="deploy", known=[], max_chars=100, listing_others=60, listing_budget=60 + line
    )
    assert fits == []
    over = static_problems(
        text, target="deploy", known=[], max_chars=100, listing_others=61, listing_budget=60 + line
    )
    assert len(over) == 1
    assert "listing would be" in over[0]


def test_holdout_decision_requires_a_paired_win_and_neighbours_not_worse() -> None:
    from skillreach.author.optimize import PairedDelta

    def pd(mean: float, lo: float, hi: float) -> PairedDelta:
        return PairedDelta(metric="m", k=5, mean=mean, ci95=(lo, hi), current=0.5, candidate=0.5 + mean)

    win = pd(0.4, 0.1, 0.7)
    ok = holdout_decision(
        {"recall": win, "false_activation": pd(0.0, -0.1, 0.1), "rival_recall": None},
        gate_false_activation=0.03,
        gate_activation=-0.05,
    )
    assert ok.accepted
    steals = holdout_decision(
        {"recall": win, "false_activation": None, "rival_recall": pd(-0.5, -0.8, -0.2)},
        gate_false_activation=0.03,
        gate_activation=-0.05,
    )
    assert not steals.accepted
    assert "other skills' recall" in steals.reasons[0]
    noisy = holdout_decision(
        {"recall": pd(0.2, -0.1, 0.5)}, gate_false_activation=0.03, gate_activation=-0.05
    )
    assert not noisy.accepted


def test_rewrite_description_handles_block_scalars_and_keeps_everything_else(tmp_path: Path) -> None:
    path = tmp_path / "SKILL.md"
    original = (
        "---\nname: deploy\ndescription: >\n  Deploy the web\n  service.\n# a comment\nlicense: MIT\n---\n"
        "# deploy\n\ndescription: not frontmatter\n"
    )
    path.write_text(original, encoding="utf-8")
    old, new = rewrite_description(path, "Deploy: the web service, with a colon.")
    assert old == original
    assert new == (
        "---\nname: deploy\ndescription: 'Deploy: the web service, with a colon.'\n"
        "# a comment\nlicense: MIT\n---\n# deploy\n\ndescription: not frontmatter\n"
    )
    assert read_frontmatter(path).data == {
        "name": "deploy",
        "description": "Deploy: the web service, with a colon.",
        "license": "MIT",
    }


def test_candidate_from_llm_reply() -> None:
    from skillreach.author.optimize import parse_llm_candidates

    got = parse_llm_candidates(
        {"candidates": [{"description": "  Deploy\n the service. "}, {"x": 1}, "junk"]}
    )
    assert got == [Candidate(description="Deploy the service.", origin="llm")]
    assert parse_llm_candidates("not a dict") == []


def test_optimize_generates_its_queries_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No query set yet: ``--generate`` runs the generation flow for the skill (provenance kept), then
    optimises on it; a second run reuses the file. The stand-in writes cited drafts (as in
    tests/helpers/staged.py) and routes nothing, so nothing beats the current description."""
    from skillreach.queries.sets import verify_query_set
    from tests.helpers.generation import write_skills

    skills = write_skills(tmp_path / "skills")
    writer = CitedWriter()

    def respond(body: dict[str, Any]) -> Any:
        tools = {t["name"] for t in body.get("tools") or []}
        if "propose_descriptions" in tools:
            return Reply([tool_call("propose_descriptions", {"candidates": []})])
        content = body["messages"][0]["content"]
        if isinstance(content, str) and "<skill_body id=" in content:
            return writer(body)
        return text_reply()

    out = tmp_path / "generated.json"
    args = ["optimize", "pdf-forms", "--skills", str(skills), "--queries", str(out), "--generate"]
    args += ["--runtime", "anthropic", "--model", "claude-sonnet-4-5", "--llm-model", "claude-sonnet-5-5"]
    args += ["--rounds", "1", "--format", "json"]
    with MessagesAPI(respond, latency=0.0) as api:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        code = main(args)
        captured = capsys.readouterr()
        assert code == 1, captured.err  # nothing routes better: nothing changed
        asked = writer.asked
        assert asked == 1  # one generation request: the target alone
        qs = verify_query_set(out)
        assert qs.provenance.origin == "generated"
        assert qs.provenance.generator_model is not None
        result = json.loads(captured.out)
        assert set(result["split"]["train"]) | set(result["split"]["holdout"]) == {q.id for q in qs.queries}
        assert result["accepted"] is False
        assert "generated" in captured.err
        assert main(args) == 1  # the file exists: reused, not generated again
        capsys.readouterr()
        assert writer.asked == asked
    assert main(["optimize", "pdf-forms", "--skills", str(skills)]) == 2
    assert "--queries FILE, or --generate" in capsys.readouterr().err
