"""The artifact's collisions (confusion pairs between skills, with sample queries) and top attractors
(the skills predicted in place of others, with the skills they pull from), laid out on the confusion's
arrays."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from skillreach.scoring._counting import _Confusion
from skillreach.scoring._csr import _offsets
from skillreach.scoring._probes import _Probes
from skillreach.scoring._queries import _Queries
from skillreach.scoring.artifact import Attractor, AttractorSource, Collision, QuerySample, built_as_validated

_SAMPLES = 3


def _collisions(pr: _Probes, qs: _Queries, labels: Sequence[str], rank: np.ndarray) -> list[Collision]:
    """Confusion pairs with predicted ≠ truth and predicted ≠ NO_SKILL, with up to 3 sample queries."""
    n_labels, no = len(labels), len(labels) - 1
    t, p = pr.truth, pr.predicted
    mask = ~pr.correct  # an errored probe predicts -1, which is neither
    mask &= p != no
    mask &= ~pr.err
    at = np.flatnonzero(mask)
    if not len(at):
        return []
    c_cell = t[at] * n_labels + p[at]
    n_q = len(qs)
    # distinct (cell, query) pairs, sorted by cell then query id
    pair = np.sort(c_cell * n_q + pr.q[at])
    pair = pair[np.r_[True, pair[1:] != pair[:-1]]]
    per_cell = np.bincount(c_cell)
    cells = np.flatnonzero(per_cell)
    counts = per_cell[cells]
    start = np.searchsorted(pair, cells * n_q)
    distinct = np.searchsorted(pair, (cells + 1) * n_q) - start
    # by count descending, then expected and predicted name
    expected, predicted = np.divmod(cells, n_labels)
    order = np.lexsort((rank[predicted], rank[expected], -counts))
    expected, predicted, counts, start, distinct = (
        x[order] for x in (expected, predicted, counts, start, distinct)
    )
    # the first few distinct queries of each cell, in id order
    take = np.minimum(distinct, _SAMPLES)
    off = _offsets(take)
    picked = (pair[np.repeat(start - off[:-1], take) + np.arange(int(off[-1]))] % n_q).tolist()
    items = qs.items
    samples = built_as_validated(QuerySample, [{"query_id": items[j].id, "text": items[j].text}
                                               for j in picked])  # fmt: skip
    out = [
        {"expected": labels[e], "predicted": labels[p], "count": k, "queries": d, "samples": samples[a:b]}
        for e, p, k, d, a, b in zip(expected.tolist(), predicted.tolist(), counts.tolist(), distinct.tolist(),
                                    off[:-1].tolist(), off[1:].tolist(), strict=True)
    ]  # fmt: skip
    return built_as_validated(Collision, out)


def _attractors(
    labels: Sequence[str], rank: np.ndarray, classes: Sequence[Mapping[str, Any]], conf: _Confusion
) -> list[Attractor]:
    """Skills (not NO_SKILL) with fp > 0, by fp descending then name, with the (up to 3) expected skills
    they pull from most, by count descending then name: every skill predicted in an off-diagonal cell."""
    n_labels = len(labels)
    expected, predicted = np.divmod(conf.cells, n_labels)
    off = (expected != predicted) & (predicted != n_labels - 1)
    expected, predicted, counts = expected[off], predicted[off], conf.counts[off]
    order = np.lexsort((rank[expected], -counts, predicted))
    expected, predicted, counts = expected[order], predicted[order], counts[order]
    skills, first, size = np.unique(predicted, return_index=True, return_counts=True)
    top = np.arange(len(predicted)) - np.repeat(first, size) < _SAMPLES
    flat = built_as_validated(
        AttractorSource,
        [{"expected": labels[e], "count": k} for e, k in zip(expected[top].tolist(), counts[top].tolist(),
                                                              strict=True)],
    )  # fmt: skip
    ends = _offsets(np.minimum(size, _SAMPLES)).tolist()
    out = [
        {
            "skill": labels[i],
            "fp": classes[i]["fp"],
            "predicted": classes[i]["predicted"],
            "precision": classes[i]["precision"],
            "pulled_from": flat[a:b],
        }
        for i, a, b in zip(skills.tolist(), ends[:-1], ends[1:], strict=True)
    ]
    out.sort(key=lambda a: (-a["fp"], a["skill"]))
    return built_as_validated(Attractor, out)
