"""``skillreach score`` (recorded probes → artifact) and ``skillreach report`` (artifact → reports)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from skillreach._io.console import make_console

if TYPE_CHECKING:
    from skillreach.models import QuerySet
    from skillreach.scoring import ProbeTable
    from skillreach.scoring.artifact import Artifact

__all__ = ["register", "write_reports"]

_HTML_HELP = "Also write the self-contained HTML report to FILE."
_MD_HELP = (
    "Also write the markdown summary to FILE ('-' for stdout). Given $GITHUB_STEP_SUMMARY's path, it is "
    "appended to, as GitHub expects."
)


def _write_text(path: Path, text: str, what: str, *, flag: str, append: bool = False) -> None:
    from skillreach._io.paths import ensure_parent
    from skillreach.errors import InputError

    ensure_parent(path, flag=flag)
    try:
        with path.open("a" if append else "w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        raise InputError(f"{path}: cannot write the {what} ({exc.strerror})") from exc


def write_reports(
    artifact: Artifact,
    *,
    html: Path | None = None,
    markdown: Path | None = None,
    gate: Sequence[Any] | None = None,
    not_compared: Sequence[str] = (),
    uplift: Sequence[Any] = (),
) -> None:
    """Write the HTML and/or markdown reports of ``artifact`` (``-`` = stdout for markdown), with the
    study's gate report and its skills' uplift when there are."""
    if html is None and markdown is None:
        return  # not even the import: jinja2 and the templates cost ~0.3 s
    from skillreach.reports import render_html, render_markdown

    if html is not None:
        _write_text(html, render_html(artifact, gate=gate, not_compared=not_compared, uplift=uplift),
                    "HTML report", flag="--html")
    if markdown is not None:
        text = render_markdown(artifact, gate=gate, not_compared=not_compared, uplift=uplift)
        if str(markdown) == "-":
            typer.echo(text, nl=False)
        else:
            summary = os.environ.get("GITHUB_STEP_SUMMARY")
            append = bool(summary) and Path(summary).resolve() == markdown.resolve()  # type: ignore[arg-type]
            _write_text(markdown, text, "markdown summary", flag="--markdown", append=append)


def _read_probes(path: Path, query_set: QuerySet) -> ProbeTable:
    from skillreach._io.paths import refuse_special_file
    from skillreach.errors import InputError
    from skillreach.scoring import ProbeTable
    refuse_special_file(path, "probes.jsonl a study wrote")
    try:
        with path.open("rb") as fh:
            return ProbeTable.from_lines(fh, source=str(path), queries=query_set)
    except FileNotFoundError as exc:
        raise InputError(f"{path}: no such probe log; pass the probes.jsonl a study wrote") from exc
    except IsADirectoryError as exc:
        raise InputError(f"{path}: is a folder; pass the probes.jsonl file inside it") from exc
    except OSError as exc:
        raise InputError(f"{path}: cannot read the probe log ({exc.strerror})") from exc


def score_cmd(
    *,
    queries: Path = typer.Option(..., "--queries", help="The query set the probes were run with."),
    probes: Path = typer.Option(..., "--probes", help="The probe log (probes.jsonl)."),
    skills: list[Path] | None = typer.Option(
        None,
        "--skills",
        help="Skill folders: the catalog's skills become the labels. Without it, the labels are the skills "
        "seen in the queries and probes (catalog strategy 'inferred').",
    ),
    out: str = typer.Option(
        ...,
        "--out",
        help="Where to write artifact.json (a folder, or a path ending in '/': FOLDER/artifact.json).",
    ),
    html: Path | None = typer.Option(None, "--html", help=_HTML_HELP),
    markdown: Path | None = typer.Option(None, "--markdown", help=_MD_HELP),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Do not print the scorecard."),
) -> None:
    """Score recorded probes into an artifact (no runtime involved) and print the scorecard."""
    from skillreach._gc import cyclic_gc_paused

    # one burst of acyclic columns, models and rows from start to end (a million probes): the cyclic
    # collector would walk them again and again to find nothing; reference counting frees them
    with cyclic_gc_paused():
        _score(queries, probes, skills, out, html, markdown, quiet=quiet)


def _score(  # noqa: PLR0917 - the options of score_cmd, passed on
    queries: Path,
    probes: Path,
    skills: list[Path] | None,
    out: str,
    html: Path | None,
    markdown: Path | None,
    *,
    quiet: bool,
) -> None:
    from skillreach._io.paths import as_folder, ensure_parent
    from skillreach.errors import InputError
    from skillreach.queries.sets import load_query_set
    from skillreach.scoring import prepare_queries, score
    from skillreach.scoring.artifact import write_artifact

    err = make_console(stderr=True)
    out_path = ensure_parent(as_folder(out, "artifact.json"), flag="--out")
    if html is not None:
        ensure_parent(html, flag="--html")
    catalog = None
    if skills:
        from skillreach.skills.catalog import build_catalog
        from skillreach.skills.discovery import load_skills

        found = load_skills(
            skills, on_problem=lambda msg: err.print(f"[yellow]warning:[/] {msg}", markup=False)
        )
        catalog = build_catalog(found, "full")
    query_set = load_query_set(queries)
    prepare_queries(query_set)  # the query side of scoring, built once (score() reuses it)
    # the spinner only on a terminal: elsewhere it shows nothing, yet its refresh thread takes the GIL
    # 12 times a second, and on a busy machine each hand-over can stall the reading for a time slice
    spinner = err.status(f"reading {probes} and scoring…") if err.is_terminal else contextlib.nullcontext()
    with spinner:
        table = _read_probes(probes, query_set)
        if len(table) == 0:
            raise InputError(f"{probes}: holds no probes; run the study first (nothing to score)")
        artifact = write_artifact(score(query_set, table, catalog), out_path)
    write_reports(artifact, html=html, markdown=markdown)
    if not quiet:
        from skillreach.reports import print_scorecard  # jinja2 and the templates: not for --quiet

        print_scorecard(artifact, make_console(stderr=str(markdown) == "-"))
        err.print(f"artifact written to {out_path}", markup=False, highlight=False)


def report_cmd(
    artifact_path: Path = typer.Argument(
        ..., metavar="ARTIFACT", help="An artifact.json (its digest is verified)."
    ),
    html: Path | None = typer.Option(None, "--html", help="Write the self-contained HTML report to FILE."),
    markdown: Path | None = typer.Option(None, "--markdown", help=_MD_HELP),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Do not print the scorecard."),
) -> None:
    """Render an artifact: the scorecard on the terminal, and HTML or markdown reports on request.

    The study's gate report (``gate.json`` beside the artifact, written by ``run``) is shown as well, and
    each skill's uplift kept beside it (``uplift-SKILL.json``, from ``skillreach uplift SKILL --json``)."""
    from skillreach.reports import print_scorecard
    from skillreach.reports.gate_file import read_gate
    from skillreach.scoring.artifact import read_artifact

    if artifact_path.is_dir():
        artifact_path = artifact_path / "artifact.json"
    artifact = read_artifact(artifact_path)
    from skillreach.reports.uplift_file import read_uplift_reports

    gate, not_compared = read_gate(artifact_path.parent, artifact.digest) or (None, [])
    uplift = read_uplift_reports(artifact_path.parent, artifact.queries_digest)
    write_reports(artifact, html=html, markdown=markdown, gate=gate, not_compared=not_compared, uplift=uplift)
    if not quiet:
        print_scorecard(artifact, make_console(stderr=str(markdown) == "-"), gate=gate,
                        not_compared=not_compared, uplift=uplift)


def register(app: typer.Typer) -> None:
    app.command("score")(score_cmd)
    app.command("report")(report_cmd)
