"""Query sets: loaders for every format, validation errors, seal/verify, tamper detection, digest."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skillreach import __version__
from skillreach.cli import main
from skillreach.errors import InputError, NotFoundError, TamperedError
from skillreach.models import Checks, OutputCheck, Query, QueryKind, QuerySet, ToolPattern
from skillreach.queries.sets import (
    QUERY_FIELDS,
    dump_query_set,
    load_query_set,
    query_digest,
    read_query_file,
    seal,
    validate_against_catalog,
    verify_query_set,
    write_query_set,
)

ROWS = [
    {"id": "q-1", "text": "ship it", "expected_skill": "deploy", "kind": "implicit"},
    {
        "id": "q-2",
        "text": "undo it, the pipeline says: ok",
        "expected_skill": "rollback",
        "acceptable_skills": ["router"],
        "kind": "contextual",
        "notes": "pasted output",
        "checks": {"requires": [{"tool": "Bash", "pattern": "deployctl rollback"}], "rubric": "rolls back"},
    },
    {"id": "q-3", "text": "flip the flag", "expected_skill": "config", "kind": "neighbor_negative"},
    {"id": "q-4", "text": "a haiku please", "kind": "out_of_scope"},
]
CATALOG = ["deploy", "rollback", "config", "router"]


def spec_digest(catalog_id: str, queries: list[dict]) -> str:
    """The digest of spec/interfaces.md, computed here without the models (an independent reference)."""
    defaults = {
        "expected_skill": None,
        "acceptable_skills": [],
        "kind": "implicit",
        "notes": "",
        "checks": None,
    }
    full = [{**defaults, **q} for q in queries]
    payload = json.dumps(
        {"catalog_id": catalog_id, "queries": sorted(full, key=lambda q: q["id"])},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return "sha256:" + hashlib.sha256(payload.encode("utf-8")).hexdigest()


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def write_csv(path: Path, rows: list[dict]) -> Path:
    import csv

    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(QUERY_FIELDS)
        for r in rows:
            w.writerow(
                [
                    r["id"],
                    r["text"],
                    r.get("expected_skill") or "",
                    ";".join(r.get("acceptable_skills", [])),
                    r.get("kind", ""),
                    r.get("notes", ""),
                    json.dumps(r["checks"]) if r.get("checks") else "",
                ]
            )
    return path


# ------------------------------------------------------------------------------------------ loaders


@pytest.mark.parametrize("fmt", ["json", "json-list", "jsonl", "csv", "yaml", "yaml-list", "yml"])
def test_every_format_loads_the_same_set(tmp_path: Path, fmt: str) -> None:
    if fmt == "json":
        path = tmp_path / "q.json"
        path.write_text(json.dumps({"catalog_id": "all", "queries": ROWS}), encoding="utf-8")
    elif fmt == "json-list":
        path = tmp_path / "q.json"
        path.write_text(json.dumps(ROWS), encoding="utf-8")
    elif fmt == "jsonl":
        path = write_jsonl(tmp_path / "q.jsonl", ROWS)
    elif fmt == "csv":
        path = write_csv(tmp_path / "q.csv", ROWS)
    elif fmt == "yaml":
        path = tmp_path / "q.yaml"
        path.write_text(yaml.safe_dump({"catalog_id": "all", "queries": ROWS}), encoding="utf-8")
    elif fmt == "yaml-list":
        path = tmp_path / "q.yaml"
        path.write_text(yaml.safe_dump(ROWS), encoding="utf-8")
    else:
        path = tmp_path / "q.yml"
        path.write_text(yaml.safe_dump(ROWS), encoding="utf-8")
    qs = load_query_set(path, catalog=CATALOG)
    assert [q.id for q in qs.queries] == ["q-1", "q-2", "q-3", "q-4"]
    q2 = qs.by_id()["q-2"]
    assert q2.acceptable_skills == ("router",)
    assert q2.kind is QueryKind.contextual
    assert q2.checks is not None
    assert q2.checks.requires[0].pattern == "deployctl rollback"
    assert qs.by_id()["q-4"].expected_skill is None
    assert qs.compute_digest() == spec_digest("all", ROWS)


def test_csv_utf8_bom_crlf_and_quoted_multiline_cells(tmp_path: Path) -> None:
    path = tmp_path / "q.csv"
    path.write_bytes(
        "\ufeffid,text,expected_skill,kind\r\n"
        'a,"first line\r\nsecond line, with comma",deploy,contextual\r\n'
        "b,héllo wörld,,out_of_scope\r\n".encode()
    )
    qs = read_query_file(path)
    assert qs.queries[0].text == "first line\nsecond line, with comma"  # newlines normalised
    assert qs.queries[1].text == "héllo wörld"
    assert qs.queries[1].kind is QueryKind.out_of_scope


def test_yaml_numeric_ids_become_strings(tmp_path: Path) -> None:
    path = tmp_path / "q.yaml"
    path.write_text("- {id: 1, text: deploy, expected_skill: deploy}\n", encoding="utf-8")
    assert read_query_file(path).queries[0].id == "1"


# -------------------------------------------------------------------------------------- validation


def one_line(exc: pytest.ExceptionInfo[BaseException]) -> str:
    msg = str(exc.value)
    assert "\n" not in msg
    return msg


@pytest.mark.parametrize(
    ("rows", "pattern"),
    [
        ([ROWS[0], ROWS[0]], r"q\.jsonl:2: duplicate id 'q-1' \(first at line 1\); give every query"),
        (
            [{"id": "x", "text": "hi", "expected_skill": "deploy", "kind": "out_of_scope"}],
            r"q\.jsonl:1: expected_skill must be null for an out_of_scope query; use kind out_of_scope",
        ),
        (
            [{"id": "x", "text": "hi", "kind": "implicit"}],
            r"q\.jsonl:1: expected_skill is required for a implicit query",
        ),
        ([{"id": "x", "text": "   ", "expected_skill": "d"}], r"q\.jsonl:1: text: must not be empty; write"),
        ([{"id": "x", "expected_skill": "d"}], r"q\.jsonl:1: missing 'text'"),
        (
            [{"id": "x", "text": "hi", "expected_skill": "d", "kind": "explicit"}],
            r"q\.jsonl:1: unknown kind 'explicit'; use one of implicit, contextual, neighbor_negative, "
            r"out_of_scope",
        ),
        (
            [{"id": "x", "text": "hi", "expected_skil": "d"}],
            r"q\.jsonl:1: unknown field 'expected_skil' \(did you mean 'expected_skill'\?\)",
        ),
        (
            [{"id": "x", "text": "hi", "expected_skill": "d", "acceptable_skills": ["d"]}],
            r"q\.jsonl:1: expected_skill must not also be listed in acceptable_skills",
        ),
        (
            [{"id": "x", "text": "hi", "expected_skill": "d", "checks": {"requires": [{"pattern": "("}]}}],
            r"q\.jsonl:1: query 'x': checks\.requires\[0\]\.pattern '\(' is not a valid regular expression",
        ),
        (
            [{"id": "x", "text": "hi", "expected_skill": "d", "checks": {"output": [{}]}}],
            r"q\.jsonl:1: checks\.output\[0\]: an output check needs exactly one of",
        ),
        (["just a string"], r"q\.jsonl:1: a query must be an object with id and text \(got str\)"),
    ],
)
def test_jsonl_errors_name_the_line_and_what_to_do(tmp_path: Path, rows: list, pattern: str) -> None:
    path = write_jsonl(tmp_path / "q.jsonl", rows)
    with pytest.raises(InputError) as exc:
        read_query_file(path)
    assert re.search(pattern, one_line(exc)), str(exc.value)


def test_jsonl_syntax_error_names_line(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text(
        '{"id": "a", "text": "x", "expected_skill": "d"}\n\n{"id": "b", text}\n', encoding="utf-8"
    )
    with pytest.raises(InputError, match=r"q\.jsonl:3: invalid JSON at column \d+"):
        read_query_file(path)


def test_csv_errors_name_the_physical_line(tmp_path: Path) -> None:
    path = tmp_path / "q.csv"
    path.write_text(
        'id,text,expected_skill,kind\na,"two\nlines",d,implicit\nb,fine,d,implicit\nc,bad kind,d,sometimes\n',
        encoding="utf-8",
    )
    with pytest.raises(InputError) as exc:
        read_query_file(path)
    assert re.search(r"q\.csv:5: unknown kind 'sometimes'", one_line(exc))


@pytest.mark.parametrize(
    ("content", "pattern"),
    [
        ("id,text,skill\n", r"q\.csv:1: unknown column 'skill'; the columns are id, text, expected_skill"),
        ("text,kind\n", r"q\.csv:1: missing column 'id'"),
        ("id,text,expected_skill\na,b\n", r"q\.csv:2: 2 cells for 3 columns"),
        ("id,text,expected_skill,checks\na,b,d,{nope\n", r"q\.csv:2: the checks cell is not valid JSON"),
        ("id,text,expected_skill\na,b,d\na,c,d\n", r"q\.csv:3: duplicate id 'a' \(first at line 2\)"),
    ],
)
def test_csv_errors(tmp_path: Path, content: str, pattern: str) -> None:
    path = tmp_path / "q.csv"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(InputError) as exc:
        read_query_file(path)
    assert re.search(pattern, one_line(exc)), str(exc.value)


def test_yaml_errors_name_the_line_of_the_item(tmp_path: Path) -> None:
    path = tmp_path / "q.yaml"
    path.write_text(
        "catalog_id: all\nqueries:\n  - id: a\n    text: ok\n    expected_skill: d\n"
        "  - id: b\n    text: ''\n    expected_skill: d\n",
        encoding="utf-8",
    )
    with pytest.raises(InputError) as exc:
        read_query_file(path)
    assert re.search(r"q\.yaml:6: text: must not be empty", one_line(exc))


def test_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "q.yaml"
    path.write_text("queries:\n  - id: a\n    text: [unclosed\n", encoding="utf-8")
    with pytest.raises(InputError) as exc:
        read_query_file(path)
    assert re.search(r"q\.yaml:\d+: invalid YAML", one_line(exc))


def test_json_errors_name_the_query_index_and_id(tmp_path: Path) -> None:
    path = tmp_path / "q.json"
    path.write_text(json.dumps({"queries": [ROWS[0], {"id": "q-9", "text": "x", "kind": "nope"}]}), "utf-8")
    with pytest.raises(InputError) as exc:
        read_query_file(path)
    assert re.search(r"q\.json: query #2 \(id 'q-9'\): unknown kind 'nope'", one_line(exc))
    path.write_text('{"queries": [\n  {"id": "a",}\n]}', encoding="utf-8")
    with pytest.raises(InputError, match=r"q\.json:2: invalid JSON at column"):
        read_query_file(path)
    path.write_text(json.dumps({"queries": ROWS, "owner": "me"}), encoding="utf-8")
    with pytest.raises(InputError, match=r"unknown top-level key 'owner'"):
        read_query_file(path)


def test_files_that_are_missing_empty_or_of_unknown_type(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match="no such query file"):
        read_query_file(tmp_path / "nope.jsonl")
    (tmp_path / "e.jsonl").write_text("\n\n", encoding="utf-8")
    with pytest.raises(InputError, match="holds no queries"):
        read_query_file(tmp_path / "e.jsonl")
    (tmp_path / "q.txt").write_text("x", encoding="utf-8")
    with pytest.raises(InputError, match=r"unknown query file type '\.txt'"):
        read_query_file(tmp_path / "q.txt")


def test_catalog_validation_lists_every_stray_with_its_query_ids(tmp_path: Path) -> None:
    rows = [
        {"id": "a", "text": "x", "expected_skill": "deploi"},
        {"id": "b", "text": "x", "expected_skill": "deploi"},
        {"id": "c", "text": "x", "expected_skill": "deploy", "acceptable_skills": ["ghost"]},
        {"id": "d", "text": "x", "expected_skill": "deploy"},
    ]
    path = write_jsonl(tmp_path / "q.jsonl", rows)
    with pytest.raises(InputError) as exc:
        load_query_set(path, catalog=CATALOG)
    msg = one_line(exc)
    assert "2 skill name(s) not in the catalog (4 skills)" in msg
    assert "'deploi' (did you mean 'deploy'?) in a, b" in msg
    assert "'ghost' in c" in msg
    assert "pass --skills" in msg
    # resident names pass
    validate_against_catalog(read_query_file(path).model_copy(update={"queries": ()}), CATALOG)


# ---------------------------------------------------------------------------------- seal and verify


def sealed_file(tmp_path: Path, rows: list[dict] = ROWS, name: str = "sealed.json") -> Path:
    qs = seal(read_query_file(write_jsonl(tmp_path / "in.jsonl", rows)), source="in.jsonl", catalog_id="cat")
    return write_query_set(qs, tmp_path / name)


def test_seal_records_provenance_and_the_spec_digest(tmp_path: Path) -> None:
    path = sealed_file(tmp_path)
    doc = json.loads(path.read_text(encoding="utf-8"))
    prov = doc["provenance"]
    assert prov["origin"] == "authored"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", prov["created_at"])
    assert prov["tool_version"] == __version__
    assert prov["generator_model"] is None
    assert prov["source"] == "in.jsonl"
    assert doc["catalog_id"] == "cat"
    # every query written in canonical form: exactly the keys the digest covers
    assert all(list(q) == list(QUERY_FIELDS) for q in doc["queries"])
    # the digest, computed independently over the file's own content
    assert prov["digest"] == spec_digest("cat", doc["queries"])
    assert prov["digest"] == spec_digest("cat", ROWS)
    assert set(prov["query_digests"]) == {r["id"] for r in ROWS}
    qs = verify_query_set(path)
    assert qs.provenance.digest == prov["digest"]
    assert load_query_set(path).compute_digest() == prov["digest"]


def test_seal_keeps_extra_provenance_and_write_is_deterministic(tmp_path: Path) -> None:
    qs = read_query_file(write_jsonl(tmp_path / "in.jsonl", ROWS))
    a = seal(
        qs, source="s", origin="generated", generator_model="m-1", created_at="2026-01-01T00:00:00Z", seed=7
    )
    b = seal(
        qs, source="s", origin="generated", generator_model="m-1", created_at="2026-01-01T00:00:00Z", seed=7
    )
    assert dump_query_set(a) == dump_query_set(b)
    assert a.provenance.generator_model == "m-1"
    assert (a.provenance.model_extra or {})["seed"] == 7
    with pytest.raises(InputError, match=r"\.json name"):
        write_query_set(a, tmp_path / "out.jsonl")


def tamper(path: Path, edit) -> Path:
    doc = json.loads(path.read_text(encoding="utf-8"))
    edit(doc)
    path.write_text(json.dumps(doc, indent=2, ensure_ascii=False), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("edit", "pattern"),
    [
        (lambda d: d["queries"][1].update(text="undo it now"), r"query 'q-2' \(#2\) was changed"),
        (lambda d: d["queries"][2].update(notes="x"), r"query 'q-3' \(#3\) was changed"),
        (lambda d: d["queries"][1]["checks"].update(rubric="r"), r"query 'q-2' \(#2\) was changed"),
        (lambda d: d["queries"][0].update(acceptable_skills=["router"]), r"query 'q-1' \(#1\) was changed"),
        (lambda d: d["queries"].pop(2), r"query 'q-3' was removed"),
        (
            lambda d: d["queries"].append({**d["queries"][0], "id": "q-0"}),
            r"query 'q-0' \(#5\) was added",
        ),
        (lambda d: d["queries"][3].update(id="q-9"), r"query 'q-9' \(#4\) was added \(2 queries differ\)"),
        (lambda d: d.update(catalog_id="other"), r"every query matches its recorded digest: catalog_id"),
        (
            lambda d: [d["queries"][0].update(text="a"), d["queries"][3].update(text="b")],
            r"query 'q-1' \(#1\) was changed \(2 queries differ\)",
        ),
    ],
)
def test_tampered_set_is_refused_naming_the_first_differing_query(tmp_path: Path, edit, pattern: str) -> None:
    path = tamper(sealed_file(tmp_path), edit)
    with pytest.raises(TamperedError) as exc:
        verify_query_set(path)
    msg = one_line(exc)
    assert msg.startswith(f"{path}: tampered: ")
    assert re.search(pattern, msg), msg
    assert "skillreach queries seal" in msg
    with pytest.raises(TamperedError):
        load_query_set(path)  # loading a sealed set verifies it too


def test_tamper_without_per_query_digests_says_the_digest_does_not_match(tmp_path: Path) -> None:
    def edit(d: dict) -> None:
        del d["provenance"]["query_digests"]
        d["queries"][0]["text"] = "changed"

    path = tamper(sealed_file(tmp_path), edit)
    with pytest.raises(
        TamperedError, match=r"tampered: the digest does not match the content \(the file records"
    ):
        verify_query_set(path)


def test_reordering_a_sealed_set_is_not_tampering(tmp_path: Path) -> None:
    path = tamper(sealed_file(tmp_path), lambda d: d["queries"].reverse())
    assert [q.id for q in verify_query_set(path).queries] == ["q-4", "q-3", "q-2", "q-1"]


def test_verify_refuses_unsealed_and_malformed_digests(tmp_path: Path) -> None:
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps(ROWS), encoding="utf-8")
    with pytest.raises(InputError, match=r"not sealed \(provenance\.digest is missing\)"):
        verify_query_set(plain)
    with pytest.raises(InputError, match=r"a sealed query set is a \.json file"):
        verify_query_set(write_jsonl(tmp_path / "x.jsonl", ROWS))
    path = tamper(sealed_file(tmp_path), lambda d: d["provenance"].update(digest="md5:abc"))
    with pytest.raises(TamperedError, match=r"provenance\.digest 'md5:abc' is not 'sha256:<64 hex>'"):
        verify_query_set(path)


# ------------------------------------------------------------------------------------- properties

_names = st.sampled_from(["deploy", "rollback", "config", "router", "pdf"])
_text = st.text(min_size=1, max_size=30).filter(lambda s: s.strip() != "")


@st.composite
def queries(draw: st.DrawFn, qid: str) -> Query:
    kind = draw(st.sampled_from(list(QueryKind)))
    expected = None if kind is QueryKind.out_of_scope else draw(_names)
    acceptable = draw(st.lists(_names.filter(lambda n: n != expected), unique=True, max_size=2))
    checks = draw(
        st.none()
        | st.builds(
            Checks,
            requires=st.lists(
                st.builds(ToolPattern, tool=st.sampled_from(["Bash", "*"]), pattern=_text), max_size=2
            ).map(tuple),
            output=st.lists(st.builds(OutputCheck, contains=_text), max_size=1).map(tuple),
            rubric=st.none() | _text,
        )
    )
    return Query(
        id=qid,
        text=draw(_text),
        expected_skill=expected,
        acceptable_skills=tuple(acceptable),
        kind=kind,
        notes=draw(st.text(max_size=10)),
        checks=checks,
    )


@st.composite
def query_sets(draw: st.DrawFn) -> QuerySet:
    ids = draw(
        st.lists(st.text(min_size=1, max_size=6).filter(str.strip), min_size=1, max_size=6, unique=True)
    )
    return QuerySet(catalog_id=draw(_text), queries=tuple(draw(queries(i)) for i in ids))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(qs=query_sets(), data=st.data())
def test_digest_is_independent_of_query_order(qs: QuerySet, data: st.DataObject) -> None:
    shuffled = data.draw(st.permutations(qs.queries))
    other = QuerySet(catalog_id=qs.catalog_id, queries=tuple(shuffled))
    assert other.compute_digest() == qs.compute_digest()
    assert qs.compute_digest() == spec_digest(qs.catalog_id, [q.canonical() for q in qs.queries])


def _edited(q: Query, field: str, draw: st.DrawFn) -> Query:
    """A valid query equal to ``q`` except in ``field``."""
    data = q.model_dump()
    if field == "text":
        data["text"] = q.text + draw(_text)
    elif field == "id":
        data["id"] = q.id + "~"
    elif field == "notes":
        data["notes"] = q.notes + "!"
    elif field == "expected_skill":
        if q.expected_skill is None:
            data.update(kind=QueryKind.implicit, expected_skill="other")
        else:
            data["expected_skill"] = q.expected_skill + "-x"
    elif field == "kind":
        choices = [k for k in QueryKind if k is not q.kind and k is not QueryKind.out_of_scope]
        if q.kind is QueryKind.out_of_scope:
            data["expected_skill"] = "other"
        else:
            choices.append(QueryKind.out_of_scope)
        data["kind"] = draw(st.sampled_from(choices))
        if data["kind"] is QueryKind.out_of_scope:
            data["expected_skill"] = None
    elif field == "acceptable_skills":
        data["acceptable_skills"] = (*q.acceptable_skills, "extra-skill")
    elif field == "checks":
        data["checks"] = (
            {"rubric": "graded"}
            if q.checks is None
            else {**q.checks.model_dump(), "rubric": (q.checks.rubric or "") + "+"}
        )
    return Query.model_validate(data)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    qs=query_sets(),
    field=st.sampled_from(
        ["text", "expected_skill", "acceptable_skills", "kind", "notes", "checks", "id", "catalog_id"]
    ),
    data=st.data(),
)
def test_digest_changes_with_any_edit_of_a_covered_field(
    qs: QuerySet, field: str, data: st.DataObject
) -> None:
    before = qs.compute_digest()
    if field == "catalog_id":
        edited = qs.model_copy(update={"catalog_id": qs.catalog_id + "2"})
    else:
        i = data.draw(st.integers(0, len(qs.queries) - 1))
        q = _edited(qs.queries[i], field, data.draw)
        if q.id in {x.id for x in qs.queries} - {qs.queries[i].id}:
            return  # an id edit that collides would not be a valid set
        edited = qs.model_copy(update={"queries": (*qs.queries[:i], q, *qs.queries[i + 1 :])})
        assert query_digest(q) != query_digest(qs.queries[i])
    assert edited.compute_digest() != before


# -------------------------------------------------------------------------------------------- CLI


def test_cli_seal_and_verify(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = write_csv(tmp_path / "in.csv", ROWS)
    out = tmp_path / "sealed.json"
    assert main(["queries", "seal", str(src), "--catalog-id", "demo", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "sealed 4 queries (implicit 1, contextual 1, neighbor_negative 1, out_of_scope 1)" in printed
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["catalog_id"] == "demo"
    assert doc["provenance"]["digest"] == spec_digest("demo", ROWS)
    assert main(["queries", "verify", str(out)]) == 0
    assert f"{out}: ok: 4 queries" in capsys.readouterr().out

    tamper(out, lambda d: d["queries"][2].update(expected_skill="deploy"))
    assert main(["queries", "verify", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("skillreach: error: ")
    assert "query 'q-3' (#3) was changed" in err
    assert len(err.splitlines()) == 1

    # re-sealing the edited file is the documented way to accept an edit; it keeps the source
    resealed = tmp_path / "resealed.json"
    assert main(["queries", "seal", str(out), "--out", str(resealed)]) == 0
    assert json.loads(resealed.read_text(encoding="utf-8"))["provenance"]["source"] == str(src)
    assert main(["queries", "verify", str(resealed)]) == 0


def test_cli_seal_checks_skills_and_reports_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    skills = tmp_path / "skills"
    for name in ("deploy", "rollback"):
        (skills / name).mkdir(parents=True)
        (skills / name / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: Does {name} things for the team when asked.\n---\nbody\n",
            encoding="utf-8",
        )
    src = write_jsonl(tmp_path / "in.jsonl", ROWS)
    code = main(["queries", "seal", str(src), "--skills", str(skills), "--out", str(tmp_path / "o.json")])
    assert code == 2
    err = capsys.readouterr().err
    assert "'config' in q-3" in err
    assert "'router' in q-2" in err
    assert not (tmp_path / "o.json").exists()
    assert main(["queries", "verify", str(tmp_path / "missing.json")]) == 2
    assert "no such query file" in capsys.readouterr().err


def test_cli_entry_point_runs_as_a_program(tmp_path: Path) -> None:
    import subprocess
    import sys

    src = write_jsonl(tmp_path / "in.jsonl", ROWS)
    out = tmp_path / "s.json"
    exe = Path(sys.executable).with_name("skillreach")
    res = subprocess.run(
        [str(exe), "queries", "seal", str(src), "--out", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    tamper(out, lambda d: d["queries"][0].update(text="zzz"))
    res = subprocess.run(
        [str(exe), "queries", "verify", str(out)], capture_output=True, text=True, check=False
    )
    assert res.returncode == 2
    assert "Traceback" not in res.stderr
    assert "query 'q-1' (#1) was changed" in res.stderr


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
_rowish = st.fixed_dictionaries(
    {},
    optional={
        "id": _json_values | st.text(max_size=5),
        "text": _json_values | st.text(max_size=5),
        "expected_skill": _json_values | st.sampled_from(["deploy", "rollback"]),
        "acceptable_skills": _json_values,
        "kind": _json_values | st.sampled_from([k.value for k in QueryKind]),
        "notes": _json_values,
        "checks": _json_values,
    },
)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    rows=st.lists(_rowish | _json_values, min_size=1, max_size=4),
    fmt=st.sampled_from(["jsonl", "json", "yaml"]),
)
def test_any_malformed_input_gives_one_located_line_never_a_traceback(
    tmp_path: Path, rows: list, fmt: str
) -> None:
    path = tmp_path / f"fuzz.{fmt}"
    if fmt == "jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    elif fmt == "json":
        path.write_text(json.dumps({"queries": rows}), encoding="utf-8")
    else:
        path.write_text(yaml.safe_dump({"queries": rows}), encoding="utf-8")
    message = None
    try:
        qs = read_query_file(path)
    except InputError as exc:
        message = str(exc)
    if message is None:
        assert len(qs.queries) == len(rows)
    else:
        assert "\n" not in message
        assert message.startswith(str(path))


def test_cli_reseal_keeps_how_the_set_was_made(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    qs = read_query_file(write_jsonl(tmp_path / "in.jsonl", ROWS))
    made = seal(qs, source="skills/", origin="generated", generator_model="claude-x", prompt_version="g-3")
    path = write_query_set(made, tmp_path / "gen.json")
    tamper(path, lambda d: d["queries"][0].update(text="ship it today"))  # a reviewer's edit
    out = tmp_path / "reviewed.json"
    assert main(["queries", "seal", str(path), "--out", str(out)]) == 0
    prov = verify_query_set(out).provenance
    assert (prov.origin, prov.generator_model, prov.source) == ("generated", "claude-x", "skills/")
    assert (prov.model_extra or {})["prompt_version"] == "g-3"
    assert main(["queries", "seal", str(path), "--origin", "authored", "--out", str(out)]) == 0
    assert verify_query_set(out).provenance.origin == "authored"
    assert main(["queries", "seal", str(path), "--origin", "bought", "--out", str(out)]) == 2
    assert "--origin 'bought'" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["seal", "verify", "import"])
def test_queries_commands_take_every_flag_the_spec_lists(command: str) -> None:
    import typer

    from skillreach.cli import app
    from tests.conftest import REPO

    spec = (REPO / "docs" / "spec" / "interfaces.md").read_text(encoding="utf-8")
    row = next(line for line in spec.splitlines() if line.startswith(f"| `skillreach queries {command} "))
    usage = row.split("`")[1]
    flags = set(re.findall(r"--[a-z-]+", usage))
    group = typer.main.get_command(app).commands["queries"]  # type: ignore[attr-defined]
    cmd = group.commands[command]
    offered = {opt for p in cmd.params for opt in p.opts}
    assert flags <= offered, flags - offered
    if command == "import":
        fmt = next(p for p in cmd.params if "--format" in p.opts)
        assert all(f in fmt.help for f in ("should-trigger", "waza", "csv"))


def test_a_key_given_twice_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "q.yaml"
    path.write_text("- id: a\n  text: first\n  text: second\n  expected_skill: d\n", encoding="utf-8")
    with pytest.raises(
        InputError, match=r"q\.yaml:3: invalid YAML \(duplicate key 'text' \(first on line 2\)"
    ):
        read_query_file(path)
    path = tmp_path / "q.jsonl"
    path.write_text('{"id": "a", "text": "x", "expected_skill": "d", "id": "b"}\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"q\.jsonl:1: key 'id' is given twice in one object; keep one"):
        read_query_file(path)
    path = tmp_path / "q.json"
    path.write_text('{"queries": [], "queries": []}', encoding="utf-8")
    with pytest.raises(InputError, match=r"key 'queries' is given twice in one object"):
        read_query_file(path)
