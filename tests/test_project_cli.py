"""``--version``, ``init``, ``config show|docs`` and the project's command table in interfaces.md."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import typer.main

from skillreach.cli import app, main
from skillreach.settings import Settings, setting_rows
from tests.conftest import REPO
from tests.helpers import hang

SKILLREACH = Path(sys.executable).with_name("skillreach")


def _skills_repo(corpora: Path, root: Path, names: tuple[str, ...]) -> Path:
    """A git repository of real public skills (copied into the test's temporary folder)."""
    for name in names:
        src = corpora / "anthropics__skills" / name
        if not (src / "SKILL.md").is_file():
            pytest.skip(f"{src} is not in the corpora")
        shutil.copytree(src, root / "skills" / name)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def test_version_through_the_installed_command() -> None:
    from skillreach import __version__

    out = subprocess.run([str(SKILLREACH), "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"skillreach {__version__}"


def test_init_writes_the_kit_and_never_overwrites(
    corpora: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = _skills_repo(corpora, tmp_path / "repo", ("canvas-design", "brand-guidelines", "mcp-builder"))
    (repo / ".gitignore").write_text("node_modules", encoding="utf-8")  # no final newline
    monkeypatch.chdir(repo)
    assert main(["init"]) == 0
    out = capsys.readouterr().out
    for rel in ("skillreach.toml", "evals/queries.yaml", ".github/workflows/skillreach.yml"):
        assert (repo / rel).is_file()
        assert f"wrote {rel}" in out
    assert (repo / ".gitignore").read_text(encoding="utf-8").splitlines() == [
        "node_modules", "runs/", ".skillreach/",
    ]
    nxt = out.split("next:", 1)[1].strip().splitlines()
    assert len(nxt) == 3
    # the three next commands are real: each runs as printed
    for line in nxt:
        words = line.split()
        assert words[0] == "skillreach"
        if words[1] == "run":
            continue  # a study; its configuration is checked below
        assert main(words[1:]) == 0, line
    assert "sealed 7 queries (implicit 2, contextual 2, neighbor_negative 2, out_of_scope 1)" in (
        capsys.readouterr().out
    )
    # the config file: every key of the settings, and each line uncommented gives the default again
    toml = (repo / "skillreach.toml").read_text(encoding="utf-8")
    assert tomllib.loads(toml) == {}
    for name in Settings.model_fields:
        assert re.search(rf"^# (\[{name}\]|{name} =)", toml, flags=re.MULTILINE), name
    for line in toml.splitlines():
        if re.match(r"^# \[[a-z_]+\]$", line):
            break  # the tables' keys follow (alert_delivery's timeout_s is not the top-level one)
        m = re.match(r"^# ([a-z_]+ = .+)$", line)
        if m and "(unset" not in line:
            one = tomllib.loads(m.group(1))
            key = next(iter(one))
            if key in Settings.model_fields:
                assert Settings(**one) == Settings(), line
    assert main(["config", "show", "--config", "skillreach.toml"]) == 0
    capsys.readouterr()
    # the workflow runs the action on the skills folder and the sealed set
    workflow = (repo / ".github/workflows/skillreach.yml").read_text(encoding="utf-8")
    assert "uses: skillreach/skillreach@v0" in workflow
    assert "skills: skills" in workflow
    assert "queries: evals/queries.json" in workflow
    assert "secrets.ANTHROPIC_API_KEY" in workflow
    # a second init refuses and writes nothing; --force overwrites; .gitignore lines are not repeated
    (repo / "skillreach.toml").write_text("attempts = 3\n", encoding="utf-8")
    assert main(["init"]) == 2
    err = capsys.readouterr().err
    assert "skillreach.toml, evals/queries.yaml, .github/workflows/skillreach.yml: already there" in err
    assert "--force" in err
    assert (repo / "skillreach.toml").read_text(encoding="utf-8") == "attempts = 3\n"
    assert main(["init", "--force"]) == 0
    assert (repo / "skillreach.toml").read_text(encoding="utf-8") == toml
    assert (repo / ".gitignore").read_text(encoding="utf-8").count("runs/") == 1


def test_init_refuses_a_folder_without_skills(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["init", str(tmp_path)]) == 2
    assert "pass --skills DIR" in capsys.readouterr().err
    assert not (tmp_path / "skillreach.toml").exists()


def test_config_show_names_where_each_value_came_from(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = tmp_path / "s.toml"
    cfg.write_text('attempts = 3\nseed = 7\n[gates]\ncompliance = -0.1\n', encoding="utf-8")
    monkeypatch.setenv("SKILLREACH_SEED", "11")
    monkeypatch.setenv("SKILLREACH_MAX_TURNS", "5")
    monkeypatch.setenv("SKILLREACH_DATABASE_URL", "postgresql+psycopg://u:hunter2@db/x")
    code = main(["config", "show", "--config", str(cfg), "--set", "attempts=4", "--json"])
    assert code == 0
    text = capsys.readouterr().out
    assert "hunter2" not in text
    import json

    rows = {r["key"]: r for r in json.loads(text)}
    assert rows["attempts"] == {"key": "attempts", "value": 4, "source": "flag"}
    assert rows["seed"] == {"key": "seed", "value": 7, "source": f"file {cfg}"}
    assert rows["max_turns"] == {"key": "max_turns", "value": 5, "source": "environment SKILLREACH_MAX_TURNS"}
    assert rows["gates.compliance"]["value"] == -0.1
    assert rows["gates.compliance"]["source"] == f"file {cfg}"
    assert rows["gates.activation"]["source"] == "default"
    assert rows["database_url"]["value"] == "***"
    assert rows["runtime"] == {"key": "runtime", "value": "keyword", "source": "default"}
    assert set(rows) >= set(Settings.model_fields) - {"gates"}


def test_unknown_key_gets_did_you_mean_and_the_valid_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "s.toml"
    cfg.write_text("max_turn = 3\n", encoding="utf-8")
    assert main(["config", "show", "--config", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert "max_turn: unknown setting; did you mean max_turns?; valid keys: home, database_url," in err
    assert err.count("\n") == 1
    cfg.write_text("zzz = 3\n", encoding="utf-8")
    assert main(["lint", str(REPO / "skillreach" / "example" / "skills"), "--config", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert "zzz: unknown setting; check its spelling; valid keys: " in err
    assert "generator_model" in err


def test_configuration_page_is_generated_from_the_settings_model() -> None:
    from skillreach.cli.project_cmds import configuration_markdown

    page = (REPO / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert page == configuration_markdown(), (
        "docs/configuration.md differs from the Settings model; regenerate it: "
        "skillreach config docs > docs/configuration.md"
    )
    for row in setting_rows():
        assert f"| `{row.key}` |" in page
        assert row.description, f"setting {row.key} has no docstring (what it does)"


def _commands() -> list[str]:
    root = typer.main.get_command(app)
    found: list[str] = []

    def walk(cmd: object, path: list[str]) -> None:
        for name, sub in getattr(cmd, "commands", {}).items():
            if getattr(sub, "hidden", False):
                continue
            if hasattr(sub, "commands"):
                walk(sub, [*path, name])
            else:
                found.append(" ".join([*path, name]))

    walk(root, [])
    return found


def test_interfaces_lists_every_command_with_exit_codes() -> None:
    text = (REPO / "docs" / "spec" / "interfaces.md").read_text(encoding="utf-8")
    marker = "## Every command and its exit codes (this project's own section"
    assert marker in text
    own = text.split(marker, 1)[1]
    rows = re.findall(r"^\| `skillreach ([^`]*)` \| [^|]*(?:\\\|[^|]*)* \| (.+) \|$", own, flags=re.MULTILINE)
    documented = {" ".join(w for w in cmd.split() if re.fullmatch(r"[a-z][a-z-]*", w)) for cmd, _ in rows}
    commands = _commands()
    assert len(commands) >= 25
    missing = [c for c in commands if not any(d == c or d.startswith(c + " ") for d in documented)]
    assert not missing, f"interfaces.md has no row for: {missing}"
    assert all(re.search(r"\b0\b", codes) for _, codes in rows), "every row names its exit codes"
    assert any(cmd.startswith("--version") for cmd, _ in rows)


def test_a_repeated_single_value_option_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["score", "--queries", "a.json", "--queries", "b.json", "--probes", "p", "--out", "o/"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "skillreach: error: skillreach score: --queries was given twice; give it once (it takes one value)\n"
    )
    assert main(["queries", "seal", "in.yaml", "--out", "x.json", "--out=y.json"]) == 2
    assert "skillreach queries seal: --out was given twice" in capsys.readouterr().err
    # options meant to repeat still may: the error is about the missing folder, not the repeat
    assert main(["check", "--changed", "--skills", "nope-a", "--skills", "nope-b"]) == 2
    assert "given twice" not in capsys.readouterr().err


def test_offline_runtime_said_and_piped_tables_not_cut(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SKILLREACH_", "PREFECT_API"))}
    env["COLUMNS"] = "40"  # what CI sets; a pipe must not cut ids or values to it

    def sr(*args: str) -> hang.Outcome:
        out = hang.finish([str(SKILLREACH), *args], limit_s=300, cwd=tmp_path, env=env)
        assert out.returncode == 0, out.stderr
        return out

    a = sr("run", "--out", "A").stdout
    note = "note: runtime keyword is a lexical baseline (word overlap with the descriptions), not an agent"
    assert note in " ".join(a.split())
    md = sr("report", "A/artifact.json", "--markdown", "-", "-q").stdout
    assert "> **Note:** runtime keyword is a lexical baseline" in md
    sr("report", "A/artifact.json", "--html", "A/again.html", "-q")
    assert 'data-offline-runtime="keyword"' in (tmp_path / "A" / "again.html").read_text(encoding="utf-8")
    # a second arm with one description edited: the diff's tables, piped, keep every id whole
    skills = tmp_path / "skills"
    shutil.copytree(REPO / "skillreach" / "example" / "skills", skills)
    md_file = skills / "log-search" / "SKILL.md"
    edited = "description: Search logs, traces and error spikes in any service. "
    text = md_file.read_text(encoding="utf-8")
    md_file.write_text(text.replace("description: ", edited, 1), encoding="utf-8")
    queries = REPO / "skillreach" / "example" / "queries.json"
    sr("run", "--skills", str(skills), "--queries", str(queries), "--out", "B")
    sr("run", "--skills", str(REPO / "skillreach" / "example" / "skills"), "--queries", str(queries),
       "--out", "A2")
    out = sr("diff", "A2", "B", "--vary", "description").stdout
    assert "…" not in out, out
    assert max(len(line) for line in out.splitlines()) > 40
    import json

    data = json.loads(sr("diff", "A2", "B", "--vary", "description", "--json").stdout)
    for flip in [*data["won"], *data["lost"]]:
        assert flip["query_id"] in out


def test_help_texts_are_plain_paragraphs() -> None:
    root = typer.main.get_command(app)
    seen = 0

    def walk(cmd: Any) -> None:
        nonlocal seen
        texts = [cmd.help or ""] + [getattr(p, "help", None) or "" for p in cmd.params]
        for text in texts:
            assert "``" not in text, text
            assert not re.search(r":(func|class|mod|meth|data):`", text), text
            for para in text.split("\n\n"):
                lines = para.splitlines()
                assert all(ln.startswith(("- ", "* ")) for ln in lines[1:]), f"hard-wrapped: {para!r}"
        seen += 1
        for sub in getattr(cmd, "commands", {}).values():
            walk(sub)

    walk(root)
    assert seen > 25


def test_shell_completion_through_the_installed_command() -> None:
    script = subprocess.run([str(SKILLREACH), "completion", "bash"], capture_output=True, text=True,
                            check=True).stdout
    assert "_SKILLREACH_COMPLETE=complete_bash" in script
    env = {**os.environ, "COMP_WORDS": "skillreach queries s", "COMP_CWORD": "2",
           "_SKILLREACH_COMPLETE": "complete_bash"}
    out = subprocess.run([str(SKILLREACH)], capture_output=True, text=True, env=env, check=True).stdout
    assert out.split() == ["seal"]
    bad = subprocess.run([str(SKILLREACH), "completion", "tcsh"], capture_output=True, text=True, check=False)
    assert bad.returncode == 2
    assert "bash, zsh, fish, powershell" in bad.stderr


def test_uplift_refuses_a_runtime_that_cannot_produce_quality(tmp_path: Path) -> None:
    example = REPO / "skillreach" / "example"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SKILLREACH_", "PREFECT_API"))}
    out = hang.finish(
        [str(SKILLREACH), "uplift", "release-deploy", "--skills", str(example / "skills"),
         "--queries", str(example / "queries.json"), "--runtime", "keyword"],
        limit_s=300,
        cwd=tmp_path,
        env=env,
    )
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith("skillreach: error: uplift: runtime keyword cannot produce task quality")
    assert len(out.stderr.splitlines()) == 1
