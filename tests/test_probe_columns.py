"""The columnar probes.jsonl reader (pyarrow, ``skillreach.scoring._columns``) against the validating msgspec
reader (``ProbeTable.from_lines`` on blocks), differentially:

- on generated logs (hypothesis: missing optional fields, nulls, empty and odd ``invoked``, unicode and
  escaped ids, errors, mixed fingerprints and runtimes, unknown fields, bad values, damaged lines), the
  columnar reader either gives the very table the msgspec reader gives, or declines (``None``) — and it
  declines every log the msgspec reader refuses;
- on clean logs it never declines;
- each input pyarrow accepts beyond JSON or beyond the rules (``NaN``, blank lines, two objects on a
  line, a null ``attempt``, …) is declined;
- ``skillreach score`` on a log above the size threshold writes the artifact the functions compute, and
  names a bad line exactly as the msgspec reader does.
"""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skillreach.errors import InputError
from skillreach.models import NO_SKILL, Query, QueryKind, QuerySet
from skillreach.queries.sets import load_query_set, seal, write_query_set
from skillreach.scoring import ProbeTable, _queries, score
from skillreach.scoring import table as tables
from skillreach.scoring.artifact import read_artifact
from skillreach.scoring.table import read_columns
from tests.helpers import hang

_IDS = ["q-1", "q-2", "q-3", "ü-ß", "q\t4", "q\"5", "日本", "q 6"]
_SKILLS = ["s-a", "s-b", "ß-kill", "s\\c", "😀"]


def _table(t: ProbeTable) -> dict[str, Any]:
    names = ("query_vocab", "skill_vocab", "errors", "usage", "cost_usd", "priced", "duration_ms", "runtimes",
             "models", "resolved_models", "fingerprints", "query_ids", "warnings", "source")  # fmt: skip
    out = {k: getattr(t, k) for k in names}
    arrays = ("q", "attempt", "inv_flat", "inv_off", "inv_len", "lines")
    out.update({k: getattr(t, k).tolist() for k in arrays})
    assert out["inv_len"] == np.diff(t.inv_off).tolist()  # the readers' counts are the offsets' steps
    out.update({f"{k}.dtype": getattr(t, k).dtype for k in arrays})
    out["query_codes"] = None if t.query_codes is None else dict(t.query_codes)
    out["rich"] = sorted(t.rich)
    out["types"] = [type(t.cost_usd), type(t.duration_ms), *map(type, t.usage.values())]
    return out


def _reference(data: bytes, qs: QuerySet | None) -> ProbeTable:
    """The msgspec block reader (a ``BytesIO`` has no size on disk: never the columnar one)."""
    return ProbeTable.from_lines(io.BytesIO(data), source="p.jsonl", queries=qs)


def _ids(qs: QuerySet | None) -> Sequence[str] | None:
    """What ``from_lines(queries=qs)`` codes rows by: the set's ids in sorted order."""
    if qs is None:
        return None
    ids = _queries._query_fields(qs).ids
    assert list(ids) == sorted(q.id for q in qs.queries)
    return ids


def _query_set(ids: list[str]) -> QuerySet:
    queries = tuple(Query(id=i, text=f"t {i}", expected_skill="s-a") for i in ids)
    # not sealed: seal refuses ids such as "q\t4", which a hand-written set (and the readers) still take
    return QuerySet(catalog_id="c", queries=queries)


def _check(data: bytes, qs: QuerySet | None) -> ProbeTable | None:
    """The columnar table, asserted equal to the reference (or declined where the reference refuses)."""
    got = read_columns(data, source="p.jsonl", query_ids=_ids(qs))
    try:
        want = _reference(data, qs)
    except InputError:
        assert got is None, "the columnar reader accepted a log the validating reader refuses"
        return None
    if got is not None:
        assert _table(got) == _table(want)
    return got


# ---------------------------------------------------------------------------------------- generation

_text = st.one_of(st.sampled_from(["", " ", "x", "fake", "m-1", "é", "a\nb", NO_SKILL]), st.text(max_size=6))
_count = st.one_of(st.sampled_from([-1, None, 2.0, True, 2**41, 2**63, "3"]), st.integers(0, 10_000))
_number = st.one_of(
    st.sampled_from([None, 0, 0.5, -0.5, 2.5e9, 2**53 + 1, float("nan"), float("inf"), True, "1", [1]]),
    st.integers(-5, 10_000),
    st.floats(-1e3, 1e6, allow_nan=False),
)


