"""Artifact files: digest written and verified, outcomes kept, bad files refused with one clear line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from skillreach.errors import InputError, TamperedError
from skillreach.models import NO_SKILL, ProbeRecord, Query, QueryKind, QuerySet
from skillreach.scoring import score
from skillreach.scoring.artifact import (
    Artifact,
    Outcomes,
    ProbeOutcome,
    artifact_digest,
    read_artifact,
    write_artifact,
)

QS = QuerySet(
    queries=(
        Query(id="q1", text="make a <b>pdf</b> — ünïcode", expected_skill="pdf"),
        Query(id="q2", text="weather?", kind=QueryKind.out_of_scope),
    )
)
PROBES = [
    ProbeRecord(query_id="q1", attempt=1, invoked=("pdf",)),
    ProbeRecord(query_id="q1", attempt=2, invoked=("xlsx", "pdf")),
    ProbeRecord(query_id="q2", attempt=1, error="boom"),
    ProbeRecord(query_id="q2", attempt=2),
]


@pytest.fixture
def artifact() -> Artifact:
    return score(QS, PROBES)


def test_write_then_read_round_trips_with_digest(tmp_path: Path, artifact: Artifact) -> None:
    path = tmp_path / "out" / "artifact.json"
    written = write_artifact(artifact, path)
    assert written.digest is not None
    assert written.digest.startswith("sha256:")
    assert len(written.digest) == 7 + 64
    assert written.digest == artifact_digest(artifact)
    back = read_artifact(path)
    assert back == written
    assert list(back.outcomes) == list(artifact.outcomes)
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["digest"] == written.digest
    assert len(data["outcomes"]) == 4
    assert data["outcomes"][2]["error"] == "boom"
    assert data["intervals"]["top1_accuracy"] == list(artifact.intervals["top1_accuracy"])  # type: ignore[arg-type]
    assert "ünïcode" in path.read_text(encoding="utf-8")


def test_digest_is_stable_and_content_based(tmp_path: Path, artifact: Artifact) -> None:
    again = score(QS, list(reversed(PROBES)))
    assert artifact_digest(again) == artifact_digest(artifact)
    priced = [
        p.model_copy(update={"cost_usd": c}) for p, c in zip(PROBES, (0.1, 0.2, 0.3, 1e-17), strict=True)
    ]
    assert artifact_digest(score(QS, priced)) == artifact_digest(score(QS, priced[::-1]))
    changed = score(QS, PROBES[:-1])
    assert artifact_digest(changed) != artifact_digest(artifact)
    # re-formatting the file does not change the content, so it still verifies
    path = tmp_path / "a.json"
    write_artifact(artifact, path)
    data = json.loads(path.read_text())
    path.write_text(json.dumps(data, indent=4, sort_keys=True))
    assert read_artifact(path).digest == data["digest"]


@pytest.mark.parametrize(
    "edit",
    [
        lambda d: d["metrics"].__setitem__("top1_accuracy", 0.99),
        lambda d: d["outcomes"][0].__setitem__("predicted", "xlsx"),
        lambda d: d["classes"].pop(),
        lambda d: d.__setitem__("extra", 1),
    ],
)
def test_tampered_artifact_is_refused_naming_the_file(
    tmp_path: Path, artifact: Artifact, edit: object
) -> None:
    path = tmp_path / "artifact.json"
    write_artifact(artifact, path)
    data = json.loads(path.read_text())
    edit(data)  # type: ignore[operator]
    path.write_text(json.dumps(data))
    with pytest.raises(TamperedError, match=rf"{path}: digest does not match the content"):
        read_artifact(path)


def test_unreadable_artifacts_give_one_clear_line(tmp_path: Path, artifact: Artifact) -> None:
    with pytest.raises(InputError, match="no such artifact"):
        read_artifact(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(InputError, match=r"bad\.json: not an artifact \(invalid JSON"):
        read_artifact(bad)
    bad.write_text('{"queries": []}')
    with pytest.raises(InputError, match="no schema_version"):
        read_artifact(bad)
    path = tmp_path / "a.json"
    write_artifact(artifact, path)
    data = json.loads(path.read_text())
    data["schema_version"] = 99
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match="schema_version 99 is not supported"):
        read_artifact(path)
    data["schema_version"] = 1
    del data["digest"]
    path.write_text(json.dumps(data))
    with pytest.raises(TamperedError, match="carries no digest"):
        read_artifact(path)


def test_invalid_content_with_a_matching_digest_names_the_field(tmp_path: Path, artifact: Artifact) -> None:
    from skillreach.models import sha256_hex
    from skillreach.scoring.artifact import _canonical

    path = tmp_path / "a.json"
    write_artifact(artifact, path)
    data = json.loads(path.read_text())
    data["counts"]["probes"] = "many"
    data.pop("digest")
    data["digest"] = "sha256:" + sha256_hex(_canonical(data))
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match=r"field counts\.probes"):
        read_artifact(path)


def test_outcomes_from_rows_validates_and_reads_back() -> None:
    row = ProbeOutcome(
        "q", 1, "implicit", "pdf", ("guide",), ("guide", "pdf"), ("pdf",), "pdf", None, True, 0.5
    )
    oc = Outcomes.from_rows([row, row._replace(attempt=2, predicted=None, error="x", scored_inv=())])
    assert oc[0] == row
    assert oc[1].error == "x"
    assert oc[-1].attempt == 2
    assert len(oc) == 2
    with pytest.raises(IndexError):
        oc[2]
    with pytest.raises(ValueError, match=r"outcomes\[0\.attempt\]"):
        Outcomes.from_rows([{**row._asdict(), "attempt": "first"}])
    with pytest.raises(ValueError, match="described differently"):
        Outcomes.from_rows([row, row._replace(truth=NO_SKILL)])
    assert Outcomes.empty() == Outcomes.from_rows([])


def test_json_schema_describes_outcome_rows() -> None:
    for mode in ("validation", "serialization"):
        schema = Artifact.model_json_schema(mode=mode)  # type: ignore[arg-type]
        assert schema["properties"]["outcomes"]["items"] == {"$ref": "#/$defs/OutcomeRow"}
        assert set(schema["$defs"]["OutcomeRow"]["properties"]) == set(ProbeOutcome._fields)


def test_canonical_rows_equal_orjson_sorted_dumps_of_every_row() -> None:
    """The writer's hand-assembled row text is byte for byte what the verifier recomputes."""
    import orjson

    rows = [
        {
            "query_id": 'q "1"\n',
            "attempt": 1,
            "kind": "implicit",
            "truth": "pdf",
            "acceptable": ["x-ünï", "y\\z"],
            "invoked": ["x-ünï", "pdf"],
            "scored_inv": ["pdf"],
            "predicted": "x-ünï",
            "error": None,
            "compliance": True,
            "quality": 1e-7,
        },
        {
            "query_id": 'q "1"\n',
            "attempt": 2,
            "kind": "implicit",
            "truth": "pdf",
            "acceptable": ["x-ünï", "y\\z"],
            "invoked": [],
            "scored_inv": [],
            "predicted": None,
            "error": 'rate "limited"\u2028\t',
            "compliance": False,
            "quality": 0.1,
        },
        {
            "query_id": "q2",
            "attempt": 12,
            "kind": "out_of_scope",
            "truth": NO_SKILL,
            "acceptable": [],
            "invoked": ["a", "b", "c"],
            "scored_inv": ["a"],
            "predicted": "a",
            "error": None,
            "compliance": None,
            "quality": None,
        },
    ]
    outcomes = Outcomes.from_rows(rows)
    for chunk in (1, 2, 100):
        text = [r for part in outcomes.canonical_rows(chunk) for r in part]
        assert text == [orjson.dumps(r, option=orjson.OPT_SORT_KEYS).decode() for r in outcomes.to_rows()]


def test_built_as_validated_lays_out_what_validation_would_or_validates() -> None:
    from skillreach.scoring.artifact import AttractorSource, ConfusionCell, UsageTotals, built_as_validated

    rows = [{"expected": "a", "predicted": "b", "count": 3}, {"expected": "c", "predicted": "d", "count": 1}]
    cells = built_as_validated(ConfusionCell, rows)
    assert cells == [ConfusionCell.model_validate(r) for r in rows]
    assert cells[0].model_fields_set == {"expected", "predicted", "count"}
    # keys out of order, or a value validation would change (an int for a float): every row validated
    swapped = built_as_validated(AttractorSource, [{"count": 2, "expected": "a"}])
    assert list(swapped[0].__dict__) == ["expected", "count"]
    usage = built_as_validated(UsageTotals, [{"input_tokens": 1, "cost_usd": 1}])
    assert type(usage[0].cost_usd) is float
    assert built_as_validated(ConfusionCell, []) == []
