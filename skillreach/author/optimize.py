"""Improve one skill's description with evidence (``skillreach optimize SKILL``). Pure: no Prefect, no
network; the flow (``flows/optimize.py``) probes and asks the LLM through tasks.

1. **Split** (:func:`split_queries`): the query set, seeded, into a train and a hold-out part (default
   80 / 20), stratified by kind (and by whether a query expects the target), so each part has each.
2. **Rival context** (:func:`rival_context`): the target's nearest BM25 rivals, the terms of the
   target's description that a rival's description out-scores (contested), and the distinctive body
   terms that no skill's description claims yet (unclaimed).
3. **Candidates**: from an LLM (shown the context and the last round's misses and false activations;
   structured JSON), plus heuristic rewrites that need none (:func:`heuristic_candidates`): claim the
   unclaimed terms; a contrastive "Not for … — use <rival>." clause; a "Use when the user …" framing;
   in round 1 the contrastive disclaimer alone is one of them.
4. **Static filter** (:func:`static_problems`) before any probe: the lint rules on descriptions, a
   length budget (``--max-chars``, default the current length + 20 %), the catalog listing's budget
   (``listing_budget_chars``, the tokens every description shares), no unknown skill names, no
   placeholders.
5. **Train**: every candidate probed on the train split, which holds the other skills' own queries
   too; scored by the paired Δ recall minus Δ false activation against the current description, and a
   candidate whose neighbours lose recall on their own queries (it steals their traffic) is penalised
   (:func:`train_score`). Hill-climb over rounds.
6. **Hold-out** (:func:`holdout_decision`): the winner must beat the current description on the hold-out
   split — the paired 95 % t interval of Δ recall above 0 — with false activation and the rivals'
   recall not breaching their gates. Otherwise nothing changes.
7. **Apply** (:func:`rewrite_description`): the frontmatter description alone is replaced, atomically.
"""

from __future__ import annotations

import difflib
import math
import os
import random
import re
import tempfile
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict

from skillreach.baselines.gates import Verdict, gate_verdict
from skillreach.errors import InputError
from skillreach.models import Query, Skill
from skillreach.scoring.intervals import paired_t_interval
from skillreach.skills.bm25 import BM25Index, rivals, skill_text, tokenize
from skillreach.skills.discovery import read_frontmatter
from skillreach.skills.lint import description_findings, listing_text

__all__ = [
    "Candidate",
    "Decision",
    "Evaluation",
    "OptimizeResult",
    "PairedDelta",
    "RivalContext",
    "RoundLog",
    "Split",
    "TrainScore",
    "evaluate",
    "heuristic_candidates",
    "holdout_decision",
    "rewrite_description",
    "rival_context",
    "split_queries",
    "static_problems",
    "train_score",
    "unified_diff",
]