_SKILL = st.sampled_from(_SKILLS)
_CLEAN = {
    "query_id": st.sampled_from(_IDS),
    "attempt": st.integers(1, 5),
    "invoked": st.lists(_SKILL, max_size=3),
    "error": st.one_of(st.none(), st.sampled_from(["rate limited", "", 'ü "x"\n'])),
    "runtime": st.sampled_from(["fake", "other", "", None]),
    "model": st.sampled_from(["m-1", "", None]),
    "resolved_model": st.sampled_from(["m-1-x", None]),
    "fingerprint": st.sampled_from(["f1", "f2", None]),
    "usage": st.one_of(st.none(), st.fixed_dictionaries(
        {}, optional={k: st.integers(0, 5000) for k in ("input_tokens", "output_tokens",
                                                        "cache_read_input_tokens")})),
    "cost_usd": st.one_of(st.none(), st.integers(0, 3), st.floats(0, 1)),
    "duration_ms": st.one_of(st.none(), st.integers(0, 10**6), st.floats(0, 1e6)),
    "tool_calls": st.just([]),
    "final_text": st.none(),
    "rubric_grade": st.none(),
    "turns": st.integers(0, 3),
}  # fmt: skip
_REQUIRED = ("query_id", "attempt", "invoked")
_BAD = {
    "query_id": st.one_of(st.sampled_from(["", " ", "\u2003", "\x1c", 3, None]), st.text(max_size=3)),
    "attempt": st.sampled_from([0, -1, 2, None, 1.0, True, "1"]),
    "invoked": st.one_of(st.sampled_from([[None], [""], [NO_SKILL], ["s-a", None], None, "s-a", {}, [1]]),
                         st.lists(st.one_of(_SKILL, _text), max_size=3)),
    "error": st.one_of(_text, st.just(5)),
    "usage": st.one_of(st.just([]), st.dictionaries(
        st.sampled_from(["input_tokens", "output_tokens", "cache_creation_input_tokens", "other"]),
        _count, max_size=3)),
    "cost_usd": _number,
    "duration_ms": _number,
    "runtime": st.one_of(_text, st.just(1)),
    "model": _text,
    "resolved_model": _text,
    "fingerprint": st.sampled_from(["f1", "f2", "", False]),
    "tool_calls": st.sampled_from([None, [{"tool": "Bash"}], [None], "", 0]),
    "final_text": st.sampled_from(["done", ""]),
    "rubric_grade": st.sampled_from([0.5]),
    "extra": st.one_of(st.integers(), st.text(max_size=3), st.just(float("nan")), st.just([{}])),
}  # fmt: skip


@st.composite
def _record(draw: st.DrawFn) -> dict[str, Any]:
    """A valid record, optional fields missing at random."""
    rec = {key: draw(strategy) for key, strategy in _CLEAN.items()}
    for key in draw(st.sets(st.sampled_from([k for k in rec if k not in _REQUIRED]))):
        del rec[key]
    return rec


@st.composite
def _fault(draw: st.DrawFn, rec: dict[str, Any]) -> None:
    """One field of ``rec`` set to an odd or wrong value, or a required one removed."""
    key = draw(st.sampled_from(sorted(_BAD)))
    if key in _REQUIRED and draw(st.integers(0, 4)) == 0:
        rec.pop(key, None)
    else:
        rec[key] = draw(_BAD[key])


def _dump(rec: dict[str, Any], style: int) -> bytes:
    if style == 0:
        return orjson.dumps(rec, option=orjson.OPT_NON_STR_KEYS) if _orjson_can(rec) else _dump(rec, 1)
    if style == 1:  # as the probe log's own writer (ProbeRecord.to_json_line)
        return json.dumps(rec, ensure_ascii=False, separators=(",", ":")).encode()
    return json.dumps(rec, ensure_ascii=True).encode()  # escapes and spaces


