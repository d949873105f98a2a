"""``skillreach queries seal|verify|import``; ``generate`` is added by :mod:`skillreach.cli.generate_cmds`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from skillreach.errors import InputError

if TYPE_CHECKING:  # imported where used: the CLI starts without pydantic models
    from skillreach.models import QuerySet

__all__ = ["queries_app", "register"]

queries_app = typer.Typer(
    name="queries",
    help="Query sets: seal hand-written sets, verify sealed ones, import other tools' trigger evals.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

_SKILLS_HELP = "Folder(s) of skills; every expected and acceptable skill must be one of them (repeatable)."


def register(app: typer.Typer) -> None:
    app.add_typer(queries_app, name="queries")


def _warn(line: str) -> None:
    print(f"skillreach: warning: {line}", file=sys.stderr)


def _skill_names(skills: list[Path] | None) -> list[str] | None:
    if not skills:
        return None
    from skillreach.skills.discovery import load_skills

    return [s.name for s in load_skills(skills, on_problem=_warn)]


def _summary(qs: QuerySet) -> str:
    from skillreach.queries.sets import kind_counts

    kinds = ", ".join(f"{k} {n}" for k, n in kind_counts(qs.queries).items() if n)
    return f"{len(qs.queries)} queries ({kinds}), catalog_id {qs.catalog_id!r}"


@queries_app.command("seal")
def seal_cmd(
    source: Path = typer.Argument(..., help="A hand-written set: JSON, JSONL, CSV or YAML."),
    *,
    out: Path = typer.Option(..., "--out", "-o", help="Where to write the sealed JSON set."),
    catalog_id: str | None = typer.Option(None, "--catalog-id", help="The catalog this set targets."),
    skills: list[Path] | None = typer.Option(None, "--skills", help=_SKILLS_HELP),
    origin: str | None = typer.Option(
        None, "--origin", help="authored, generated or imported (default: the input's, else authored)."
    ),
) -> None:
    """Turn a hand-written query set into a sealed one (provenance + digest)."""
    from skillreach.queries.sets import read_query_file, seal, validate_against_catalog, write_query_set

    if origin is not None and origin not in ("authored", "generated", "imported"):
        raise InputError(f"--origin {origin!r}: use authored, generated or imported")
    qs = read_query_file(source)
    names = _skill_names(skills)
    if names is not None:
        validate_against_catalog(qs, names, source=str(source))
    previous = qs.provenance
    # Re-sealing a sealed set (after an intended edit) keeps how it was made: origin, source, model and
    # any further keys its producer recorded; the dates, version and digests are new.
    kept = (
        {k: v for k, v in (previous.model_extra or {}).items() if k != "query_digests"}
        if previous.digest
        else {}
    )
    sealed = seal(
        qs,
        source=previous.source if previous.digest and previous.source else str(source),
        catalog_id=catalog_id,
        origin=origin or (previous.origin if previous.digest else "authored"),
        generator_model=previous.generator_model,
        **kept,
    )
    from skillreach._io.paths import ensure_parent

    write_query_set(sealed, ensure_parent(out, flag="--out"))
    typer.echo(f"sealed {_summary(sealed)} → {out}")
    typer.echo(f"digest {sealed.provenance.digest}")


@queries_app.command("verify")
def verify_cmd(
    path: Path = typer.Argument(..., help="A sealed JSON query set."),
    skills: list[Path] | None = typer.Option(None, "--skills", help=_SKILLS_HELP),
) -> None:
    """Re-compute the digest; say which query changed if it does not match (exit 2)."""
    from skillreach.queries.sets import validate_against_catalog, verify_query_set

    qs = verify_query_set(path)
    names = _skill_names(skills)
    if names is not None:
        validate_against_catalog(qs, names, source=str(path))
    prov = qs.provenance
    typer.echo(f"{path}: ok: {_summary(qs)}")
    made = f"origin {prov.origin}, created {prov.created_at or '?'}, skillreach {prov.tool_version or '?'}"
    if prov.generator_model:
        made += f", generator {prov.generator_model}"
    typer.echo(f"{made}; digest {prov.digest}")


@queries_app.command("import")
def import_cmd(
    path: Path = typer.Argument(..., help="The trigger-eval file (or, for openai-evals, a folder)."),
    *,
    fmt: str = typer.Option(
        "auto",
        "--format",
        "-f",
        help="should-trigger, waza, csv, cases, labels, openai-evals, or auto (guess from the file).",
    ),
    skill: str | None = typer.Option(
        None,
        "--skill",
        help="The skill a single-skill set is about (default: the file's own, e.g. waza's skill: or "
        "trigger-queries.<skill>.json); for multi-skill formats, keep only that skill's rows.",
    ),
    out: Path = typer.Option(..., "--out", "-o", help="Where to write the sealed JSON set."),
    skills: list[Path] | None = typer.Option(None, "--skills", help=_SKILLS_HELP),
    catalog_id: str | None = typer.Option(None, "--catalog-id", help="The catalog this set targets."),
) -> None:
    """Import another tool's trigger-eval set (sealed, origin imported).

    Positives become implicit queries for the skill; negatives neighbor_negative when the row names
    the neighbour, else out_of_scope.
    """
    from skillreach.queries.importers import import_queries
    from skillreach.queries.sets import write_query_set

    result = import_queries(path, fmt=fmt, skill=skill, catalog=_skill_names(skills), catalog_id=catalog_id)
    for warning in result.warnings:
        _warn(warning)
    from skillreach._io.paths import ensure_parent

    write_query_set(result.query_set, ensure_parent(out, flag="--out"))
    typer.echo(f"imported {_summary(result.query_set)} from {path} ({result.format}) → {out}")
    typer.echo(f"digest {result.query_set.provenance.digest}")