Origin = Literal["current", "llm", "claim-terms", "contrast", "use-when", "contrast-only"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# --------------------------------------------------------------------------------------------- split


class Split(_Frozen):
    train: tuple[str, ...]
    holdout: tuple[str, ...]


def split_queries(queries: Sequence[Query], target: str, *, seed: int = 0, holdout: float = 0.2) -> Split:
    """A seeded train / hold-out split of query ids, stratified by (kind, expects the target): each
    stratum of n ≥ 2 queries puts round(n × holdout) of them (at least 1) in the hold-out."""
    if not 0 < holdout < 1:
        raise InputError(f"--holdout {holdout}: must lie strictly between 0 and 1")
    strata: dict[tuple[str, bool], list[str]] = {}
    for q in queries:
        strata.setdefault((str(q.kind), q.expected_skill == target), []).append(q.id)
    rng = random.Random(seed)
    train: list[str] = []
    held: list[str] = []
    for key in sorted(strata):
        ids = sorted(strata[key])
        rng.shuffle(ids)
        n_hold = max(1, round(len(ids) * holdout)) if len(ids) >= 2 else 0
        held += ids[:n_hold]
        train += ids[n_hold:]
    return Split(train=tuple(sorted(train)), holdout=tuple(sorted(held)))


# ------------------------------------------------------------------------------------ rival context


class RivalContext(_Frozen):
    target: str
    rivals: list[str]
    """Nearest rivals by asymmetric BM25 of the target's name + description, best first."""
    contested: dict[str, list[str]]
    """Per rival: terms of the target's description on which the rival's description scores higher."""
    unclaimed: list[str]
    """Distinctive terms of the target's body that no skill's name or description contains."""


def rival_context(skills: Sequence[Skill], target: str, *, k: int = 3, terms: int = 6) -> RivalContext:
    by_name = {s.name: s for s in skills}
    if target not in by_name:
        raise InputError(f"skill {target!r}: not among the skills found; pass --skills DIR")
    near = rivals(list(skills), top=k, only={target})
    rival_names = [r.name for r in near[0].rivals] if near else []
    docs = [skill_text(s) for s in skills]
    index = BM25Index(docs)
    names = [s.name for s in skills]
    ti = names.index(target)
    own_terms = list(dict.fromkeys(tokenize(skill_text(by_name[target]))))
    contested: dict[str, list[str]] = {}
    for rival in rival_names:
        ri = names.index(rival)
        lost = [t for t in own_terms if index.scores([t])[ri] > index.scores([t])[ti]]
        if lost:
            contested[rival] = lost[:terms]
    claimed = {t for d in docs for t in tokenize(d)}
    body = Counter(t for t in tokenize(by_name[target].body) if t not in claimed and len(t) > 2)
    unclaimed = [t for t, _ in sorted(body.items(), key=lambda p: (-p[1], p[0]))][:terms]
    return RivalContext(target=target, rivals=rival_names, contested=contested, unclaimed=unclaimed)


# --------------------------------------------------------------------------------------- candidates


class Candidate(_Frozen):
    description: str
    origin: Origin
    note: str = ""


def _sentence(text: str) -> str:
    text = text.strip()
    return text if text.endswith((".", "!", "?")) else text + "."


def heuristic_candidates(current: str, ctx: RivalContext, round_no: int) -> list[Candidate]:
    """Rewrites that need no LLM (module docstring, step 3), de-duplicated, never the current text."""
    base = _sentence(current)
    out: list[Candidate] = []
    if ctx.unclaimed:
        out.append(
            Candidate(
                description=f"{base} Covers {', '.join(ctx.unclaimed[:3])}.",
                origin="claim-terms",
                note="claims body terms no description uses",
            )
        )
    contrast = ""
    if ctx.rivals:
        rival = ctx.rivals[0]
        topic = ", ".join(ctx.contested.get(rival, [])[:2]) or rival.replace("-", " ")
        contrast = f"Not for {topic} — use {rival}."
        out.append(Candidate(description=f"{base} {contrast}", origin="contrast", note=f"disclaims {rival}"))
    if "use when" not in current.lower():
        what = ", ".join(ctx.unclaimed[:2]) or re.sub(r"[.!?]+$", "", current.strip()).lower()
        out.append(
            Candidate(
                description=f"{base} Use when the user asks about {what}.",
                origin="use-when",
                note="a 'Use when the user …' framing",
            )
        )
    if round_no == 1 and contrast:
        out.append(Candidate(description=contrast, origin="contrast-only", note="the disclaimer alone"))
    seen = {current.strip()}
    unique = []
    for c in out:
        if c.description.strip() not in seen:
            seen.add(c.description.strip())
            unique.append(c)
    return unique


_SKILL_REF = re.compile(
    r"\buse\s+(?:the\s+)?[`'\"]?([a-z0-9][a-z0-9-]*)[`'\"]?(?=\s+skill\b|\s*[.;,)]|\s*$)", re.IGNORECASE
)
"""A skill named as a referral: ``use pdf.``, ``use `pdf-tools` ``, ``use the pdf skill``."""
_NOT_NAMES = frozenset({"it", "this", "that", "them", "these", "those", "instead", "one", "another"})


def static_problems(
    text: str,
    *,
    target: str,
    known: Iterable[str],
    max_chars: int,
    listing_others: int = 0,
    listing_budget: int | None = None,
) -> list[str]:
    """Why a candidate may not be probed (empty: it may): lint rules, length budget, unknown skill
    names (a referral ``use <name>.`` to no skill of the catalog), placeholders, and the token budget of
    the whole catalog listing (``listing_others``: the characters of the other skills' listing lines)."""
    problems: list[str] = []
    problems += [f"lint {f.code}: {f.message}" for f in description_findings(text, "candidate")]
    if len(text) > max_chars:
        problems.append(f"{len(text)} characters, over the budget of {max_chars} (--max-chars)")
    listing = listing_others + len(listing_text([(target, text)]))
    if listing_budget is not None and listing > listing_budget:
        problems.append(
            f"the catalog listing would be {listing} characters, over its budget of {listing_budget} "
            "(listing_budget_chars): every description shares it"
        )
    names = set(known) | {target}
    referred = {m.group(1).lower() for m in _SKILL_REF.finditer(text)} - _NOT_NAMES
    unknown = sorted(n for n in referred if n not in names)
    if unknown:
        problems.append(f"names skills that do not exist: {', '.join(unknown)}")
    return problems


# --------------------------------------------------------------------------------------- evaluation


class Evaluation(_Frozen):
    """Per query id: the share of scored probes in which ``skill`` was invoked (after the query's
    acceptable skills are removed), for the target, and for each other skill on its own queries."""

    target: dict[str, float]
    rival: dict[str, float]
    probes: int
    errors: int


def evaluate(
    records: Iterable[Any],
    queries: Mapping[str, Query],
    target: str,
    rival_names: Iterable[str] | None = None,
) -> Evaluation:
    """Evaluation of one description from its probe records (``query_id``, ``invoked``, ``error``).
    ``rival`` covers the queries of ``rival_names`` (default: of every other skill in the set)."""
    rivals_set = set(rival_names) if rival_names is not None else None
    hits: dict[str, list[int]] = {}
    rhits: dict[str, list[int]] = {}
    probes = errors = 0
    for r in records:
        probes += 1
        if r.error is not None:
            errors += 1
            continue
        q = queries[r.query_id]
        scored = [s for s in r.invoked if s not in q.acceptable_skills]
        hits.setdefault(q.id, []).append(int(target in scored))
        neighbour = q.expected_skill is not None and q.expected_skill != target
        if neighbour and (rivals_set is None or q.expected_skill in rivals_set):
            rhits.setdefault(q.id, []).append(int(q.expected_skill in scored))
    return Evaluation(
        target={k: sum(v) / len(v) for k, v in hits.items()},
        rival={k: sum(v) / len(v) for k, v in rhits.items()},
        probes=probes,
        errors=errors,
    )


class PairedDelta(_Frozen):
    metric: str
    k: int
    mean: float
    ci95: tuple[float, float]
    current: float
    candidate: float


def _paired(
    metric: str, cur: Mapping[str, float], cand: Mapping[str, float], ids: Iterable[str]
) -> PairedDelta | None:
    both = [i for i in ids if i in cur and i in cand]
    if not both:
        return None
    diffs = [cand[i] - cur[i] for i in both]
    mean, lo, hi = paired_t_interval(diffs)
    return PairedDelta(
        metric=metric,
        k=len(both),
        mean=mean,
        ci95=(max(-1.0, lo), min(1.0, hi)),
        current=sum(cur[i] for i in both) / len(both),
        candidate=sum(cand[i] for i in both) / len(both),
    )


def deltas(
    current: Evaluation, candidate: Evaluation, queries: Mapping[str, Query], target: str, ids: Iterable[str]
) -> dict[str, PairedDelta | None]:
    """Paired Δ recall (target's queries), Δ false activation (the others), Δ rival recall (rivals' own)."""
    ids = list(ids)
    pos = [i for i in ids if queries[i].expected_skill == target]
    neg = [i for i in ids if queries[i].expected_skill != target]
    return {
        "recall": _paired("recall", current.target, candidate.target, pos),
        "false_activation": _paired("false_activation", current.target, candidate.target, neg),
        "rival_recall": _paired("rival_recall", current.rival, candidate.rival, neg),
    }


class TrainScore(_Frozen):
    description: str
    origin: Origin
    score: float
    deltas: dict[str, PairedDelta | None]


def train_score(cand: Candidate, d: Mapping[str, PairedDelta | None]) -> TrainScore:
    """Δ recall − Δ false activation, plus any fall of the rivals' recall (a candidate that steals a
    neighbour's traffic loses)."""

    def mean(name: str) -> float:
        got = d.get(name)
        return got.mean if got is not None else 0.0

    score = mean("recall") - mean("false_activation") + min(0.0, mean("rival_recall"))
    return TrainScore(description=cand.description, origin=cand.origin, score=score, deltas=dict(d))


class Decision(_Frozen):
    accepted: bool
    reasons: list[str]
    deltas: dict[str, PairedDelta | None]


class RoundLog(_Frozen):
    round: int
    candidates: list[TrainScore]
    refused: list[tuple[str, list[str]]]
    """(description, why) of candidates the static filter stopped before any probe."""
    best_so_far: str


class OptimizeResult(_Frozen):
    """What ``optimize`` found. ``winner`` is None when no candidate beat the current description on the
    train split; ``decision`` is the hold-out test of the winner (None without a winner)."""

    skill: str
    path: str
    current: str
    split: Split
    rounds: list[RoundLog]
    winner: TrainScore | None
    decision: Decision | None
    estimate_usd: float | None
    spent_usd: float
    probes: int

    @property
    def accepted(self) -> bool:
        return self.winner is not None and self.decision is not None and self.decision.accepted


def holdout_decision(
    d: Mapping[str, PairedDelta | None], *, gate_false_activation: float, gate_activation: float
) -> Decision:
    """The hold-out test (module docstring, step 6)."""
    reasons: list[str] = []
    rec = d.get("recall")
    if rec is None:
        reasons.append("the hold-out split has no query of the skill; nothing to test on")
    elif rec.ci95[0] <= 0:
        reasons.append(
            f"recall on the hold-out split: Δ {rec.mean:+.3f}, 95% CI "
            f"[{rec.ci95[0]:+.3f}, {rec.ci95[1]:+.3f}] over {rec.k} queries does not exclude 0: "
            "not better than the current description"
        )
    fa = d.get("false_activation")
    if fa is not None:
        v = gate_verdict("false_activation", gate_false_activation, fa.mean, *fa.ci95)
        if v is not Verdict.ok:
            reasons.append(f"false activation on the hold-out split rises by {fa.mean:+.3f} ({v.value})")
    rv = d.get("rival_recall")
    if rv is not None:
        v = gate_verdict("activation", gate_activation, rv.mean, *rv.ci95)
        if v is not Verdict.ok:
            reasons.append(
                f"the other skills' recall on the hold-out split falls by {rv.mean:+.3f} ({v.value})"
            )
    return Decision(accepted=not reasons, reasons=reasons, deltas=dict(d))


# -------------------------------------------------------------------------------------------- apply


def rewrite_description(path: str | os.PathLike[str], new: str, *, write: bool = True) -> tuple[str, str]:
    """Replace the frontmatter ``description`` of a SKILL.md with ``new``; nothing else moves. Returns
    (old text, new text); with ``write`` the file is replaced atomically (temporary file, rename)."""
    path = Path(path)
    fm = read_frontmatter(path)
    if "description" not in fm.key_lines:
        raise InputError(f"{path}: no description key in the frontmatter to rewrite")
    old = path.read_text(encoding="utf-8")
    lines = old.splitlines(keepends=True)
    start = fm.key_lines["description"] - 1
    end = start + 1  # the value goes on over indented (and blank) lines: a block scalar or a wrapped one
    while end < len(lines) and (lines[end][:1] in (" ", "\t") or not lines[end].strip()):
        end += 1
    while end > start + 1 and not lines[end - 1].strip():
        end -= 1  # blank lines before the next key are not the value's
    eol = "\r\n" if lines[start].endswith("\r\n") else "\n"
    dumped = yaml.safe_dump({"description": new}, allow_unicode=True, width=math.inf, sort_keys=False)
    replacement = dumped.rstrip("\n").replace("\n", eol) + eol
    text = "".join(lines[:start]) + replacement + "".join(lines[end:])
    if write:
        fd, tmp = tempfile.mkstemp(prefix=".SKILL.md.", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
                fh.write(text)
            check = read_frontmatter(tmp)
            if check.data.get("description") != new or {
                k: v for k, v in check.data.items() if k != "description"
            } != {k: v for k, v in fm.data.items() if k != "description"}:
                raise InputError(f"{path}: the rewritten frontmatter does not read back; nothing changed")
            os.chmod(tmp, path.stat().st_mode & 0o777)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return old, text


def unified_diff(path: str | os.PathLike[str], old: str, new: str) -> str:
    shown = str(path)
    return "".join(
        difflib.unified_diff(
            old.splitlines(keepends=True), new.splitlines(keepends=True), f"a/{shown}", f"b/{shown}"
        )
    )


# ---------------------------------------------------------------------------------------------- LLM

TEMPLATE_DIR = Path(__file__).resolve().parents[1] / "templates"
PROPOSE_TOOL: dict[str, Any] = {
    "name": "propose_descriptions",
    "description": "Return the proposed skill descriptions.",
    "input_schema": {
        "type": "object",
        "properties": {
            "candidates": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"description": {"type": "string"}, "rationale": {"type": "string"}},
                    "required": ["description"],
                },
            }
        },
        "required": ["candidates"],
    },
}
SYSTEM = "You improve how Agent Skills are described so that agents route requests to the right skill."


