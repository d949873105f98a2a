"""A folder per study, always (issue 29, problem 9): the service's study with more attempts and
``make demo``'s ``skillreach run`` (the same study, one attempt) share the derived folder without an
error for either: more attempts extend it, fewer read their subset. An explicit ``--out`` still refuses
another configuration (``test_out_fingerprint.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from skillreach.cli import main
from skillreach.study.probe_log import read_probes


def _study(root: Path) -> None:
    (root / "study.toml").write_text(
        f'skills = ["skills"]\nqueries = "queries.json"\nruntime = "fake"\n'
        f'[runtime_options]\nscript = "{root / "good.json"}"\n',
        encoding="utf-8",
    )


def _folders(root: Path) -> list[Path]:
    return sorted(p for p in (root / "runs").iterdir() if p.is_dir())


def test_more_attempts_extend_the_derived_folder_and_fewer_read_their_subset(
    world: dict[str, Path], capfd: pytest.CaptureFixture[str]
) -> None:
    root = world["root"]
    _study(root)
    # the service's study: two attempts
    assert main(["run", "--config", "study.toml", "--attempts", "2"]) == 0
    [folder] = _folders(root)
    probes = len(read_probes(folder / "probes.jsonl"))
    capfd.readouterr()

    # `make demo`: the same study, one attempt: same folder, nothing probed, no error
    assert main(["run", "--config", "study.toml"]) == 0
    err = capfd.readouterr().err
    assert "attempts 2 → 1" not in err
    assert "holds probes" not in err
    assert _folders(root) == [folder]
    assert len(read_probes(folder / "probes.jsonl")) == probes  # read, not probed again
    artifact = json.loads((folder / "artifact.json").read_text(encoding="utf-8"))
    assert artifact["attempts"] == 1  # its subset: attempt 1 only
    assert json.loads((folder / "study.json").read_text(encoding="utf-8"))["config"]["attempts"] == 1

    # and the service's again: resumes, nothing paid twice
    assert main(["run", "--config", "study.toml", "--attempts", "2"]) == 0
    assert "holds probes" not in capfd.readouterr().err
    assert len(read_probes(folder / "probes.jsonl")) == probes
    assert json.loads((folder / "artifact.json").read_text(encoding="utf-8"))["attempts"] == 2

    # three attempts extend the folder: only the third attempt is probed
    assert main(["run", "--config", "study.toml", "--attempts", "3"]) == 0
    assert _folders(root) == [folder]
    assert len(read_probes(folder / "probes.jsonl")) == probes * 3 // 2
