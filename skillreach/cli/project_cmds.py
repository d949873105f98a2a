"""``skillreach --version``, ``skillreach init`` and ``skillreach config show``: adopting the tool in a
skills repository, and seeing the configuration a command would use."""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import re
from pathlib import Path
from typing import Any

import typer

__all__ = ["ACTION_REF", "configuration_markdown", "register"]

ACTION_REF = "skillreach/skillreach@v0"
"""What ``init``'s workflow names in ``uses:`` (``--action`` changes it)."""

IGNORED = ("runs/", ".skillreach/")
"""What ``run`` and ``check`` write inside a skills repository and nobody should commit."""


def _version_callback(value: bool) -> None:
    if value:
        from skillreach import __version__

        typer.echo(f"skillreach {__version__}")
        raise typer.Exit(0)


def _root_callback(
    ctx: typer.Context,
    version: bool = typer.Option(
        False,
        "--version",
        callback=_version_callback,
        is_eager=True,
        help="Print the installed version and exit.",
    ),
) -> None:
    """Measure whether LLM agents reach the right Agent Skill."""
    _refuse_repeated_options(ctx)


def _refuse_repeated_options(ctx: typer.Context) -> None:
    """``--queries a --queries b`` is an error, not "the last one wins": an option that takes one value
    may be given once (options meant to repeat, ``--skills`` or ``--gate``, may repeat). The command's
    own words are parsed after this callback, so the check runs first thing in its ``parse_args``."""
    name = ctx.invoked_subcommand
    if name is None:
        return
    sub: Any = ctx.command.get_command(ctx, name)  # type: ignore[attr-defined]
    if sub is None or getattr(sub, "_skillreach_checked", False):
        return
    parse = sub.parse_args

    def checked(sub_ctx: Any, args: list[str]) -> Any:
        _check_repeats(sub_ctx, sub, list(args), ["skillreach", name])
        return parse(sub_ctx, args)

    sub.parse_args = checked
    sub._skillreach_checked = True


def _check_repeats(ctx: Any, cmd: Any, args: list[str], path: list[str]) -> None:
    from skillreach.errors import InputError

    i = 0
    while hasattr(cmd, "get_command") and i < len(args):  # a group: the command its words name
        sub = cmd.get_command(ctx, args[i])
        if sub is None:
            return
        cmd, path, i = sub, [*path, args[i]], i + 1
    single: dict[str, str] = {}
    for param in cmd.params:
        if param.param_type_name == "option" and not (param.multiple or param.is_flag or param.count):
            for opt in (*param.opts, *param.secondary_opts):
                single[opt] = param.opts[0]
    seen: set[str] = set()
    for word in args[i:]:
        if word == "--":
            break
        name = single.get(word.split("=", 1)[0] if word.startswith("--") else word)
        if name is None:
            continue
        if name in seen:
            raise InputError(f"{' '.join(path)}: {name} was given twice; give it once (it takes one value)")
        seen.add(name)


# -- init ------------------------------------------------------------------------------------------


def _first_sentence(text: str, limit: int = 160) -> str:
    flat = " ".join(text.split())
    for stop in (". ", "; "):
        if stop in flat:
            flat = flat.split(stop, 1)[0]
            break
    flat = flat.rstrip(".")
    return flat if len(flat) <= limit else flat[: limit - 1].rsplit(" ", 1)[0] + "…"


def _quoted(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)  # a JSON string is a valid YAML scalar


