"""The ``optimize-description`` flow: rounds of candidates on the train split, then the hold-out test.

Thin: it composes :mod:`skillreach.tasks.optimize` and branches on their results.
"""

from __future__ import annotations

from prefect import flow

from skillreach.author.optimize import OptimizeResult, RoundLog, TrainScore
from skillreach.flows._compose import call
from skillreach.tasks.optimize import (
    OptimizeOptions,
    decide_holdout,
    prepare_optimize,
    probe_descriptions,
    propose_candidates,
    select_best,
)

__all__ = ["optimize_description"]


@flow(name="optimize-description", log_prints=False)
async def optimize_description(opts: OptimizeOptions) -> OptimizeResult:
    prep = await call(prepare_optimize, opts)
    current = prep.target.description
    train, holdout = list(prep.split.train), list(prep.split.holdout)
    (current_train,), spent = await call(probe_descriptions, opts, prep, [current], train)
    probes = len(train) * opts.study.attempts
    best: TrainScore | None = None
    best_text, best_eval = current, current_train
    rounds: list[RoundLog] = []
    for round_no in range(1, opts.rounds + 1):
        proposal = await call(propose_candidates, opts, prep, best_text, best_eval, round_no)
        texts = [c.description for c in proposal.kept]
        ranked: list[TrainScore] = []
        if texts:
            evals, spent = await call(probe_descriptions, opts, prep, texts, train, spent)
            probes += len(texts) * len(train) * opts.study.attempts
            ranked = await call(select_best, opts, prep, current_train, proposal.kept, evals)
            if ranked[0].score > (best.score if best is not None else 0.0):
                best = ranked[0]
                best_text, best_eval = best.description, evals[texts.index(best.description)]
        refused = [(c.description, why) for c, why in proposal.refused]
        rounds.append(RoundLog(round=round_no, candidates=ranked, refused=refused, best_so_far=best_text))
    decision = None
    if best is not None:
        (cur_hold, win_hold), spent = await call(
            probe_descriptions, opts, prep, [current, best_text], holdout, spent
        )
        probes += 2 * len(holdout) * opts.study.attempts
        decision = await call(decide_holdout, opts, prep, cur_hold, win_hold)
    return OptimizeResult(
        skill=opts.skill,
        path=prep.target.path,
        current=current,
        split=prep.split,
        rounds=rounds,
        winner=best,
        decision=decision,
        estimate_usd=prep.estimate_usd,
        spent_usd=spent,
        probes=probes,
    )
