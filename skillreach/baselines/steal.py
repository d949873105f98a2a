"""A steal fails in its own right: the cases an edited skill took from its neighbours, pooled.

Each neighbour alone may lose too few cases for its own gate to decide (two of five is *inconclusive*),
yet the edited skill took cases from several of them. :func:`take_test` pools, over every neighbour's
positive case probed now and known at the base, the rate at which the edited skill (the *thief*) came
first where the case's own skill was not activated (the record's ``taken_by``): at the base (the
neighbour's base record; 0 for a skill the pull request adds — it did not exist) and now (the check's
probes). A case *moved to* the thief when its take rate rose, *back* when it fell; ties say nothing.

The test is McNemar's for paired binary outcomes, on the discordant cases (b moved to the thief, c
back), one-sided — the question is whether the thief took cases, not whether it changed — with the
**mid-p** value p = P(X > b) + ½·P(X = b), X ~ Binomial(b + c, ½), from the exact binomial distribution
(Fagerland, Lydersen & Laake 2013 recommend the mid-p over the exact conditional p, which is too
conservative at small counts: with four cases taken and none given back the conditional p is 0.0625, the
mid-p 0.031). A take with p < 0.05 is **significant**: the check fails, ``--lenient`` or not, naming the
thief's SKILL.md, each victim and how many of its cases went, and the sentences that would narrow the
thief's description (:func:`boundary_sentences`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import Field

from skillreach.baselines.records import BaselineRecord
from skillreach.models import Frozen

__all__ = ["ALPHA", "TakeTest", "boundary_sentences", "mid_p", "take_test"]

ALPHA = 0.05


def mid_p(moved: int, back: int) -> float:
    """One-sided McNemar mid-p of ``moved`` discordant cases against ``back`` (module docstring)."""
    from scipy.stats import binom

    n = moved + back
    if n == 0:
        return 1.0
    return float(binom.sf(moved, n, 0.5) + 0.5 * binom.pmf(moved, n, 0.5))


class TakeTest(Frozen):
    """The pooled take of one edited (or added) skill."""

    thief: str
    file: str | None = None
    """The thief's SKILL.md, relative to the repository's top."""
    added: bool = False
    """The pull request adds the thief: nothing was taken at the base."""
    cases: int
    """Neighbours' positive cases pooled (probed now, known at the base)."""
    owners: dict[str, int] = Field(default_factory=dict)
    """Neighbour → its cases pooled."""
    taken: dict[str, list[str]] = Field(default_factory=dict)
    """Neighbour → its cases moved to the thief."""
    given_back: dict[str, list[str]] = Field(default_factory=dict)
    """Neighbour → its cases the thief took less often than at the base."""
    p_value: float
    alpha: float = ALPHA
    boundary: list[str] = Field(default_factory=list)
    """Sentences that would narrow the thief's description, one per victim."""

    @property
    def moved(self) -> int:
        return sum(len(v) for v in self.taken.values())

    @property
    def back(self) -> int:
        return sum(len(v) for v in self.given_back.values())

    @property
    def significant(self) -> bool:
        return self.moved > 0 and self.p_value < self.alpha

    def victims(self) -> str:
        """``2 of release-notes' 5, 2 of azd-publish's 5``."""
        return ", ".join(
            f"{len(ids)} of {owner}{chr(39) if owner.endswith('s') else chr(39) + 's'} "
            f"{self.owners.get(owner, len(ids))}"
            for owner, ids in sorted(self.taken.items(), key=lambda p: (-len(p[1]), p[0]))
        )

    def line(self) -> str:
        """``canvas-design takes 4 cases from its neighbours (2 of a's 5, 2 of b's 5; none given back):
        one-sided McNemar mid-p 0.031 — a significant take``."""
        back = f"{self.back} given back" if self.back else "none given back"
        verdict = "a significant take" if self.significant else f"not significant at {self.alpha:g}"
        return (
            f"{self.thief} takes {self.moved} case{'' if self.moved == 1 else 's'} from its neighbours "
            f"({self.victims()}; {back}) of {self.cases} pooled: one-sided McNemar mid-p "
            f"{self.p_value:.3f} — {verdict}"
        )

    def advice(self) -> str:
        where = self.file or f"{self.thief}'s SKILL.md"
        if not self.boundary:
            return f"narrow the description in {where} so that it stops reaching its neighbours' cases"
        return f"narrow the description in {where}: add {' '.join(repr(b) for b in self.boundary)}"