def queries_yaml(skills: list[tuple[str, str]]) -> str:
    """``evals/queries.yaml``: one query of each kind for (up to) two skills, as ``(name, description)``."""
    lines = [
        "# A starting query set written by `skillreach init`: one example of each kind for two of this",
        "# repository's skills. Replace the texts with real requests of your users (never the skill's",
        "# name or description words), add more per skill, then seal it:",
        "#   skillreach queries seal evals/queries.yaml --skills SKILLS --out evals/queries.json",
        "# Kinds: implicit (the request never names the skill), contextual (the request leans on pasted",
        "# context), neighbor_negative (close to one skill, but a neighbour owns it; `notes` says which",
        "# skill it must not trigger), out_of_scope (no skill should fire: no expected_skill).",
        "catalog_id: all",
        "queries:",
    ]
    for i, (name, description) in enumerate(skills):
        task = _first_sentence(description)
        ask = task[:1].lower() + task[1:]
        lines += [
            f"  # ---------------------------------------------------------------- {name}",
            f"  - id: {name}-implicit-01",
            f"    text: {_quoted(f'Can you help me with this: {ask}?')}",
            f"    expected_skill: {name}",
            "    kind: implicit",
            f"  - id: {name}-contextual-01",
            "    text: " + _quoted(f"Here is what I have so far (pasted below). Take it from here: {ask}."),
            f"    expected_skill: {name}",
            "    kind: contextual",
        ]
        if len(skills) > 1:
            other = skills[(i + 1) % len(skills)][0]
            lines += [
                f"  - id: {name}-not-{other}-01",
                "    text: " + _quoted(f"Not the usual thing, just this one: {ask}."),
                f"    expected_skill: {name}",
                "    kind: neighbor_negative",
                f"    notes: not {other}",
            ]
    lines += [
        "  # ---------------------------------------------------------------- out of scope",
        "  - id: oos-01",
        '    text: "Write a short poem about the sea at night."',
        "    kind: out_of_scope",
    ]
    return "\n".join(lines) + "\n"


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, Path):
        return json.dumps(value.as_posix())
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(str(value), ensure_ascii=False)


def config_toml() -> str:
    """``skillreach.toml``: every setting, commented out at its default, with what it does."""
    from skillreach.settings import setting_rows

    out = [
        "# skillreach settings (written by `skillreach init`). Every key is shown commented out at its",
        "# default; uncomment a line to change it. Precedence: command-line flag > this file >",
        "# environment (SKILLREACH_<KEY>) > default. Pass it with --config skillreach.toml.",
        "# All keys: docs/configuration.md in the skillreach repository, or `skillreach config show`.",
        "",
    ]
    tables: list[str] = []
    for row in setting_rows():
        block = [f"# {line}" for line in row.description.splitlines()] or ["#"]
        block.append(f"# env: {row.env}")
        if "." in row.key:
            sub = row.key.split(".", 1)[1]
            tables += [*block, f"# {sub} = {_toml_value(row.default)}"]
            continue
        if hasattr(type(row.default), "model_fields"):  # a table: its keys follow at the end of the file
            tables += ["", *block, f"# [{row.key}]"]
            continue
        if row.default is None:
            block.append(f"# {row.key} =    (unset by default; type {row.type})")
        elif isinstance(row.default, dict):
            block.append(f"# [{row.key}]    (a table; defaults: {json.dumps(_jsonable(row.default))})")
        else:
            block.append(f"# {row.key} = {_toml_value(row.default)}")
        out += [*block, ""]
    return "\n".join(out + tables) + "\n"


def _jsonable(value: Any) -> Any:
    if isinstance(value, Path):
        return value.as_posix()
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    return value


def workflow_yaml(skills_dir: str, queries: str, action: str) -> str:
    """The workflow ``init`` writes: on a pull request, lint and gate (``check``); after a merge, record
    the baselines of the skills the merge added, in one commit pushed to the branch."""
    return f"""\
# Written by `skillreach init`. On a pull request: lint every SKILL.md and gate what the change can
# affect against the baselines of the base branch (a skill the pull request adds is scored, not gated).
# After a merge: record the added skills' baselines in one commit (needs `contents: write`; a commit
# pushed with the workflow's token starts no other workflow).
# `uses:` names the action by a ref: pin it to a full commit SHA until a release is tagged.
name: skillreach
on:
  pull_request:
    paths: ["{skills_dir}/**", "baselines/**", "evals/**", "skillreach.toml"]
  push:
    branches: [main]
    paths: ["{skills_dir}/**", "evals/**"]
permissions:
  contents: read
jobs:
  skillreach:
    if: github.event_name == 'pull_request'
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
        with:
          fetch-depth: 0  # check --changed compares with the merge base; a shallow clone is refused
      - uses: {action}
        with:
          skills: {skills_dir}
          queries: {queries}
          config: skillreach.toml
          # runtime: anthropic        # default: each baseline's own runtime and model
          # model: claude-sonnet-4-6
          # accept: release-notes     # a person changes this skill's yardstick on purpose
          max-cost: "5"
          anthropic-api-key: ${{{{ secrets.ANTHROPIC_API_KEY }}}}
  baselines:
    if: github.event_name == 'push'
    runs-on: ubuntu-latest
    permissions:
      contents: write
    steps:
      - uses: actions/checkout@v4
        with:
          fetch-depth: 0
      - uses: {action}
        with:
          record-added: "true"
          skills: {skills_dir}
          queries: {queries}
          config: skillreach.toml
          anthropic-api-key: ${{{{ secrets.ANTHROPIC_API_KEY }}}}
      - run: git push origin HEAD:${{{{ github.ref_name }}}}
"""


