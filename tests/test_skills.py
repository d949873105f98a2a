"""Discovery and parsing of SKILL.md: the real corpora (FRONTMATTER-SURVEY.md) and synthetic edge cases."""

from __future__ import annotations

import functools
import json
import logging
import os
import re
import statistics
from collections import Counter
from pathlib import Path

import pytest
import yaml

from skillreach.errors import InputError, NoFrontmatterError, NotFoundError, SkillParseError
from skillreach.skills.discovery import (
    discover,
    find_skill_files,
    load_skills,
    parse_skill,
    read_frontmatter,
)

# --------------------------------------------------------------------------------- real corpora


def _scope_a(corpora: Path) -> list[str]:
    """The survey's scope A: every SKILL.md of the corpora except the labelled sets."""
    return [f for f in find_skill_files(corpora) if f"{os.sep}labelled{os.sep}" not in f]


def _independent_frontmatter(path: str) -> dict:
    """The survey's own method, written independently: split on the first ---/--- pair, safe_load."""
    text = Path(path).read_bytes().decode("utf-8-sig").replace("\r\n", "\n")
    m = re.match(r"---\n(.*?)\n---\n", text, re.DOTALL)
    assert m is not None, path
    return yaml.safe_load(m.group(1))


@pytest.fixture
def parsed_a(corpora: Path):
    return _parse_scope_a(corpora)


@functools.cache
def _parse_scope_a(corpora: Path):
    files = _scope_a(corpora)
    skills, problems = [], []
    for f in files:
        try:
            skills.append(parse_skill(f))
        except SkillParseError as exc:
            problems.append(exc)
    return files, skills, problems


def test_every_real_skill_parses_and_the_three_phase_docs_are_problems(parsed_a) -> None:
    files, skills, problems = parsed_a
    assert len(files) == 244
    assert len(skills) == 241
    assert len(problems) == 3
    assert all(isinstance(p, NoFrontmatterError) for p in problems)
    assert sorted(Path(p.path).parent.name for p in problems) == ["deploy", "prepare", "scaffold"]
    assert all(Path(p.path).parent.parent.name == "azure-app-onboard" for p in problems)
    assert all(str(p).startswith(f"{p.path}:1: no YAML frontmatter") for p in problems)


def test_labelled_corpora_skills_parse_too(corpora: Path) -> None:
    labelled = list(find_skill_files(corpora / "labelled"))
    assert len(labelled) == 15
    for f in labelled:
        skill = parse_skill(f)
        assert skill.name == Path(f).parent.name
        assert skill.description.strip()


def test_descriptions_are_exactly_what_yaml_gives(parsed_a) -> None:
    _, skills, _ = parsed_a
    for s in skills:
        data = _independent_frontmatter(s.path)
        assert s.description == data["description"], s.path
        assert s.name == data["name"]
        assert s.frontmatter == data  # every key kept, values as YAML gives them


def test_folded_and_literal_blocks_keep_yaml_newlines(parsed_a) -> None:
    _, skills, _ = parsed_a
    by_name = {s.name: s for s in skills}
    winrm = by_name["winrm-troubleshooting"]
    assert "\n  " in winrm.description  # more-indented lines of a >- block stay literal
    claude_api = by_name["claude-api"]
    assert claude_api.description.count("\n") == 2  # |- block: 3 lines
    with_newlines = sorted(s.name for s in skills if "\n" in s.description)
    assert with_newlines == ["claude-api", "winrm-troubleshooting"]


def test_crlf_files_parse_like_lf(parsed_a) -> None:
    files, skills, _ = parsed_a
    crlf = [f for f in files if b"\r\n" in Path(f).read_bytes()]
    assert sorted(Path(f).parent.name for f in crlf) == ["azure-validate", "geomaster"]
    for s in skills:
        if s.path in crlf:
            assert "\r" not in s.description
            assert "\r" not in s.body
            assert len(s.body) > 100


def test_survey_scalar_styles(parsed_a) -> None:
    _, skills, _ = parsed_a
    styles = Counter()
    for s in skills:
        fm = read_frontmatter(s.path)
        style = fm.styles["description"]
        if style == "plain":
            assert "\n" not in s.description
        styles[style] += 1
    assert styles == {"plain": 150, '"': 45, ">": 45, "|": 1}
    quoted_with_colon = sum(
        1 for s in skills if read_frontmatter(s.path).styles["description"] == '"' and ": " in s.description
    )
    assert quoted_with_colon == 39