def _orjson_can(rec: dict[str, Any]) -> bool:
    try:
        orjson.dumps(rec)
    except TypeError:
        return False
    return not any(isinstance(v, float) and v != v for v in rec.values())


_DAMAGE = [b"", b"\n", b"  ", b"\r", b"{}", b"[1]", b'{"query_id":"q-1"}{"query_id":"q-2"}', b'{"query_id":',
           b"\xef\xbb\xbf", b"\xff", b" \t"]  # fmt: skip


@st.composite
def _log(draw: st.DrawFn, clean: bool) -> tuple[bytes, QuerySet | None]:
    recs = draw(st.lists(_record(), min_size=1, max_size=12))
    if not clean:
        for _ in range(draw(st.integers(1, 3))):
            draw(_fault(draw(st.sampled_from(recs))))
    style = 1 if clean else draw(st.integers(0, 2))
    lines = [_dump(r, style) for r in recs]
    if not clean and draw(st.integers(0, 3)) == 0:
        at = draw(st.integers(0, len(lines)))
        damage = draw(st.sampled_from(_DAMAGE))
        if draw(st.booleans()):
            lines.insert(at, damage)  # a line of its own
        elif lines:
            lines[min(at, len(lines) - 1)] = draw(st.sampled_from([damage + lines[-1], lines[-1] + damage]))
    data = b"\n".join(lines) + (b"\n" if clean or draw(st.booleans()) else b"")
    qs = None
    if draw(st.booleans()):
        qs = _query_set(draw(st.lists(st.sampled_from(_IDS[:6]), min_size=1, max_size=6, unique=True)))
    return data, qs


# -------------------------------------------------------------------------------------------- tests


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_log(clean=False))
def test_columns_equal_the_validating_reader_or_decline(log: tuple[bytes, QuerySet | None]) -> None:
    _check(*log)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_log(clean=True))
def test_clean_logs_are_read_by_columns(log: tuple[bytes, QuerySet | None]) -> None:
    assert _check(*log) is not None


def _line(**fields: Any) -> bytes:
    return orjson.dumps({"query_id": "q-1", "attempt": 1, "invoked": ["s-a"], **fields})


@pytest.mark.parametrize(
    "data",
    [
        _line(extra=1)[:-1] + b',"extra2":NaN}\n',  # pyarrow reads NaN; JSON has none
        _line()[:-1] + b',"z":-Infinity}\n',
        _line() + b"\n\n" + _line() + b"\n",  # a blank line: pyarrow skips it, line numbers would shift
        _line() + b"\n" + _line() + _line() + b"\n\n",  # two objects on a line, and a blank one
        _line() + _line() + b"\n",  # two objects on a line
        _line() + b"\n " + _line() + b"\n",  # an indented line
        _line() + b"\r\n",
        b"\xef\xbb\xbf" + _line() + b"\n",
        _line(attempt=None) + b"\n",  # null where the field has a default: refused, not defaulted
        orjson.dumps({"query_id": "q-1"}) + b"\n",  # missing: defaulted by the other reader
        _line(invoked=None) + b"\n",
        _line(invoked=[None]) + b"\n",
        _line(invoked=[""]) + b"\n",
        _line(invoked=[NO_SKILL]) + b"\n",
        _line(query_id=" ") + b"\n",
        _line(attempt=0) + b"\n",
        _line(usage={"input_tokens": -1}) + b"\n",
        _line(duration_ms=2**40) + b"\n",
        _line(duration_ms=-0.5) + b"\n",  # negative: refused by the other reader (found by hypothesis)
        _line(duration_ms=-3) + b"\n",
        _line(cost_usd=2**60) + b"\n",
        _line(tool_calls=[{"tool": "Bash"}]) + b"\n",  # judged on more than routing: kept whole
        _line(tool_calls=[None]) + b"\n",
        _line(final_text="") + b"\n",
        _line(rubric_grade=1.0) + b"\n",
        _line() + b"\n" + _line()[:-3],  # a torn last line
        _line()[:-1] + b',"x":"\\ud800"}\n',  # a lone surrogate (in a field scoring skips)
        b"",
    ],
)
def test_what_pyarrow_reads_beyond_the_rules_is_declined(data: bytes) -> None:
    assert read_columns(data, source="p.jsonl") is None