def _pick_skills(skills_dir: Path) -> list[tuple[str, str]]:
    from skillreach.errors import InputError
    from skillreach.skills.discovery import discover

    found = discover([skills_dir])
    usable = sorted({s.name: s for s in found.skills if s.description.strip()}.values(), key=lambda s: s.name)
    if not usable:
        raise InputError(f"{skills_dir}: no SKILL.md with a description found; pass --skills DIR")
    return [(s.name, s.description) for s in usable[:2]]


MAX_GITIGNORE_BYTES = 1 * 2**20
"""A ``.gitignore`` larger than this is not read (``init`` refuses, naming it)."""


def _within(root: Path, rel: Path) -> None:
    """Refuse a target ``root/rel`` that is a link, is not a regular file, or whose folders lead out of
    ``root`` (a link) or are files."""
    from skillreach.errors import InputError

    here = root
    for part in rel.parts[:-1]:
        here = here / part
        if here.is_symlink():
            real = os.path.realpath(here)
            if not Path(real).is_relative_to(root):
                raise InputError(
                    f"{here}: a link out of {root} (to {real}); init writes only inside the repository: "
                    "remove the link, nothing was written"
                )
        if os.path.lexists(here) and not here.is_dir():
            raise InputError(f"{here}: not a folder; init needs it for {rel.as_posix()}, nothing was written")
    target = root / rel
    if target.is_symlink():
        raise InputError(
            f"{target}: a link (to {os.readlink(target)}); init never writes through a link: remove it, "
            "nothing was written"
        )
    if os.path.lexists(target) and not target.is_file():
        raise InputError(f"{target}: not a regular file; remove it, nothing was written")


def _gitignore(root: Path) -> tuple[bytes, list[str]] | None:
    """The new ``.gitignore`` (its bytes as they are, in any encoding, and the missing lines after
    them) and the lines added; ``None`` when nothing is missing."""
    from skillreach.errors import InputError

    path = root / ".gitignore"
    _within(root, Path(".gitignore"))
    have = b""
    if path.is_file():
        size = path.stat().st_size
        if size > MAX_GITIGNORE_BYTES:
            raise InputError(
                f"{path}: {size:,} bytes, larger than a .gitignore init reads (1 MiB); nothing written"
            )
        have = path.read_bytes()
    lines = {line.strip() for line in have.splitlines()}
    missing = [
        line for line in IGNORED if line.encode() not in lines and line.rstrip("/").encode() not in lines
    ]
    if not missing:
        return None
    prefix = b"\n" if have and not have.endswith(b"\n") else b""
    return have + prefix + "".join(f"{line}\n" for line in missing).encode(), missing


def _plan_writes(folder: Path, files: dict[Path, str], *, force: bool) -> list[tuple[Path, bytes, str]]:
    """Every write of ``init`` as (path inside the folder, bytes, what to say), checked before any is
    made: no target a link, a folder or a special file, no folder on the way a link out of the
    repository, no file already there unless ``force``."""
    from skillreach.errors import InputError

    root = Path(os.path.realpath(folder))
    for rel in files:
        _within(root, rel)
    existing = [p for p in files if os.path.lexists(root / p)]
    if existing and not force:
        raise InputError(
            f"{', '.join(p.as_posix() for p in existing)}: already there, nothing written; "
            "pass --force to overwrite"
        )
    plan = [(rel, text.encode("utf-8"), f"wrote {rel.as_posix()}") for rel, text in files.items()]
    ignore = _gitignore(root)
    if ignore is not None:
        data, missing = ignore
        plan.append((Path(".gitignore"), data, f"added {', '.join(missing)} to .gitignore"))
    return plan


