"""The artifact's outcome rows assembled by pyarrow (``Outcomes.canonical_buffers``, used from
``_ARROW_ROWS`` rows on) are byte for byte the rows of the Python path (``canonical_text``): on random
outcome tables with escapes and unicode in ids, names and errors, empty and long invocation lists,
errored rows, compliance and quality, at several chunk sizes; and ``write_artifact`` writes the same
file and digest either way."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from skillreach.models import NO_SKILL, ProbeRecord, Query, QuerySet
from skillreach.scoring import artifact as artifacts
from skillreach.scoring import score
from skillreach.scoring.artifact import Outcomes, artifact_digest, read_artifact, write_artifact

_NAMES = ["s-a", "ß-kill", 's"q', "s\\b", "😀", "s\u2028", "tab\t", NO_SKILL]
_IDS = ["q-1", "ü", 'q"2', "q\\3", "q\n4", "日本", "q\x00", "plain"]


def _outcomes(seed: int, n: int) -> Outcomes:
    rng = random.Random(seed)
    gen = np.random.default_rng(seed)
    kinds = ["implicit", "contextual", "neighbor_negative", "out_of_scope"]
    queries = [
        (qid, rng.choice(kinds), rng.choice(_NAMES), tuple(rng.sample(_NAMES[:6], rng.choice([0, 0, 1, 2]))))
        for qid in _IDS
    ]
    inv_len = gen.choice([0, 1, 1, 2, 3], size=n)
    sc_len = np.minimum(inv_len, gen.integers(0, 3, size=n))
    messages = ["rate limited", 'ü "quoted"\n', "", "\\"]
    errors = {i: rng.choice(messages) for i in range(n) if rng.random() < 0.1}
    predicted = gen.integers(0, len(_NAMES), size=n)
    predicted[list(errors)] = -1
    quality = np.where(gen.random(n) < 0.3, gen.random(n), np.nan)
    quality[: min(n, 2)] = [0.0, 1.0][: min(n, 2)]
    return Outcomes(
        queries=queries,
        names=_NAMES,
        q=gen.integers(0, len(queries), size=n),
        attempt=gen.integers(1, 12, size=n),
        inv_flat=gen.integers(0, len(_NAMES), size=int(inv_len.sum())),
        inv_off=np.concatenate([[0], np.cumsum(inv_len)]),
        scored_flat=gen.integers(0, len(_NAMES), size=int(sc_len.sum())),
        scored_off=np.concatenate([[0], np.cumsum(sc_len)]),
        predicted=predicted,
        errors=errors,
        compliance=gen.integers(-1, 2, size=n).astype(np.int8),
        quality=quality,
    )


@pytest.mark.parametrize(("seed", "n", "chunk"), [(1, 1, 10), (2, 50, 7), (3, 1000, 100_000), (4, 2000, 333)])
def test_arrow_rows_are_the_python_rows(seed: int, n: int, chunk: int) -> None:
    out = _outcomes(seed, n)
    for sep in (",", ",\n    "):
        want = "".join(out.canonical_text(sep, chunk)).encode()
        got = [b"".join(bytes(c[0]) for c in out.canonical_buffers((sep.encode(),), chunk))]
        both = list(out.canonical_buffers((sep.encode(), b","), chunk))
        assert got[0] == want
        assert b"".join(bytes(c[0]) for c in both) == want
        assert b"".join(bytes(c[1]) for c in both) == "".join(out.canonical_text(",", chunk)).encode()


def test_write_artifact_is_the_same_file_either_way(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    qs = QuerySet(catalog_id="c", queries=(Query(id="q-1", text="t", expected_skill="s-a"),))
    scored = score(qs, [ProbeRecord(query_id="q-1", invoked=("s-a",))])
    art = scored.model_copy(update={"outcomes": _outcomes(5, 3000)})  # any rows: written as they are
    python = write_artifact(art, tmp_path / "py" / "artifact.json")
    monkeypatch.setattr(artifacts, "_ARROW_ROWS", 1)
    arrow = write_artifact(art, tmp_path / "arrow" / "artifact.json")
    written = (tmp_path / "arrow" / "artifact.json").read_bytes()
    assert written == (tmp_path / "py" / "artifact.json").read_bytes()
    assert arrow.digest == python.digest == artifact_digest(art)
    assert read_artifact(tmp_path / "arrow" / "artifact.json").outcomes.to_rows() == art.outcomes.to_rows()
