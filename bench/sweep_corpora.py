"""A capacity sweep over the shared corpora (../shared/corpora), offline: prints the curve's figures.

The query set is imported at run time from the corpora's labelled trigger sets (CopilotAtelier
should-trigger files, obra/superpowers and openai notion labels, dtsong routing cases), merged with
prefixed ids and sealed into ``OUT/labelled-queries.json`` (nothing of the corpora is copied into the
project). The sweep runs each size as an ordinary study, with

- ``--runtime keyword`` (default): the offline keyword runtime, or
- ``--runtime messages-api``: the ``anthropic`` runtime and the official SDK against the local Messages
  API stand-in (``tests/fakes/messages_api.py``), whose "model" invokes the listed skill that BM25 ranks
  first for the request (none when nothing matches); its usage is the stand-in's honest token count,
  so the prompt tokens per size are measured, not estimated.

    .venv/bin/python bench/sweep_corpora.py [--runtime keyword|messages-api] [--out DIR]
        [--anchor NAME ...] [--max 240] [--points 7] [--design corpus|target] [--target NAME]
        [--metric f1|pass_rate]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CORPORA = REPO.parent / "shared" / "corpora"
DEFAULT_ANCHORS = [
    "brand-logo-system",
    "pester-patterns",
    "skill-creator",
    "sampler-framework",
    "dbt-transforms",
]


def labelled_queries(out: Path) -> Path:
    """One sealed query set from the corpora's labelled sets (ids prefixed by their origin)."""
    from skillreach.models import QuerySet
    from skillreach.queries.importers import import_queries
    from skillreach.queries.sets import seal, write_query_set
    from skillreach.skills.discovery import load_skills

    names = [s.name for s in load_skills([CORPORA], on_problem=lambda _: None)]
    labelled = CORPORA / "labelled"
    sources: list[tuple[Path, str, str | None]] = [
        (p, "should-trigger", p.name.split(".")[1])
        for p in sorted((labelled / "raandree__CopilotAtelier").glob("trigger-queries.*.json"))
        if p.name != "trigger-queries.sample.json"
    ]
    sources += [
        (labelled / "obra__superpowers" / "labels.jsonl", "labels", None),
        (labelled / "openai__skills-notion" / "labels.jsonl", "labels", None),
        (labelled / "dtsong__data-engineering-skills" / "cases.jsonl", "cases", None),
    ]
    queries = []
    seen: set[str] = set()
    for path, fmt, skill in sources:
        imported = import_queries(path, fmt=fmt, skill=skill, catalog=names).query_set
        tag = path.parent.name.split("__")[0][:6] + (f"-{skill}" if skill else "")
        for q in imported.queries:
            qid = f"{tag}:{q.id}"
            if qid not in seen:
                seen.add(qid)
                queries.append(q.model_copy(update={"id": qid}))
    sealed = seal(QuerySet(catalog_id="all", queries=tuple(queries)), source="shared corpora labelled sets")
    return write_query_set(sealed, out / "labelled-queries.json")