def _write_all(folder: Path, plan: list[tuple[Path, bytes, str]]) -> list[str]:
    """Write the plan all or nothing: each file to a new temporary name beside its target, then every
    one renamed into place; a failure before the renames removes the temporary files and the folders
    made for them. What to say of each write."""
    root = Path(os.path.realpath(folder))
    made: list[Path] = []
    temps: list[tuple[Path, Path]] = []
    try:
        for rel, data, _ in plan:
            target = root / rel
            here = root
            for part in rel.parts[:-1]:
                here = here / part
                if not os.path.lexists(here):
                    here.mkdir()
                    made.append(here)
            tmp = target.with_name(f".{target.name}.{os.getpid()}.skillreach-init")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o666)
            temps.append((tmp, target))
            with open(fd, "wb") as fh:
                fh.write(data)
            if target.is_file():  # .gitignore and --force: keep the file's own permissions
                os.chmod(tmp, target.stat().st_mode & 0o7777)
    except BaseException:
        for tmp, _ in temps:
            tmp.unlink(missing_ok=True)
        for here in reversed(made):
            with contextlib.suppress(OSError):
                here.rmdir()
        raise
    for tmp, target in temps:
        os.replace(tmp, target)
    return [say for _, _, say in plan]


def init_cmd(
    folder: Path = typer.Argument(Path("."), help="The skills repository (default: here)."),
    skills: Path | None = typer.Option(
        None,
        "--skills",
        help="Folder of skills, relative to FOLDER (default: skills/ if present, else FOLDER).",
    ),
    action: str = typer.Option(ACTION_REF, "--action", help="The action the workflow uses (owner/repo@ref)."),
    force: bool = typer.Option(False, "--force", help="Overwrite files that exist."),
) -> None:
    """Set a skills repository up: skillreach.toml, evals/queries.yaml, .gitignore lines and a GitHub
    workflow. Never overwrites a file without --force, never writes through a link or out of FOLDER;
    writes all of them or none (every target is checked first)."""
    from skillreach.errors import InputError

    if not folder.is_dir():
        raise InputError(f"{folder}: no such folder; pass the skills repository")
    if skills is None:
        skills = Path("skills") if (folder / "skills").is_dir() else Path(".")
    skills_dir = folder / skills
    if not skills_dir.is_dir():
        raise InputError(f"{skills_dir}: no such folder of skills; pass --skills DIR")
    picked = _pick_skills(skills_dir)
    skills_rel = skills.as_posix() if skills != Path(".") else "."
    files = {
        Path("skillreach.toml"): config_toml(),
        Path("evals/queries.yaml"): queries_yaml(picked),
        Path(".github/workflows/skillreach.yml"): workflow_yaml(skills_rel, "evals/queries.json", action),
    }
    plan = _plan_writes(folder, files, force=force)
    for line in _write_all(folder, plan):
        typer.echo(line)
    names = " and ".join(n for n, _ in picked)
    typer.echo(f"example queries for {names}; next:")
    typer.echo(f"  skillreach lint {skills_rel}")
    typer.echo(f"  skillreach queries seal evals/queries.yaml --skills {skills_rel} --out evals/queries.json")
    typer.echo(
        f"  skillreach run --config skillreach.toml --skills {skills_rel} --queries evals/queries.json"
    )


# -- config show -----------------------------------------------------------------------------------


def _parse_set(items: list[str]) -> dict[str, Any]:
    from skillreach.errors import InputError

    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise InputError(f"--set {item!r}: write KEY=VALUE")
        try:
            out[key.strip()] = json.loads(raw)
        except ValueError:
            out[key.strip()] = raw
    return out


