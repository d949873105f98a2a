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
    review: Path | None = typer.Option(
        None,
        "--review",
        help="Decisions from the review page (skillreach queries review): rejected drafts dropped, "
        "relabelled ones moved; the review is recorded in the provenance.",
    ),
) -> None:
    """Turn a hand-written query set into a sealed one (provenance + digest)."""
    from skillreach.queries.sets import read_query_file, seal, validate_against_catalog, write_query_set

    if origin is not None and origin not in ("authored", "generated", "imported"):
        raise InputError(f"--origin {origin!r}: use authored, generated or imported")
    qs = read_query_file(source)
    review_record = None
    if review is not None:
        from skillreach.queries.review import apply_review, read_decisions

        doc, review_digest = read_decisions(review)
        drafts_digest = qs.provenance.digest or qs.compute_digest()
        if doc.get("drafts_digest") and doc["drafts_digest"] != drafts_digest:
            raise InputError(
                f"{review}: these decisions are for drafts {doc['drafts_digest'][:19]}…, not {source} "
                f"({drafts_digest[:19]}…); review this set again"
            )
        qs, review_record = apply_review(qs, doc, source=str(review))
        review_record["decisions_digest"] = review_digest
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
    if review_record is not None:
        kept["review"] = review_record
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
    if review_record is not None:
        typer.echo(
            f"review applied: {review_record['accepted']} accepted, {review_record['rejected']} rejected, "
            f"{review_record['relabelled']} relabelled"
        )
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


@queries_app.command("review")
def review_cmd(
    drafts: Path = typer.Argument(..., help="Generated drafts (the --out of skillreach queries generate)."),
    *,
    out: Path = typer.Option(..., "--out", "-o", help="Where to write the review page (HTML)."),
    report: Path | None = typer.Option(
        None, "--report", help="The generation report with the leak flags (default: DRAFTS.report.json)."
    ),
    open_page: bool = typer.Option(False, "--open", help="Open the page in a browser."),
) -> None:
    """Write a self-contained review page of generated drafts: text, kind, expected skill, the cited body
    line, leak and near-duplicate flags. A reviewer accepts, rejects or relabels each one and downloads the
    decisions for queries seal --review."""
    import json

    from skillreach.queries.review import draft_rows
    from skillreach.queries.sets import read_query_file
    from skillreach.reports.review import render_review

    qs = read_query_file(drafts)
    report_file = report or drafts.with_name(drafts.name + ".report.json")
    leaks: dict[str, list[str]] = {}
    if report_file.is_file():
        try:
            data = json.loads(report_file.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise InputError(
                f"{report_file}: not JSON ({exc}); pass the generation report with --report"
            ) from exc
        for entry in data.get("leaks", []) if isinstance(data, dict) else []:
            if isinstance(entry, dict) and "query_id" in entry:
                leaks.setdefault(str(entry["query_id"]), []).extend(str(r) for r in entry.get("reasons", []))
    elif report is not None:
        raise InputError(f"{report}: no such file; pass the generation report (DRAFTS.report.json)")
    rows = draft_rows(qs, leaks)
    from skillreach._io.paths import ensure_parent

    ensure_parent(out, flag="--out").write_text(render_review(qs, rows, source=str(drafts)), encoding="utf-8")
    flagged = sum(1 for r in rows if r["leak"] or r["near_duplicates"])
    typer.echo(f"review page of {len(rows)} drafts ({flagged} flagged) → {out}")
    typer.echo(f"then: skillreach queries seal {drafts} --review decisions.json --out SET.json")
    if open_page:
        import webbrowser

        webbrowser.open(out.resolve().as_uri())