def test_survey_description_lengths(parsed_a) -> None:
    _, skills, _ = parsed_a
    lengths = [len(s.description) for s in skills]
    assert min(lengths) == 79
    assert max(lengths) == 1929
    assert statistics.median(lengths) == 390
    assert round(statistics.mean(lengths)) == 483
    assert sum(n > 500 for n in lengths) == 90
    assert sum(990 <= n <= 1024 for n in lengths) == 17
    over = {s.name: len(s.description) for s in skills if len(s.description) > 1024}
    assert over == {"database-lookup": 1929, "claude-api": 1068}


def test_survey_extra_keys_and_names(parsed_a) -> None:
    _, skills, _ = parsed_a
    keys = Counter(k for s in skills for k in s.frontmatter)
    assert keys["metadata"] == 165
    assert keys["license"] == 163
    assert keys["compatibility"] == 39
    assert keys["allowed-tools"] == 27
    assert keys["context"] == 2
    assert keys["argument-hint"] == 1
    assert keys["author"] == 1
    assert all(isinstance(s.frontmatter["metadata"], dict) for s in skills if "metadata" in s.frontmatter)
    assert all(
        isinstance(s.frontmatter["allowed-tools"], str) for s in skills if "allowed-tools" in s.frontmatter
    )
    assert all(next(iter(read_frontmatter(s.path).data)) == "name" for s in skills)
    assert all(s.name == Path(s.folder).name for s in skills)
    assert all(re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", s.name) for s in skills)


def test_survey_non_ascii(parsed_a) -> None:
    _, skills, _ = parsed_a
    assert sum(any(ord(c) > 127 for c in s.description) for s in skills) == 22
    assert sum(any(ord(c) > 127 for c in s.body) for s in skills) == 189
    assert any("—" in s.description for s in skills)


def test_nested_skills_are_skills(parsed_a) -> None:
    _, skills, _ = parsed_a
    folders = {s.folder for s in skills}
    nested = [s for s in skills if any(s.folder.startswith(f + os.sep) for f in folders)]
    # The survey's "8" counts differently; these are the 7 skills with a skill folder above them.
    assert len(nested) == 7
    assert any(s.folder.endswith(os.path.join("models", "deploy-model", "preset")) for s in nested)


def test_discover_corpora_duplicates_and_problems(corpora: Path) -> None:
    found = discover([corpora])
    assert len(found.problems) == 3
    dup_names = Counter(d.skill.name for d in found.shadowed)
    # same name in more than one corpus: skill-creator ×3, mcp-builder ×2, test-driven-development ×2
    assert dup_names == {"skill-creator": 2, "mcp-builder": 1, "test-driven-development": 1}
    names = [s.name for s in found.skills]
    assert len(names) == len(set(names))
    assert len(found.skills) == 241 + 15 - 4
    for d in found.shadowed:
        assert d.winner in found.skills
        assert d.skill not in found.skills


# -------------------------------------------------------------------------------- synthetic


def write_skill(
    folder: Path,
    name: str | None = None,
    description: str = "Does a thing when asked to.",
    *,
    body: str = "# Body\n\nSteps.\n",
    extra: str = "",
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    lines = ["---"]
    if name is not None:
        lines.append(f"name: {name}")
    lines.append(f"description: {description}")
    if extra:
        lines.append(extra.rstrip("\n"))
    lines.append("---")
    path = folder / "SKILL.md"
    path.write_text("\n".join(lines) + "\n" + body, encoding="utf-8")
    return path


def test_bom_and_crlf(tmp_path: Path) -> None:
    path = tmp_path / "pdf" / "SKILL.md"
    path.parent.mkdir()
    text = '---\r\nname: pdf\r\ndescription: "Read PDFs: text, tables"\r\n---\r\n# PDF\r\n\r\nÜbung — ok\r\n'
    path.write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
    skill = parse_skill(path)
    assert skill.name == "pdf"
    assert skill.description == "Read PDFs: text, tables"
    assert skill.body == "# PDF\n\nÜbung — ok\n"
    assert skill.path == str(path)
    assert skill.folder == str(path.parent)


def test_extra_keys_kept(tmp_path: Path) -> None:
    path = write_skill(
        tmp_path / "x",
        "x",
        extra="license: MIT\nallowed-tools: Read Write\n"
        "disable-model-invocation: true\nmetadata:\n  version: 2",
    )
    skill = parse_skill(path)
    assert skill.frontmatter["license"] == "MIT"
    assert skill.frontmatter["allowed-tools"] == "Read Write"
    assert skill.frontmatter["metadata"] == {"version": 2}
    assert skill.disable_model_invocation is True


def test_bad_yaml_gives_file_line(tmp_path: Path) -> None:
    path = tmp_path / "broken" / "SKILL.md"
    path.parent.mkdir()
    path.write_text("\n---\nname: broken\ndescription: [unclosed\nother: 1\n---\nbody\n", encoding="utf-8")
    with pytest.raises(SkillParseError) as err:
        parse_skill(path)
    assert err.value.path == str(path)
    assert str(err.value).startswith(f"{path}:")
    # the flow sequence opened on file line 4 breaks at line 5 (the YAML mark), not YAML-relative line 3
    assert err.value.line == 5
    assert "invalid YAML" in err.value.what


def test_colon_in_plain_description_is_reported_at_its_line(tmp_path: Path) -> None:
    path = write_skill(tmp_path / "azure", "azure", "Deploy. WHEN: run azd up")
    with pytest.raises(SkillParseError) as err:
        parse_skill(path)
    assert err.value.line == 3


def test_duplicate_key_and_tabs(tmp_path: Path) -> None:
    path = write_skill(tmp_path / "dup", "dup", extra="name: again")
    with pytest.raises(SkillParseError, match=r"duplicate key 'name'") as err:
        parse_skill(path)
    assert err.value.line == 4
    tabbed = tmp_path / "tab" / "SKILL.md"
    tabbed.parent.mkdir()
    tabbed.write_text("---\nname: tab\ndescription: ok text here\nmetadata:\n\tversion: 1\n---\n")
    with pytest.raises(SkillParseError) as err:
        parse_skill(tabbed)
    assert err.value.line == 5


@pytest.mark.parametrize(
    ("content", "line", "what"),
    [
        ("---\nname: a\ndescription: b c d\n", 1, "never closed"),
        ("---\n- a\n- b\n---\n", 2, "not a mapping"),
        ("---\nname: a\n---\n", 1, "missing description"),
        ("---\nname: a\ndescription: ''\n---\n", 3, "missing description"),
        ("---\nname: a\ndescription: [x, y]\n---\n", 3, "must be a string"),
        ("---\nname: 12\ndescription: text\n---\n", 2, "must be a string"),
        ("# Title\n\nno frontmatter\n", 1, "no YAML frontmatter"),
        ("", 1, "no YAML frontmatter"),
    ],
)
def test_unparseable_files(tmp_path: Path, content: str, line: int, what: str) -> None:
    path = tmp_path / "a" / "SKILL.md"
    path.parent.mkdir()
    path.write_text(content, encoding="utf-8")
    with pytest.raises(SkillParseError) as err:
        parse_skill(path)
    assert err.value.line == line
    assert what in err.value.what
    assert str(err.value) == f"{path}:{line}: {err.value.what}"


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "a" / "SKILL.md"
    path.parent.mkdir()
    path.write_bytes(b"---\nname: a\ndescription: caf\xe9\n---\n")
    with pytest.raises(SkillParseError, match="not valid UTF-8") as err:
        parse_skill(path)
    assert err.value.line == 3


def test_missing_name_falls_back_to_folder(tmp_path: Path) -> None:
    skill = parse_skill(write_skill(tmp_path / "my-skill", None))
    assert skill.name == "my-skill"


def test_hidden_folders_are_discovered(tmp_path: Path) -> None:
    for hidden in (".claude/skills/a", ".agents/skills/b", ".github/skills/c", "skills/.curated/d"):
        write_skill(tmp_path / hidden, Path(hidden).name)
    write_skill(tmp_path / ".git" / "e", "e")  # never entered
    write_skill(tmp_path / "node_modules" / "f", "f")
    found = discover([tmp_path])
    assert sorted(s.name for s in found.skills) == ["a", "b", "c", "d"]
    assert not found.problems


def test_nested_skill_and_phase_doc(tmp_path: Path) -> None:
    write_skill(tmp_path / "outer", "outer")
    write_skill(tmp_path / "outer" / "inner" / "deeper", "deeper")
    (tmp_path / "outer" / "phase").mkdir()
    (tmp_path / "outer" / "phase" / "SKILL.md").write_text("# Phase 1\n\nDo things.\n")
    found = discover([tmp_path])
    assert [s.name for s in found.skills] == ["outer", "deeper"]
    assert len(found.problems) == 1
    assert isinstance(found.problems[0], NoFrontmatterError)


def test_symlinks_followed_with_cycle_guard(tmp_path: Path) -> None:
    real = tmp_path / "real"
    write_skill(real / "a", "a")
    write_skill(real / "a" / "sub" / "b", "b")
    os.symlink(real, real / "a" / "sub" / "loop")  # a cycle back to the top
    os.symlink(real / "a", real / "again")  # the same skill reached twice
    outside = tmp_path / "outside"
    write_skill(outside / "c", "c")
    os.symlink(outside / "c", real / "c-link")  # a skill only reachable through a link
    skipped: list[str] = []
    found = discover([real], on_skip=skipped.append)  # a link outside the roots: named, skipped
    assert sorted(s.name for s in found.skills) == ["a", "b"]
    assert len(skipped) == 1
    assert "c-link" in skipped[0]
    assert "--follow-outside" in skipped[0]
    assert sorted(s.name for s in discover([real, outside]).skills) == ["a", "b", "c"]  # inside a root
    found = discover([real], follow_outside=True)
    assert sorted(s.name for s in found.skills) == ["a", "b", "c"]
    assert not found.shadowed  # the same file reached twice is not a duplicate
    assert len(found.files) == 3
    assert any(f.endswith(os.path.join("c-link", "SKILL.md")) for f in found.files)


def test_precedence_first_and_last(tmp_path: Path) -> None:
    personal = write_skill(tmp_path / "personal" / "deploy", "deploy", "Personal deploy skill text.")
    project = write_skill(tmp_path / "project" / "deploy", "deploy", "Project deploy skill text.")
    write_skill(tmp_path / "project" / "other", "other")
    first = discover([tmp_path / "personal", tmp_path / "project"])
    assert {s.name: s.path for s in first.skills} == {
        "deploy": str(personal),
        "other": str(project.parent.parent / "other" / "SKILL.md"),
    }
    assert len(first.shadowed) == 1
    assert first.shadowed[0].skill.path == str(project)
    assert first.shadowed[0].winner.path == str(personal)
    assert "shadowed by" in str(first.shadowed[0])
    last = discover([tmp_path / "personal", tmp_path / "project"], precedence="last")
    assert next(s for s in last.skills if s.name == "deploy").path == str(project)
    assert last.shadowed[0].skill.path == str(personal)
    with pytest.raises(InputError, match="precedence"):
        discover([tmp_path], precedence="middle")  # type: ignore[arg-type]


def test_bad_file_never_aborts_discovery(tmp_path: Path) -> None:
    write_skill(tmp_path / "good", "good")
    bad = tmp_path / "bad" / "SKILL.md"
    bad.parent.mkdir()
    bad.write_text('---\nname: bad\ndescription: "unterminated\n---\n')
    found = discover([tmp_path])
    assert [s.name for s in found.skills] == ["good"]
    assert len(found.problems) == 1
    assert re.match(rf"{re.escape(str(bad))}:\d+: invalid YAML", str(found.problems[0]))


def test_root_may_be_a_skill_md_and_roots_overlap(tmp_path: Path) -> None:
    path = write_skill(tmp_path / "one", "one")
    found = discover([path, tmp_path])
    assert [s.name for s in found.skills] == ["one"]
    assert not found.shadowed


def test_missing_root_and_empty_root(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match="no such folder"):
        discover([tmp_path / "nope"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match=r"no SKILL.md under .*empty; pass --skills DIR"):
        load_skills([tmp_path / "empty"])


def test_load_skills_reports_problems(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    write_skill(tmp_path / "a" / "good", "good")
    write_skill(tmp_path / "b" / "good", "good")
    (tmp_path / "a" / "doc").mkdir()
    (tmp_path / "a" / "doc" / "SKILL.md").write_text("plain text\n")
    lines: list[str] = []
    skills = load_skills([tmp_path / "a", tmp_path / "b"], on_problem=lines.append)
    assert [s.name for s in skills] == ["good"]
    assert len(lines) == 2
    assert any(":1: no YAML frontmatter" in line for line in lines)
    assert any("shadowed by" in line for line in lines)
    with caplog.at_level(logging.WARNING, logger="skillreach.skills.discovery"):
        load_skills(tmp_path / "a")
    assert any("no YAML frontmatter" in r.getMessage() for r in caplog.records)


def test_frontmatter_is_json_safe(tmp_path: Path) -> None:
    path = write_skill(
        tmp_path / "d", "d", extra="released: 2024-05-01\n3: three\ntags: !!set {b: null, a: null}"
    )
    fm = parse_skill(path).frontmatter
    assert fm["released"] == "2024-05-01"
    assert fm["3"] == "three"
    assert fm["tags"] == ["a", "b"]
    json.dumps(fm)


def test_skill_root_is_the_folder_given(tmp_path: Path) -> None:
    path = write_skill(tmp_path / "skills" / "one", "one")
    assert discover([tmp_path / "skills"]).skills[0].root == str(tmp_path / "skills")
    assert discover([path]).skills[0].root == str(path.parent)