def config_show_cmd(
    config: Path | None = typer.Option(None, "--config", help="Settings file (TOML or YAML)."),
    sets: list[str] = typer.Option(
        [], "--set", metavar="KEY=VALUE", help="A value as a command-line flag would give it (repeatable)."
    ),
    as_json: bool = typer.Option(False, "--json", help="The configuration as JSON on stdout alone."),
) -> None:
    """The resolved configuration and where each value came from (flag, file, environment, default).

    The file is read as ``run --config`` reads it: a study file's own keys (``runtime_options``,
    ``skills``, ``queries``, …) are accepted, checked as ``run`` checks them and shown with the file as
    their source."""
    from skillreach.settings import read_config_file, setting_rows
    from skillreach.study.config import STUDY_ONLY_KEYS

    flags = _parse_set(sets)
    file_values = read_config_file(config) if config is not None else {}
    settings, study = _resolved(config, flags, file_values)
    env = {k.upper(): k for k in os.environ}
    rows = []
    for row in setting_rows():
        top, _, sub = row.key.partition(".")
        if top == "gates" and not sub:
            continue  # its keys follow, one row each
        value: Any = getattr(settings, top)
        if sub:
            value = getattr(value, sub)
        if top in flags:
            source = "flag"
        elif top in file_values and (not sub or sub in (file_values[top] or {})):
            source = f"file {config}"
        elif row.env.upper() in env or f"SKILLREACH_{top.upper()}" in env:
            source = f"environment {row.env if row.env.upper() in env else 'SKILLREACH_' + top.upper()}"
        else:
            source = "default"
        if top == "database_url" and value:
            value = "***"
        elif top == "alert_webhooks":
            value = f"{len(value)} webhook(s)"
        rows.append({"key": row.key, "value": _jsonable(value), "source": source})
    for key in sorted(STUDY_ONLY_KEYS):
        if key in file_values or key in flags:
            source = "flag" if key in flags else f"file {config}"
            rows.append({"key": key, "value": _jsonable(study.get(key)), "source": source})
    if as_json:
        typer.echo(json.dumps(rows, indent=2, default=str, ensure_ascii=False))
        return
    from rich.table import Table

    from skillreach._io.console import make_console

    table = Table("key", "value", "source", box=None)
    for r in rows:
        shown = r["value"]
        # a table of values (prices) one row per entry, so the table stays readable
        entries: list[tuple[str | None, Any]] = (
            list(shown.items()) if isinstance(shown, dict) and r["key"] == "prices" else [(None, shown)]
        )
        for entry, val in entries:
            name = r["key"] if entry is None else f"{r['key']}.{entry}"
            text = val if isinstance(val, str) else json.dumps(val, default=str, ensure_ascii=False)
            source = r["source"]
            if entry is not None and entry not in (file_values.get("prices") or {}) and "prices" not in flags:
                source = "default"  # a file's prices add to the default table: those rows are the defaults
            table.add_row(name, text, source)
    make_console().print(table)


def _resolved(
    config: Path | None, flags: dict[str, Any], file_values: dict[str, Any]
) -> tuple[Any, dict[str, Any]]:
    """The settings and the study keys of ``config`` resolved as ``run --config`` resolves them (a study
    file's ``runtime_options`` checked against its runtime, or each ``[runtime_options.<agent>]`` table
    against that agent's)."""
    from skillreach.errors import ConfigError
    from skillreach.runtimes import REGISTRY, check_runtime_options
    from skillreach.study.config import STUDY_ONLY_KEYS, StudyConfig

    study_flags = {k: v for k, v in flags.items() if k in STUDY_ONLY_KEYS}
    setting_flags = {k: v for k, v in flags.items() if k not in STUDY_ONLY_KEYS}
    cfg = StudyConfig.build(config, **setting_flags, **study_flags)
    options = cfg.runtime_options
    tables = {k: v for k, v in options.items() if k in REGISTRY and isinstance(v, dict)}
    shared = {k: v for k, v in options.items() if k not in tables}
    try:
        for name in tables or ([cfg.runtime] if cfg.runtime in REGISTRY else []):
            check_runtime_options(name, {**shared, **tables.get(name, {})})
    except ConfigError as exc:
        raise ConfigError(f"{config}: {exc.message}" if config is not None else exc.message) from exc
    study = {key: getattr(cfg, key, file_values.get(key)) for key in STUDY_ONLY_KEYS}
    return cfg.settings(), study


def configuration_markdown() -> str:
    """``docs/configuration.md``: every setting from the ``Settings`` model (``skillreach config docs``)."""
    from skillreach.settings import setting_rows

    def cell(text: str) -> str:
        return " ".join(text.split()).replace("|", "\\|")

    lines = [
        "# Configuration",
        "",
        "<!-- Generated from skillreach/settings.py by `skillreach config docs > docs/configuration.md`;",
        "     tests/test_project_cli.py fails when this page and the code differ. -->",
        "",
        "Every setting, its type, default, environment variable and what it does. Precedence, highest",
        "first: **command-line flag > config file (`--config FILE`, TOML or YAML) > environment",
        "(`SKILLREACH_<KEY>`) > default**. A config file may hold these keys at its top level or under a",
        '`[skillreach]` table; an unknown key is refused with a "did you mean" and the valid keys.',
        "`skillreach init` writes `skillreach.toml` with every key commented out at its default;",
        "`skillreach config show --config FILE` prints the resolved values and where each came from.",
        "Study files (`run --config`) may also hold `skills`, `queries`, `out` and `runtime_options`.",
        "API keys are never settings: the provider SDKs read their own variables (`ANTHROPIC_API_KEY`, …).",
        "",
        "| key | type | default | environment variable | what it does |",
        "|---|---|---|---|---|",
    ]
    for row in setting_rows():
        default = _jsonable(row.default)
        shown = "(none)" if default is None else f"`{json.dumps(default, default=str, ensure_ascii=False)}`"
        if isinstance(default, dict) and len(shown) > 60:
            shown = "see `skillreach config show`" if row.key != "prices" else "list prices of Claude models"
        cells = [f"`{row.key}`", f"`{cell(row.type)}`", cell(shown), f"`{cell(row.env)}`"]
        cells.append(cell(row.description))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def config_docs_cmd() -> None:
    """Print docs/configuration.md (every setting: key, type, default, environment variable, meaning)."""
    typer.echo(configuration_markdown(), nl=False)