def bm25_responder(body: dict[str, Any]) -> Any:
    """The stand-in's model: the listed skill BM25 ranks first for the request, once; else an answer."""
    from skillreach.models import Skill
    from skillreach.skills.bm25 import rank
    from tests.fakes.messages_api import query_text, skill_call, turn_of

    if turn_of(body) > 0:
        return "Done."
    tool = next((t for t in body.get("tools", []) if t.get("name") == "Skill"), None)
    if tool is None:
        return "No skills here."
    listing = tool["description"].split("Available skills:\n", 1)[-1]
    skills = []
    for line in listing.splitlines():
        if line.startswith("- ") and ": " in line:
            name, desc = line[2:].split(": ", 1)
            skills.append(Skill(name=name, description=desc))
    ranked = rank(query_text(body), skills)
    if not ranked or ranked[0][1] <= 0:
        return "I can answer that directly."
    return [skill_call(ranked[0][0])]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runtime", choices=("keyword", "messages-api"), default="keyword")
    parser.add_argument("--out", type=Path, default=Path("runs/bench-sweep"))
    parser.add_argument("--anchor", action="append", default=None)
    parser.add_argument("--max", type=int, default=240)
    parser.add_argument("--points", type=int, default=7)
    parser.add_argument("--design", choices=("corpus", "target"), default="corpus")
    parser.add_argument("--target", default=None)
    parser.add_argument("--metric", choices=("f1", "pass_rate"), default="f1")
    args = parser.parse_args()
    if not CORPORA.is_dir():
        print(f"no corpora at {CORPORA}; nothing to measure", file=sys.stderr)
        return 2
    from skillreach.author.sweep import SweepConfig, log_sizes
    from skillreach.cli.run_cmds import run_study  # noqa: F401 - sets Prefect's offline env defaults
    from skillreach.cli.sweep_cmds import run_sweep
    from skillreach.study import StudyConfig

    args.out.mkdir(parents=True, exist_ok=True)
    queries = labelled_queries(args.out)
    runtime, model = ("keyword", None) if args.runtime == "keyword" else ("anthropic", "claude-sonnet-4-6")
    base = StudyConfig(
        skills=(CORPORA,),
        queries=queries,
        runtime=runtime,
        model=model,
        home=args.out / "home",
        gate=False,
        concurrency=8,
    )
    anchors = () if args.design == "target" else tuple(args.anchor or DEFAULT_ANCHORS)
    config = SweepConfig(
        study=base,
        out=args.out / f"sweep-{args.runtime}-{args.design}",
        sizes=tuple(log_sizes(args.max, args.points)),
        design=args.design,
        metric=args.metric,
        target=args.target,
        anchors=anchors,
        stop_below=None,
    )
    if args.runtime == "messages-api":
        from tests.fakes.messages_api import MessagesAPI

        with MessagesAPI(bm25_responder) as api:
            os.environ["ANTHROPIC_BASE_URL"] = api.base_url
            os.environ.setdefault("ANTHROPIC_API_KEY", "test-key-for-the-local-stand-in")
            result = run_sweep(config, use_prefect=False)
    else:
        result = run_sweep(config, use_prefect=False)
    print(
        f"sweep {result.design} · {result.runtime} · anchors {', '.join(result.anchors)} · "
        f"{result.queries} queries · core {result.core} · corpus {result.corpus}"
    )
    print(
        f"{'size':>5} {'pass rate':>22} {'F1':>22} {'recall':>7} {'precision':>9} "
        f"{'abstain':>7} {'tokens':>7}"
    )
    for p in result.points:
        ci = f"[{p.f1_ci[0]:.3f}, {p.f1_ci[1]:.3f}]" if p.f1_ci else ""
        pr = f"[{p.pass_rate_ci[0]:.3f}, {p.pass_rate_ci[1]:.3f}]" if p.pass_rate_ci else ""
        print(
            f"{p.size:>5} {p.pass_rate or 0:>6.3f} {pr:>15} {p.f1 or 0:>6.3f} {ci:>15} {p.recall or 0:>7.3f} "
            f"{p.precision or 0:>9.3f} {p.abstention or 0:>7.3f} {p.prompt_tokens:>7.0f}"
            f"{'' if p.prompt_tokens_measured else '*'}"
        )
    a = result.analysis
    print(
        f"knee: {a.knee.size} ({'accepted' if a.knee.accepted else 'not accepted'}: {a.knee.reason}); "
        f"noise floor {a.noise_floor}"
    )
    for s in a.sla:
        said = "none" if s.size is None else (f">= {s.size:.0f}" if s.beyond else f"{s.size:.1f}")
        print(f"largest catalog with {a.metric} >= {s.level:.2f}: {said}")
    print(f"report: {result.out}/report.html")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