def llm_prompt(
    current: str,
    ctx: RivalContext,
    skills: Sequence[Skill],
    *,
    misses: Sequence[str] = (),
    false_activations: Sequence[str] = (),
    n: int = 3,
    max_chars: int = 1024,
) -> str:
    """The user message asking for ``n`` candidates (``skillreach/templates/optimize_user.j2``)."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    by_name = {s.name: s for s in skills}
    rows = [
        {"name": r, "description": by_name[r].description, "contested": ctx.contested.get(r, [])}
        for r in ctx.rivals
        if r in by_name
    ]
    return env.get_template("optimize_user.j2").render(
        target=ctx.target,
        current=current,
        rivals=rows,
        unclaimed=ctx.unclaimed,
        misses=list(misses)[:10],
        false_activations=list(false_activations)[:10],
        n=n,
        max_chars=max_chars,
    )


def parse_llm_candidates(tool_input: Any) -> list[Candidate]:
    """The candidates of a ``propose_descriptions`` tool call (malformed entries are dropped)."""
    items = tool_input.get("candidates") if isinstance(tool_input, Mapping) else None
    out: list[Candidate] = []
    for item in items if isinstance(items, list) else []:
        text = item.get("description") if isinstance(item, Mapping) else None
        if isinstance(text, str) and text.strip():
            note = item.get("rationale") if isinstance(item.get("rationale"), str) else ""
            out.append(Candidate(description=" ".join(text.split()), origin="llm", note=note[:200]))
    return out
