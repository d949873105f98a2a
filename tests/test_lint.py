"""``skillreach lint``: every error and warning, exit codes, text and github formats."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from skillreach.cli import main
from skillreach.errors import NotFoundError
from skillreach.skills.lint import format_github, format_text, lint, listing_text


def skill(root: Path, folder: str, frontmatter: str, body: str = "# Body\n") -> Path:
    path = root / folder / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\n{frontmatter.strip()}\n---\n{body}", encoding="utf-8")
    return path


GOOD = "Convert PDF files to clean Markdown; use when the user hands over a PDF."


def codes(report) -> list[tuple[str, str, str | None, int | None]]:
    return [
        (f.severity, f.code, Path(f.path).parent.name if f.path else None, f.line) for f in report.findings
    ]


def test_clean(tmp_path: Path) -> None:
    skill(tmp_path, "pdf-to-markdown", f"name: pdf-to-markdown\ndescription: {GOOD}")
    report = lint([tmp_path])
    assert report.findings == []
    assert report.exit_code == 0
    assert format_text(report) == "1 SKILL.md checked: no problems"


@pytest.mark.parametrize(
    ("folder", "frontmatter", "expected"),
    [
        ("bad", "name: bad\ndescription: [oops", ("error", "invalid-yaml", "bad", 3)),
        ("nodesc", "name: nodesc", ("error", "missing-description", "nodesc", 1)),
        ("emptydesc", "name: emptydesc\ndescription: ''", ("error", "missing-description", "emptydesc", 3)),
        (
            "listdesc",
            "name: listdesc\ndescription:\n  - a\n  - b",
            ("error", "missing-description", "listdesc", 3),
        ),
        ("noname", f"description: {GOOD}", ("error", "missing-name", "noname", 1)),
        ("Upper", f"name: Upper\ndescription: {GOOD}", ("error", "invalid-name", "Upper", 2)),
        ("a--b", f"name: a--b\ndescription: {GOOD}", ("error", "invalid-name", "a--b", 2)),
        ("x" * 65, f"name: {'x' * 65}\ndescription: {GOOD}", ("error", "invalid-name", "x" * 65, 2)),
        ("folder", f"name: other-name\ndescription: {GOOD}", ("error", "name-mismatch", "folder", 2)),
        ("short", "name: short\ndescription: Too short.", ("warning", "short-description", "short", 3)),
        ("long", f"name: long\ndescription: {'word ' * 210}", ("warning", "long-description", "long", 3)),
        (
            "todo",
            "name: todo\ndescription: TODO describe when to use this skill",
            ("warning", "placeholder", "todo", 3),
        ),
        (
            "ins",
            "name: ins\ndescription: '[Insert a description of the skill here]'",
            ("warning", "placeholder", "ins", 3),
        ),
        ("bash", f"name: bash\ndescription: {GOOD}", ("warning", "reserved-name", "bash", 2)),
        (
            "xml",
            "name: xml\ndescription: Use <example>when asked</example> to do it.",
            ("warning", "xml-tags", "xml", 3),
        ),
        ("web-fetch", f"name: web-fetch\ndescription: {GOOD}", ("warning", "reserved-name", "web-fetch", 2)),
        (
            "claude-helper",
            f"name: claude-helper\ndescription: {GOOD}",
            ("warning", "reserved-name", "claude-helper", 2),
        ),
    ],
)
def test_each_finding(tmp_path: Path, folder: str, frontmatter: str, expected: tuple) -> None:
    skill(tmp_path, folder, frontmatter)
    report = lint([tmp_path])
    assert expected in codes(report)
    assert report.exit_code == (1 if expected[0] == "error" else 0)


def test_placeholder_in_name_is_an_error_and_a_warning(tmp_path: Path) -> None:
    skill(tmp_path, "SKILL_NAME", f"name: SKILL_NAME\ndescription: {GOOD}")
    found = {(f.severity, f.code) for f in lint([tmp_path]).findings}
    assert {("error", "invalid-name"), ("warning", "placeholder")} <= found


def test_angle_brackets_that_are_not_tags_pass(tmp_path: Path) -> None:
    skill(tmp_path, "cmp", "name: cmp\ndescription: Compare values when a < b or b > c in reports.")
    assert lint([tmp_path]).findings == []


def test_no_frontmatter_is_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "phase" / "SKILL.md"
    path.parent.mkdir()
    path.write_text("# Phase 2\n\nSteps.\n")
    report = lint([tmp_path])
    assert codes(report) == [("warning", "no-frontmatter", "phase", 1)]
    assert report.exit_code == 0


def test_duplicate_names_across_roots(tmp_path: Path) -> None:
    first = skill(tmp_path / "a", "deploy", f"name: deploy\ndescription: {GOOD}")
    second = skill(tmp_path / "b", "deploy", f"name: deploy\ndescription: {GOOD}")
    report = lint([tmp_path / "a", tmp_path / "b"])
    dup = [f for f in report.findings if f.code == "duplicate-name"]
    assert len(dup) == 1
    assert dup[0].path == str(second)
    assert dup[0].line == 2
    assert str(first) in dup[0].message or os.path.relpath(first) in dup[0].message
    assert report.exit_code == 1
    # the same folder given twice is not a duplicate
    assert lint([tmp_path / "a", tmp_path / "a"]).findings == []


def test_listing_budget(tmp_path: Path) -> None:
    for i in range(5):
        skill(tmp_path, f"s{i}", f"name: s{i}\ndescription: {GOOD}")
    skill(tmp_path, "hidden", f"name: hidden\ndescription: {GOOD}\ndisable-model-invocation: true")
    size = len(listing_text([(f"s{i}", GOOD) for i in range(5)]))
    report = lint([tmp_path], budget=size)
    assert report.listing_chars == size  # the hidden skill is not listed
    assert report.listed == 5
    assert report.findings == []
    over = lint([tmp_path], budget=size - 1)
    assert codes(over) == [("warning", "listing-budget", None, None)]
    assert f"{size:,} characters" in over.findings[0].message
    assert over.exit_code == 0


def test_missing_dir_and_nothing_found(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError):
        lint([tmp_path / "nope"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(NotFoundError, match=r"no SKILL\.md under"):
        lint([tmp_path / "empty"])
    skill(tmp_path / "full", "ok", f"name: ok\ndescription: {GOOD}")
    report = lint([tmp_path / "full", tmp_path / "empty"])
    assert [f.code for f in report.findings] == ["empty-root"]


def test_bad_file_does_not_stop_the_others(tmp_path: Path) -> None:
    skill(tmp_path, "aa", 'name: aa\ndescription: "unterminated')
    skill(tmp_path, "bb", "name: BB\ndescription: Fine description of a skill here.")
    report = lint([tmp_path])
    assert {(f.code, Path(f.path).parent.name) for f in report.findings} == {
        ("invalid-yaml", "aa"),
        ("invalid-name", "bb"),
        ("name-mismatch", "bb"),
    }


def test_text_format_groups_by_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    skill(tmp_path, "Bad", "name: Bad\ndescription: short")
    skill(tmp_path, "good", f"name: good\ndescription: {GOOD}")
    text = format_text(lint([Path(".")]))
    lines = text.splitlines()
    assert lines[0] == os.path.join("Bad", "SKILL.md")
    assert lines[1].split()[:2] == ["2", "error"]
    assert any("[short-description]" in line for line in lines)
    assert lines[-1] == "1 error, 1 warning in 1 file (2 SKILL.md checked)"


def test_github_format(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    skill(tmp_path, "my,skill", "name: my,skill\ndescription: 'TODO: 100% done\n\n  next'")
    out = format_github(lint([Path(".")], budget=10)).splitlines()
    err = next(line for line in out if line.startswith("::error"))
    assert err.startswith("::error file=my%2Cskill/SKILL.md,line=2,title=skillreach lint invalid-name::")
    warn = next(line for line in out if "placeholder" in line)
    assert warn.startswith("::warning file=my%2Cskill/SKILL.md,line=3,title=skillreach lint placeholder::")
    budget = next(line for line in out if "listing-budget" in line)
    assert budget.startswith("::warning title=skillreach lint listing-budget::")
    assert all("\n" not in line for line in out)
    assert out[-1].endswith("in 1 SKILL.md")


# ------------------------------------------------------------------------------------------- CLI


def test_cli_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    skill(tmp_path / "clean", "ok", f"name: ok\ndescription: {GOOD}")
    assert main(["lint", str(tmp_path / "clean")]) == 0
    assert "no problems" in capsys.readouterr().out

    skill(tmp_path / "warn", "short", "name: short\ndescription: tiny")
    assert main(["lint", str(tmp_path / "warn")]) == 0
    assert "[short-description]" in capsys.readouterr().out

    skill(tmp_path / "err", "bad", "name: bad\ndescription: 'x")
    assert main(["lint", str(tmp_path / "err"), str(tmp_path / "clean")]) == 1
    captured = capsys.readouterr()
    assert "[invalid-yaml]" in captured.out
    assert captured.err == "skillreach: error: lint found 1 error in 2 SKILL.md (listed above)\n"

    assert main(["lint", str(tmp_path / "missing")]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("skillreach: error: ")
    assert "missing" in captured.err
    assert "Traceback" not in captured.err


def test_cli_github_and_budget(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    skill(tmp_path, "ok", f"name: ok\ndescription: {GOOD}")
    assert main(["lint", str(tmp_path), "--format", "github", "--budget", "10"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("::warning title=skillreach lint listing-budget::")
    # the setting is read from the environment when --budget is not given
    monkeypatch.setenv("SKILLREACH_LISTING_BUDGET_CHARS", "5")
    assert main(["lint", str(tmp_path)]) == 0
    assert "over the budget of 5" in capsys.readouterr().out
    assert main(["lint", str(tmp_path), "--budget", "100000"]) == 0
    assert "no problems" in capsys.readouterr().out


def test_cli_lint_real_corpora(corpora: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", str(corpora / "obra__superpowers"), str(corpora / "openai__skills")]) == 0
    capsys.readouterr()
    # the corpora share three names across repositories: duplicate-name errors
    assert main(["lint", str(corpora), "--format", "github"]) == 1
    out = capsys.readouterr().out
    assert out.count("title=skillreach lint duplicate-name") == 4
    assert out.count("title=skillreach lint no-frontmatter") == 3
    assert out.count("title=skillreach lint long-description") == 2
    assert "title=skillreach lint invalid-yaml" not in out