@pytest.mark.parametrize("blank", ["", " ", "\u2003", "\x1c"])
def test_a_blank_query_id_outside_the_query_set_is_declined(blank: str) -> None:
    qs = _query_set(["q-1"])
    data = _line() + b"\n" + _line(query_id=blank) + b"\n"
    assert read_columns(data, source="p.jsonl", query_ids=_ids(qs)) is None
    with pytest.raises(InputError, match=r"p\.jsonl:2: field 'query_id' must be a non-empty string"):
        _reference(data, qs)


def test_escaped_keys_and_unicode_ids_read_alike() -> None:
    lines = [
        b'{"query_\\u0069d":"\\u00fc-\\u00df","attempt":2,"invoked":["\\ud83d\\ude00"],"usage":{"input_tokens":3}}',
        _line(query_id="日本", invoked=["😀", "s-a"], error="ü", fingerprint="f1", runtime="x"),
        _line(query_id="q\u2028", fingerprint="f2", cost_usd=1, duration_ms=2.7),
    ]
    got = _check(b"\n".join(lines), _query_set(["日本", "q-1"]))
    assert got is not None
    assert got.query_vocab == ["q-1", "日本", "ü-ß", "q\u2028"]
    assert got.skill_vocab == ["😀", "s-a"]
    assert got.fingerprints == {"f1", "f2"}
    assert (got.cost_usd, got.priced, got.duration_ms) == (1.0, 1, 2)


# ------------------------------------------------------------------------------------ through from_lines


def _big_study(n_queries: int, attempts: int, pad: int = 60) -> tuple[QuerySet, bytes]:
    ids = [f"q-{i:06d}" for i in range(n_queries)]
    queries = tuple(
        Query(id=i, text=f"do s-{k % 7}", expected_skill=f"s-{k % 7}")
        if k % 5
        else Query(id=i, text="unrelated", kind=QueryKind.out_of_scope)
        for k, i in enumerate(ids)
    )
    qs = seal(QuerySet(catalog_id="c", queries=queries), source="t")
    rows = []
    for a in range(1, attempts + 1):
        for k, i in enumerate(ids):
            invoked = [] if k % 11 == 0 else [f"s-{(k * a) % 9}"] + ([f"s-{k % 7}"] if a % 2 else [])
            rows.append(json.dumps({
                "query_id": i, "attempt": a, "invoked": invoked, "error": "timeout" if k % 97 == 0 else None,
                "turns": len(invoked), "tool_calls": [], "final_text": None, "rubric_grade": None,
                "runtime": "fake", "model": "fake-1", "resolved_model": "fake-1", "fingerprint": "fp",
                "usage": {"input_tokens": 1000 + k % 13, "output_tokens": 40,
                          "cache_creation_input_tokens": 0, "cache_read_input_tokens": 7},
                "cost_usd": 0.0004, "duration_ms": 350 + k % 3, "notes": "x" * pad,
            }, ensure_ascii=False, separators=(",", ":")))  # fmt: skip
    return qs, ("\n".join(rows) + "\n").encode()


def test_from_lines_reads_a_large_file_by_columns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    qs, data = _big_study(300, 3)
    path = tmp_path / "probes.jsonl"
    path.write_bytes(data)
    monkeypatch.setattr(tables, "_COLUMNAR_MIN", 1)
    with path.open("rb") as fh:
        table = ProbeTable.from_lines(fh, source=str(path), queries=qs)
    want = ProbeTable.from_lines(io.BytesIO(data), source=str(path), queries=qs)
    assert _table(table) == _table(want)
    assert score(qs, table) == score(qs, want)
    # a bad line: the file is read again by the validating reader, which names it
    lines = data.splitlines(keepends=True)
    lines[700] = lines[700].replace(b'"attempt":3', b'"attempt":0')
    path.write_bytes(b"".join(lines))
    with path.open("rb") as fh, pytest.raises(InputError) as err:
        ProbeTable.from_lines(fh, source=str(path), queries=qs)
    assert str(err.value) == f"{path}:701: field 'attempt' must be an integer ≥ 1; fix or remove the line"


