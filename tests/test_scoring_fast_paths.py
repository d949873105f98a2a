"""Differential tests of the fast readers behind ``skillreach score`` (issue 16) against the general ones.

- probes.jsonl read block by block (msgspec, with the decoder of names already seen) gives the same table
  and the same artifact as the line-by-line reader and as validated :class:`ProbeRecord` models, on a
  seeded random study whose log has new skills late, errors, retries, rich lines and odd runtimes;
- a sealed JSON query set read by the fast path equals the general reader's, model for model (fields,
  the keys given, the digest), and every input the fast path is unsure of gets the general reader's
  one-line error;
- the artifact's hand-assembled outcome rows are ``orjson.dumps(row, OPT_SORT_KEYS)`` of every row;
- the real ``skillreach score`` writes the artifact the functions compute.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from skillreach.errors import InputError
from skillreach.models import NO_SKILL, ProbeRecord, Query, QueryKind, QuerySet
from skillreach.queries._fastjson import read_json_fast
from skillreach.queries.sets import _build, _rows_from_json, load_query_set, seal, write_query_set
from skillreach.scoring import ProbeTable, _decoders, score
from skillreach.scoring.artifact import Artifact, Outcomes, artifact_digest, read_artifact, write_artifact
from tests.helpers import hang

SEEDS = (0, 1, 2)


def _study(
    seed: int, n_queries: int = 300, attempts: int = 4, n_skills: int = 30
) -> tuple[QuerySet, list[dict[str, Any]]]:
    """A random study: queries of every kind, and probe lines in a shuffled order with errors, retried
    (superseded) probes, skills first invoked late in the log, rich lines and a missing runtime."""
    rng = random.Random(seed)
    skills = [f"s-{i:02d}" for i in range(n_skills)]
    queries = []
    for i in range(n_queries):
        kind = rng.choice(list(QueryKind))
        if kind is QueryKind.out_of_scope:
            queries.append(
                Query(id=f"q{i:04d}", text=f"unrelated {i}", kind=kind, notes=rng.choice(["", "n"]))
            )
            continue
        exp = rng.choice(skills[:20])
        acc = tuple(rng.sample([s for s in skills if s != exp], rng.choice([0, 0, 1, 2])))
        text = f"do {exp} “{i}”\n"
        queries.append(Query(id=f"q{i:04d}", text=text, expected_skill=exp, acceptable_skills=acc, kind=kind))
    lines: list[dict[str, Any]] = []
    for q in queries:
        for a in range(1, attempts + 1):
            if rng.random() < 0.05:
                continue  # a missing pair
            pool = skills[:20] if rng.random() < 0.9 else skills  # the last ten show up rarely, late
            invoked = rng.sample(pool, rng.choice([0, 1, 1, 1, 2, 3]))
            rec: dict[str, Any] = {
                "query_id": q.id, "attempt": a, "invoked": invoked, "runtime": "fake", "model": "m-1",
                "resolved_model": "m-1-2025", "cost_usd": rng.choice([None, 0.001]),
                "duration_ms": rng.choice([10, 12.0, None]), "turns": len(invoked),
                "usage": {"input_tokens": rng.randrange(5000), "output_tokens": 7},
            }  # fmt: skip
            if rec["duration_ms"] is None:
                del rec["duration_ms"]  # not recorded
            if rng.random() < 0.1:
                del rec["usage"]  # not reported
            if rng.random() < 0.04:
                rec["error"] = "rate limited"
                lines.append(dict(rec))  # retried later: this record is superseded
                rec.pop("error")
            if rng.random() < 0.02:
                rec["tool_calls"] = [{"tool": "Bash", "input": {"cmd": "ls"}}]
                rec["final_text"] = "done"
            else:
                rec["tool_calls"] = []
                rec["final_text"] = None
            lines.append(rec)
    rng.shuffle(lines)
    lines.sort(key=lambda r: any(s in skills[20:] for s in r["invoked"]))  # new skills late in the log
    if lines:
        lines[-1] = {k: v for k, v in lines[-1].items() if k != "runtime"}  # a runtime missing: "" joins
    qs = seal(QuerySet(catalog_id="c", queries=tuple(queries)), source="test")
    return qs, lines


def _records(lines: list[dict[str, Any]]) -> list[ProbeRecord]:
    """The lines as validated models (a null duration is the model's default)."""
    return [ProbeRecord.model_validate({k: v for k, v in r.items() if v is not None}) for r in lines]


def _columns(t: ProbeTable) -> dict[str, Any]:
    names = ("query_vocab", "skill_vocab", "errors", "usage", "cost_usd", "priced", "duration_ms", "runtimes",
             "models", "resolved_models", "fingerprints")  # fmt: skip
    out = {k: getattr(t, k) for k in names}
    arrays = ("q", "attempt", "inv_flat", "inv_off", "inv_len", "lines")
    out.update({k: getattr(t, k).tolist() for k in arrays})
    assert out["inv_len"] == np.diff(t.inv_off).tolist()  # the readers' counts are the offsets' steps
    out["rich"] = sorted(t.rich)
    return out


@pytest.mark.parametrize("seed", SEEDS)
def test_block_reader_equals_line_reader_and_models(
    seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    qs, lines = _study(seed)
    path = tmp_path / "probes.jsonl"
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in lines))
    monkeypatch.setattr(_decoders, "_BLOCK", 2048)  # many blocks: the known-names decoder reads most
    _decoders._known_decoder.cache_clear()
    with path.open("rb") as fh:
        fast = ProbeTable.from_lines(fh, source=str(path))
    assert _decoders._known_decoder.cache_info().currsize > 1  # learnt, and learnt again for late skills
    slow = ProbeTable.from_lines(path.read_bytes().splitlines(keepends=True), source=str(path))
    assert _columns(fast) == _columns(slow)
    assert fast.runtimes == {"fake", ""}
    records = _records(lines)
    a_fast, a_slow, a_models = score(qs, fast), score(qs, slow), score(qs, records)
    assert a_fast == a_slow
    assert a_fast.model_dump(exclude={"runtime"}) == a_models.model_dump(exclude={"runtime"})
    assert a_fast.counts.superseded > 0
    assert any(o.invoked and o.invoked[0] >= "s-20" for o in a_fast.outcomes)
    assert all(fast.record(r) == slow.record(r) for r in fast.rich)