_ROLE = re.compile(r":(?:func|class|mod|meth|data|attr|obj):`~?([^`]+)`")
_LITERAL = re.compile(r"``([^`]+)``")


def plain_help(text: str) -> str:
    """A docstring as help text: each paragraph on one line (the terminal wraps it, not the source),
    list items kept on lines of their own, no rST markup (``code`` and :func:`roles` become plain)."""
    text = _LITERAL.sub(r"\1", _ROLE.sub(lambda m: m.group(1).rsplit(".", 1)[-1], text))
    paragraphs = []
    for para in re.split(r"\n\s*\n", inspect.cleandoc(text)):
        items: list[str] = []
        for raw in para.splitlines():
            line = raw.strip()
            if items and not line.startswith(("- ", "* ")):
                items[-1] += " " + line
            else:
                items.append(line)
        paragraphs.append("\n".join(items))
    return "\n\n".join(p for p in paragraphs if p)


def _plain_help_everywhere(app: typer.Typer) -> None:
    """Every command's, group's and option's help as :func:`plain_help` has it."""
    from typer.models import ArgumentInfo, OptionInfo

    if app.info.help and isinstance(app.info.help, str):
        app.info.help = plain_help(app.info.help)
    for info in app.registered_commands:
        doc = info.help or (inspect.getdoc(info.callback) if info.callback else None)
        if doc:
            info.help = plain_help(doc)
        if info.callback is None:
            continue
        for param in inspect.signature(info.callback).parameters.values():
            default = param.default
            if isinstance(default, OptionInfo | ArgumentInfo) and isinstance(default.help, str):
                default.help = plain_help(default.help)
    for group in app.registered_groups:
        if group.typer_instance is not None:
            if isinstance(group.help, str):
                group.help = plain_help(group.help)
            _plain_help_everywhere(group.typer_instance)


_SHELLS = ("bash", "zsh", "fish", "powershell")


def completion_cmd(
    shell: str = typer.Argument(..., metavar="SHELL", help="bash, zsh, fish or powershell."),
) -> None:
    """Print the shell completion script. Install it with, for bash: skillreach completion bash >
    ~/.local/share/bash-completion/completions/skillreach (zsh: into a folder of your fpath as _skillreach;
    fish: ~/.config/fish/completions/skillreach.fish)."""
    from skillreach.errors import InputError

    if shell not in _SHELLS:
        raise InputError(f"completion: no shell {shell!r}; pass one of {', '.join(_SHELLS)}")
    from typer._completion_shared import get_completion_script

    script = get_completion_script(prog_name="skillreach", complete_var="_SKILLREACH_COMPLETE", shell=shell)
    typer.echo(script)


def _enable_completion() -> None:
    """The shells' completion protocols (``_SKILLREACH_COMPLETE=complete_bash`` …), which the scripts of
    ``skillreach completion`` call; typer registers them only with its own --install-completion."""
    from typer._completion_classes import completion_init

    completion_init()


def register(app: typer.Typer) -> None:
    app.callback(invoke_without_command=False)(_root_callback)
    app.command("completion")(completion_cmd)
    _enable_completion()
    app.command("init")(init_cmd)
    config_app = typer.Typer(
        help="The configuration: what each setting is and where its value came from.",
        no_args_is_help=True,
    )
    config_app.command("show")(config_show_cmd)
    config_app.command("docs")(config_docs_cmd)
    app.add_typer(config_app, name="config")
    _plain_help_everywhere(app)  # registered last: every command is there