def _score_cmd(queries: Path, probes: Path, out: Path) -> hang.Outcome:
    exe = Path(sys.executable).with_name("skillreach")
    argv = [str(exe), "score", "--queries", str(queries), "--probes", str(probes), "--out", str(out)]
    argv.append("--quiet")
    return hang.finish(argv, limit_s=300)


def test_a_log_above_the_ceiling_is_read_in_blocks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past ``_COLUMNAR_MAX`` the whole file is not held in memory: the block reader reads it, alike."""
    qs, data = _big_study(300, 3)
    path = tmp_path / "probes.jsonl"
    path.write_bytes(data)
    monkeypatch.setattr(tables, "_COLUMNAR_MIN", 1)
    monkeypatch.setattr(tables, "_COLUMNAR_MAX", len(data) - 1)
    called: list[int] = []
    real = tables.read_columns
    monkeypatch.setattr(tables, "read_columns", lambda *a, **k: called.append(1) or real(*a, **k))
    with path.open("rb") as fh:
        table = ProbeTable.from_lines(fh, source=str(path), queries=qs)
    assert called == []
    assert _table(table) == _table(ProbeTable.from_lines(io.BytesIO(data), source=str(path), queries=qs))
    monkeypatch.setattr(tables, "_COLUMNAR_MAX", len(data))
    with path.open("rb") as fh:
        ProbeTable.from_lines(fh, source=str(path), queries=qs)
    assert called == [1]


def test_the_command_reads_a_log_above_the_threshold_by_columns(tmp_path: Path) -> None:
    qs, data = _big_study(12_000, 5, pad=600)  # 60,000 lines, 50 MB
    assert len(data) >= tables._COLUMNAR_MIN
    assert read_columns(data, source="p", query_ids=_ids(qs)) is not None  # so the command takes that path
    queries = write_query_set(qs, tmp_path / "q.json")
    probes = tmp_path / "probes.jsonl"
    probes.write_bytes(data)
    proc = _score_cmd(queries, probes, tmp_path / "out" / "artifact.json")
    assert proc.returncode == 0, proc.stderr
    written = read_artifact(tmp_path / "out" / "artifact.json")
    expected = score(load_query_set(queries), _reference(data, qs))
    assert written.model_dump(exclude={"digest"}) == expected.model_dump(exclude={"digest"})
    assert written.counts.errors > 0
    # a value the columns refuse, late in the log: the one-line message of the validating reader
    lines = data.splitlines(keepends=True)
    lines[-5] = lines[-5].replace(b'"input_tokens":', b'"input_tokens":-')
    probes.write_bytes(b"".join(lines))
    proc = _score_cmd(queries, probes, tmp_path / "out2" / "artifact.json")
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines()[-1].endswith(
        f"{probes}:{len(lines) - 4}: field 'usage.input_tokens' must be a non-negative integer; "
        "fix or remove the line"
    )
    assert "Traceback" not in proc.stderr
    assert np.count_nonzero(np.frombuffer(data, np.uint8) == 10) == len(lines)


def test_the_columnar_paths_never_import_pandas(tmp_path: Path) -> None:
    """pyarrow imports pandas (≈ 0.5 s) when handed Python or numpy objects to convert; the reader and
    the artifact's arrow rows hand it buffers only (``skillreach.scoring._arrow``)."""
    qs, data = _big_study(200, 2)
    queries = write_query_set(qs, tmp_path / "q.json")
    probes = tmp_path / "probes.jsonl"
    probes.write_bytes(data)
    code = (
        "import sys\n"
        "from skillreach.scoring import artifact as artifacts, scorer, table as tables\n"
        "from skillreach.queries.sets import load_query_set\n"
        "tables._COLUMNAR_MIN = 1\n"
        "artifacts._ARROW_ROWS = 1\n"
        f"qs = load_query_set({str(queries)!r})\n"
        f"with open({str(probes)!r}, 'rb') as fh:\n"
        "    table = tables.ProbeTable.from_lines(fh, queries=qs)\n"
        "assert 'pyarrow.json' in sys.modules, 'not read by columns'\n"
        f"artifacts.write_artifact(scorer.score(qs, table), {str(tmp_path / 'a.json')!r})\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'pandas'))\n"
    )
    argv = [sys.executable, "-c", code]
    proc = hang.finish(argv, limit_s=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