@pytest.mark.parametrize("seed", SEEDS)
def test_the_artifact_score_builds_is_the_one_validation_builds(seed: int) -> None:
    """Its long lists are built without a validation per model: every value must already be what
    validation would make of it (a float where a float goes, a tuple for an interval)."""
    qs, lines = _study(seed)
    art = score(qs, _records(lines))
    assert art.collisions
    assert art.top_attractors
    again = Artifact.model_validate(art.model_dump())
    assert again == art
    assert orjson.dumps(again.model_dump(mode="json")) == orjson.dumps(art.model_dump(mode="json"))
    for field in ("classes", "confusion", "collisions", "top_attractors"):
        for got, want in zip(getattr(art, field), getattr(again, field), strict=True):
            assert {k: type(v) for k, v in got} == {k: type(v) for k, v in want}
            assert got.model_fields_set == want.model_fields_set


def test_a_bad_line_in_a_later_block_is_named_as_the_line_reader_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, lines = _study(5)
    lines[-40]["attempt"] = 0
    path = tmp_path / "probes.jsonl"
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in lines))
    monkeypatch.setattr(_decoders, "_BLOCK", 2048)
    with path.open("rb") as fh, pytest.raises(InputError) as err:
        ProbeTable.from_lines(fh, source=str(path))
    assert (
        str(err.value)
        == f"{path}:{len(lines) - 39}: field 'attempt' must be an integer ≥ 1; fix or remove the line"
    )


# ------------------------------------------------------------------------------------------ query sets


def _general(path: Path) -> QuerySet:
    catalog_id, rows, provenance = _rows_from_json(path.read_text(encoding="utf-8"), path)
    return _build(path, catalog_id, rows, provenance)


def _same_models(a: QuerySet, b: QuerySet) -> None:
    assert a == b
    assert [q.model_fields_set for q in a.queries] == [q.model_fields_set for q in b.queries]
    assert a.model_fields_set == b.model_fields_set


