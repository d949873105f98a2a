"""``skillreach cluster DIR...``: split a catalog into communities of skills (subagent scopes) over the
BM25 similarity graph, each at most ``--target-size`` skills. Text, JSON or CSV (``skill,community``)."""

from __future__ import annotations

import csv
import io
import sys
from pathlib import Path

import typer

__all__ = ["register"]

FORMATS = ("text", "json", "csv")


def cluster_cmd(  # noqa: PLR0917 - typer passes options positionally
    dirs: list[Path] = typer.Argument(..., metavar="DIR...", help="Folders of skills."),
    target_size: int = typer.Option(
        20, "--target-size", metavar="N", help="Largest community (pick one below the sweep's knee)."
    ),
    seed: int = typer.Option(0, "--seed", metavar="N", help="Seed of the Louvain communities."),
    resolution: float = typer.Option(
        1.0, "--resolution", metavar="G", help="Louvain resolution (>1: smaller)."
    ),
    top: int = typer.Option(10, "--top", metavar="K", help="Rivals per skill that make the graph's edges."),
    min_ratio: float = typer.Option(
        0.05, "--min-ratio", metavar="R", help="Weakest edge kept (BM25 ratio to the self-score)."
    ),
    sweep: Path | None = typer.Option(
        None,
        "--sweep",
        metavar="FILE",
        help="A sweep.json of skillreach sweep: the target size is its largest size keeping the metric "
        "≥ 0.90, else its knee (instead of --target-size).",
    ),
    fmt: str = typer.Option("text", "--format", metavar="FMT", help="text, json or csv."),
    out: Path | None = typer.Option(None, "--out", metavar="FILE", help="Write there instead of stdout."),
) -> None:
    """Communities of skills (networkx Louvain, seeded) over the BM25 similarity graph, split until
    each holds at most --target-size skills, so a large catalog can be cut into subagent scopes."""
    import asyncio

    from skillreach.errors import InputError
    from skillreach.flows.cluster import cluster

    if fmt not in FORMATS:
        raise InputError(f"--format {fmt}: use one of {', '.join(FORMATS)}")
    if top < 1:
        raise InputError(f"--top must be at least 1, not {top}")
    for d in dirs:
        if not d.exists():
            raise InputError(f"{d}: no such folder of skills")
    if sweep is not None:
        target_size = _from_sweep(sweep)
    result = asyncio.run(cluster.fn(list(dirs), target_size=target_size, seed=seed, resolution=resolution,
                                    top=top, min_ratio=min_ratio))
    if fmt == "json":
        text = result.model_dump_json(indent=2) + "\n"
    elif fmt == "csv":
        from skillreach._io.csv import safe_cell

        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(["skill", "community", "kind", "community_size"])
        for c in result.communities:
            for s in c.skills:  # a formula-looking cell is written as text (no CSV injection)
                writer.writerow([safe_cell(v) for v in (s, c.id, c.kind, c.size)])
        text = buf.getvalue()
    else:
        text = _text(result)
    if out is not None:
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(text, encoding="utf-8")
        except OSError as exc:  # /dev/full, a full disk, a folder: one line naming the file and flag
            raise InputError(
                f"--out {out}: cannot write the communities ({exc.strerror or exc}); give a writable file"
            ) from exc
        print(f"{len(result.communities)} communities of {result.skills} skills → {out}", file=sys.stderr)
    else:
        sys.stdout.write(text)


def _from_sweep(path: Path) -> int:
    from pydantic import ValidationError

    from skillreach.author.sweep import SweepResult, scope_size
    from skillreach.errors import InputError

    try:
        result = SweepResult.model_validate_json(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"--sweep {path}: no such file; pass the sweep.json of skillreach sweep") from None
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "sweep"
        raise InputError(
            f"--sweep {path}: {where}: {err['msg']}; pass the sweep.json of skillreach sweep"
        ) from exc
    size, why = scope_size(result)
    print(f"target size {size}: {why} in {path}", file=sys.stderr)
    return size


def _text(result: object) -> str:
    from skillreach.author.cluster import Clustering

    assert isinstance(result, Clustering)
    lines = [
        f"{len(result.communities)} communities of {result.skills} skills "
        f"(at most {result.target_size} each; "
        f"{result.edges} edges, modularity {result.modularity:.3f}, seed {result.seed})",
        "",
    ]
    for c in result.communities:
        cohesion = "—" if c.cohesion is None else f"{c.cohesion:.2f}"
        head = f"#{c.id} {c.kind} · {c.size} skills · cohesion {cohesion}"
        if c.terms:
            head += f" · {', '.join(c.terms)}"
        lines.append(head)
        lines.append("  " + ", ".join(c.skills))
        for leak in c.leaks:
            lines.append(f"  leak: {leak.skill} ~ {leak.other} (#{leak.other_community}, {leak.weight:.2f})")
        lines.append("")
    return "\n".join(lines)


def register(app: typer.Typer) -> None:
    app.command("cluster")(cluster_cmd)