def _take_rate(rows: Iterable[Any], owner: str, thief: str) -> float | None:
    """The share of scored probes of one case (``rows``: its outcome rows) where ``owner`` was not
    activated and ``thief`` came first (``None``: no scored probe)."""
    scored = [r for r in rows if r.error is None]
    if not scored:
        return None
    took = sum(1 for r in scored if owner not in r.scored_inv and r.scored_inv and r.scored_inv[0] == thief)
    return took / len(scored)


def take_test(
    thief: str,
    *,
    base_records: Mapping[str, BaselineRecord],
    outcomes: Iterable[Any],
    digests: Mapping[str, str],
    added: bool = False,
    file: str | None = None,
    texts: Mapping[str, str] | None = None,
    description: tuple[str, str] | None = None,
) -> TakeTest:
    """The pooled take of ``thief`` (module docstring).

    ``outcomes``: the check's probe rows (:class:`~skillreach.scoring.artifact.ProbeOutcome`);
    ``digests``: the content digest of each case probed; ``base_records``: the neighbours' records at
    the base (a case pairs only with the record's case of the same id and content). ``added``: the pull
    request adds ``thief`` (its take at the base is 0 on every case). ``texts`` and ``description``
    (the thief's description at the base and now) shape the boundary sentences.
    """
    by_case: dict[str, list[Any]] = {}
    for row in outcomes:
        if row.truth not in (thief, "", None) and row.kind != "out_of_scope":
            by_case.setdefault(row.query_id, []).append(row)
    owners: Counter[str] = Counter()
    taken: dict[str, list[str]] = {}
    back: dict[str, list[str]] = {}
    for qid, rows in sorted(by_case.items()):
        owner = rows[0].truth
        now = _take_rate(rows, owner, thief)
        if now is None:
            continue
        if added:
            before = 0.0
        else:
            rec = base_records.get(owner)
            case = rec.per_case.get(qid) if rec is not None else None
            known = case is not None and case.role == "positive" and case.digest == digests.get(qid)
            if case is None or not known or not case.activated:
                continue  # not known at the base: it cannot pair
            before = case.taken_by.get(thief, 0) / len(case.activated)
        owners[owner] += 1
        if now > before:
            taken.setdefault(owner, []).append(qid)
        elif now < before:
            back.setdefault(owner, []).append(qid)
    moved, gave = sum(map(len, taken.values())), sum(map(len, back.values()))
    boundary = boundary_sentences(thief, taken, texts or {}, description) if taken else []
    return TakeTest(
        thief=thief, file=file, added=added, cases=sum(owners.values()), owners=dict(owners), taken=taken,
        given_back=back, p_value=mid_p(moved, gave), boundary=boundary,
    )


def boundary_sentences(
    thief: str,
    taken: Mapping[str, list[str]],
    texts: Mapping[str, str],
    description: tuple[str, str] | None,
    *,
    terms: int = 3,
) -> list[str]:
    """Per victim, the sentence that would draw the pair's boundary in the thief's description: ``Not for
    flow fields, particle systems — use algorithmic-art.`` Its topic is the words the taken cases share
    with what the pull request added to the thief's description (else the taken cases' most common
    words)."""
    from skillreach.skills.bm25 import tokenize

    added_words: set[str] = set()
    if description is not None:
        before, after = description
        added_words = set(tokenize(after)) - set(tokenize(before))
    own = set(tokenize(thief.replace("-", " ")))
    out = []
    for victim, ids in sorted(taken.items(), key=lambda p: (-len(p[1]), p[0])):
        counts: Counter[str] = Counter()
        for qid in ids:
            words = (t for t in tokenize(texts.get(qid, "")) if len(t) > 2 and t not in own)
            counts.update(dict.fromkeys(words, 1))
        ranked = sorted(counts.items(), key=lambda p: (-(p[0] in added_words), -p[1], p[0]))
        topic = ", ".join(t for t, _ in ranked[:terms]) or victim.replace("-", " ")
        out.append(f"Not for {topic} — use {victim}.")
    return out