@pytest.mark.parametrize("seed", SEEDS)
def test_fast_query_reader_equals_the_general_one(seed: int, tmp_path: Path) -> None:
    qs, _ = _study(seed)
    path = write_query_set(qs, tmp_path / "q.json")
    text = path.read_text(encoding="utf-8")
    fast = read_json_fast(text)
    assert fast is not None
    fast_qs, digest = fast
    _same_models(fast_qs, _general(path))
    assert digest == fast_qs.compute_digest() == qs.provenance.digest
    assert load_query_set(path) == fast_qs


def test_the_fast_readers_digest_is_the_sets_in_any_query_order() -> None:
    qs, _ = _study(3)
    queries = list(qs.queries)
    random.Random(3).shuffle(queries)
    shuffled = QuerySet(catalog_id="c", queries=tuple(queries))
    text = json.dumps({"catalog_id": "c", "queries": [q.canonical() for q in queries]}, ensure_ascii=False)
    fast = read_json_fast(text)
    assert fast is not None
    assert fast[1] == shuffled.compute_digest()
    assert [q.id for q in fast[0].queries] == [q.id for q in queries]  # the file's order kept


def test_hand_written_keys_are_read_as_the_general_reader_reads_them(tmp_path: Path) -> None:
    doc = {"catalog_id": "c", "queries": [
        {"id": "a", "text": "t1", "expected_skill": "s", "notes": None},
        {"id": "b", "text": "t2", "kind": "out_of_scope", "expected_skill": None, "checks": None},
        {"id": "c", "text": "t3", "expected_skill": "s", "acceptable_skills": ["r"], "kind": "contextual",
         "notes": "n"},
    ]}  # fmt: skip
    path = tmp_path / "q.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    fast = read_json_fast(path.read_text(encoding="utf-8"))
    assert fast is not None
    _same_models(fast[0], _general(path))
    assert fast[1] == fast[0].compute_digest()


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ('{"id": "a", "text": "x", "text": "y", "expected_skill": "s"}', "key 'text' is given twice"),
        ('{"id": "a", "text": "x", "text" : "y", "expected_skill": "s"}', "key 'text' is given twice"),
        ('{"id": "a", "text": "x", "te\\u0078t": "y", "expected_skill": "s"}', "key 'text' is given twice"),
        ('{"id": "a", "text": "x", "expected_skil": "s"}', "unknown field 'expected_skil'"),
        ('{"id": " ", "text": "x", "expected_skill": "s"}', "id: must not be empty"),
        ('{"id": "a", "text": "x"}', "expected_skill is required for a implicit query"),
        ('{"id": "a", "text": "x", "kind": "out_of_scope", "expected_skill": "s"}', "must be null"),
        ('{"id": "a", "text": "x", "expected_skill": "s", "acceptable_skills": ["s"]}', "must not also"),
        ('{"id": "a", "text": "x", "expected_skill": "s", "kind": "sideways"}', "unknown kind 'sideways'"),
        ('{"id": "a", "text": 3, "expected_skill": "s"}', "text"),
        ('{"id": "a", "text": "x", "expected_skill": "s", "checks": {"requires": [{"tool": "("}]}}', None),
    ],
)
def test_what_the_fast_path_is_unsure_of_gets_the_general_readers_error(
    tmp_path: Path, query: str, message: str | None
) -> None:
    path = tmp_path / "q.json"
    path.write_text('{"catalog_id": "c", "queries": [{"id": "z", "text": "t", "expected_skill": "s"}, '
                    + query + "]}", encoding="utf-8")  # fmt: skip
    assert read_json_fast(path.read_text(encoding="utf-8")) is None
    if message is None:  # checks: read (and validated) by the general reader
        assert load_query_set(path).queries[1].checks is not None
        return
    with pytest.raises(InputError) as err:
        load_query_set(path)
    assert str(err.value).startswith(f"{path}: query #2 (id 'a'): ") or str(err.value).startswith(f"{path}:")
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_a_duplicate_id_is_refused_by_name(tmp_path: Path) -> None:
    path = tmp_path / "q.json"
    q = '{"id": "a", "text": "x", "expected_skill": "s"}'
    path.write_text('{"catalog_id": "c", "queries": [' + q + "," + q + "]}", encoding="utf-8")
    assert read_json_fast(path.read_text(encoding="utf-8")) is None
    with pytest.raises(InputError, match="duplicate id 'a'"):
        load_query_set(path)


# ------------------------------------------------------------------------------------------ artifact rows


