"""``skillreach overlap``: table, --json on stdout alone, problems on stderr, exit codes."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from skillreach.cli import main
from skillreach.skills.bm25 import CAVEAT
from tests.helpers import hang


def skill(root: Path, name: str, description: str) -> Path:
    path = root / name / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\nname: {name}\ndescription: {description}\n---\n# {name}\n", encoding="utf-8")
    return path


@pytest.fixture
def catalog(tmp_path: Path) -> Path:
    skill(tmp_path, "release-deploy", "Deploy a release to production and verify the deploy.")
    skill(tmp_path, "release-rollback", "Roll back a failed release deploy to the previous version.")
    skill(tmp_path, "config-push", "Push configuration changes to production services.")
    skill(tmp_path, "pdf-extract", "Extract text and tables from PDF documents.")
    broken = tmp_path / "broken" / "SKILL.md"
    broken.parent.mkdir()
    broken.write_text("---\nname: broken\ndescription: [unclosed\n---\n")
    return tmp_path


def test_overlap_json(catalog: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["overlap", str(catalog), "--json", "--top", "2"]) == 0
    captured = capsys.readouterr()
    data = json.loads(captured.out)  # stdout holds the JSON alone
    assert data["caveat"] == CAVEAT
    assert data["top"] == 2
    by_name = {s["name"]: s for s in data["skills"]}
    assert set(by_name) == {"release-deploy", "release-rollback", "config-push", "pdf-extract"}
    deploy = by_name["release-deploy"]
    assert deploy["rivals"][0]["name"] == "release-rollback"
    assert len(deploy["rivals"]) <= 2
    for r in deploy["rivals"]:
        assert r["ratio"] == pytest.approx(r["score"] / deploy["self_score"])
    assert by_name["pdf-extract"]["rivals"] == []
    ratios = [max((r["ratio"] for r in s["rivals"]), default=0.0) for s in data["skills"]]
    assert ratios == sorted(ratios, reverse=True)  # most threatened first
    # the broken file is reported on stderr as path:line, the rest still processed
    broken = str(catalog / "broken" / "SKILL.md")
    assert f"{broken}:3: invalid YAML" in captured.err


def test_overlap_table(catalog: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["overlap", str(catalog)]) == 0
    out = capsys.readouterr().out
    assert "release-rollback" in out
    assert "ratio" in out
    assert "targeting device, not a verdict" in " ".join(out.split())


def test_overlap_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["overlap", str(tmp_path / "missing")]) == 2
    assert "no such folder" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["overlap", str(tmp_path / "empty")]) == 2
    assert "no SKILL.md under" in capsys.readouterr().err
    assert main(["overlap", str(tmp_path), "--top", "0"]) == 2
    assert "--top must be at least 1" in capsys.readouterr().err
    assert main(["lint", str(tmp_path), "--budget", "0"]) == 2
    assert "--budget must be a positive" in capsys.readouterr().err


def test_overlap_real_entry_point(catalog: Path) -> None:
    exe = Path(sys.executable).parent / "skillreach"
    proc = hang.finish([str(exe), "overlap", str(catalog), "--json"], limit_s=120)
    assert proc.returncode == 0, proc.stderr
    assert len(json.loads(proc.stdout)["skills"]) == 4
    assert "invalid YAML" in proc.stderr