def test_canonical_rows_equal_sorted_dumps_at_every_chunk_size() -> None:
    rng = np.random.default_rng(7)
    n, names = 500, ["a", "b-ü", 'c"q', "d"]
    lengths = rng.integers(0, 5, n)
    off = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=off[1:])
    flat = rng.integers(0, len(names), int(off[-1]))
    sc_len = np.minimum(lengths, rng.integers(0, 3, n))
    sc_off = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(sc_len, out=sc_off[1:])
    sc_flat = rng.integers(0, len(names), int(sc_off[-1]))
    quality = np.where(rng.random(n) < 0.3, rng.random(n), np.nan)
    outcomes = Outcomes(
        queries=[("q1", "implicit", "a", ("b-ü",)), ("q\n2", "out_of_scope", "(no skill)", ())],
        names=names, q=rng.integers(0, 2, n), attempt=rng.integers(1, 4, n), inv_flat=flat, inv_off=off,
        scored_flat=sc_flat, scored_off=sc_off, predicted=rng.integers(-1, len(names), n),
        errors={i: f'err "{i}"\u2028' for i in range(0, n, 37)},
        compliance=rng.integers(-1, 2, n).astype(np.int8), quality=quality,
    )  # fmt: skip
    expected = [orjson.dumps(r, option=orjson.OPT_SORT_KEYS).decode() for r in outcomes.to_rows()]
    for chunk in (1, 7, 64, 10_000):
        assert [r for rows in outcomes.canonical_rows(chunk) for r in rows] == expected
        assert "".join(outcomes.canonical_text(";\n", chunk)) == ";\n".join(expected)


@pytest.mark.parametrize("ids", [("q-1", "q-2"), ("q-ü", "q-2\u2028"), ('q"1', "q-2"), ("q\\1", "q\t2")])
def test_rows_and_the_written_file_hold_every_query_id_as_json_writes_it(
    ids: tuple[str, str], tmp_path: Path
) -> None:
    """Ids that need no escaping are written as themselves; any other sends the set through the encoder."""
    outcomes = Outcomes(
        queries=[(ids[0], "implicit", "a", ()), (ids[1], "out_of_scope", NO_SKILL, ("a",))],
        names=["a"], q=np.array([0, 1, 1]), attempt=np.array([1, 1, 70_000]), inv_flat=np.array([0, 0]),
        inv_off=np.array([0, 1, 1, 2]), scored_flat=np.array([0]), scored_off=np.array([0, 1, 1, 1]),
        predicted=np.array([0, -1, 0]), errors={1: "boom"}, compliance=np.full(3, -1, dtype=np.int8),
        quality=np.full(3, np.nan),
    )  # fmt: skip
    expected = [orjson.dumps(r, option=orjson.OPT_SORT_KEYS).decode() for r in outcomes.to_rows()]
    assert [r for rows in outcomes.canonical_rows() for r in rows] == expected
    artifact = score(QuerySet(queries=(Query(id="x", text="x", expected_skill="a"),)), [])
    written = write_artifact(artifact.model_copy(update={"outcomes": outcomes}), tmp_path / "a.json")
    text = (tmp_path / "a.json").read_text(encoding="utf-8")
    assert '  "outcomes": [\n    ' + ",\n    ".join(expected) + "\n  ]," in text  # one row a line
    back = read_artifact(tmp_path / "a.json")  # the digest recomputed from the canonical form
    assert back.digest == written.digest == artifact_digest(written)
    assert back.outcomes == outcomes


# ------------------------------------------------------------------------------------------ the command


def test_the_command_writes_what_the_functions_compute(tmp_path: Path) -> None:
    qs, lines = _study(3)
    queries = write_query_set(qs, tmp_path / "q.json")
    probes = tmp_path / "probes.jsonl"
    probes.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in lines))
    out = tmp_path / "out" / "artifact.json"
    exe = Path(sys.executable).with_name("skillreach")
    argv = [
        str(exe),
        "score",
        "--queries",
        str(queries),
        "--probes",
        str(probes),
        "--out",
        str(out),
        "--quiet",
    ]
    proc = hang.finish(argv, limit_s=120)
    assert proc.returncode == 0, proc.stderr
    written = read_artifact(out)
    expected = score(load_query_set(queries), _records(lines))
    assert written.model_dump(exclude={"digest"}) == expected.model_dump(exclude={"digest"})
