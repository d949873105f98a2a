"""The checkpoint of a generation (``OUT.checkpoint.jsonl``): a header naming what the drafts were made
from, then one line per finished target, so a killed generation resumes without asking again; and the
report written beside the sealed set (``OUT.report.json``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from skillreach import __version__
from skillreach.errors import InputError
from skillreach.models import Catalog, Frozen
from skillreach.queries.generation import (
    CHECKPOINT_KIND,
    CHECKPOINT_SCHEMA,
    GenerationParams,
    GenerationReport,
    GenerationRequest,
    TargetResult,
)

__all__ = [
    "Checkpoint",
    "CheckpointHeader",
    "append_result",
    "checkpoint_path",
    "report_path",
    "write_report",
]


def checkpoint_path(out: str | os.PathLike[str]) -> Path:
    out = Path(out)
    return out.with_name(out.name + ".checkpoint.jsonl")


def report_path(out: str | os.PathLike[str]) -> Path:
    out = Path(out)
    return out.with_name(out.name + ".report.json")


class CheckpointHeader(Frozen):
    kind: str = CHECKPOINT_KIND
    schema_version: int = CHECKPOINT_SCHEMA
    catalog_digest: str
    template_digest: str
    model: str
    temperature: float | None
    per_skill: int
    kinds: tuple[str, ...]
    rivals: int
    tool_version: str = __version__

    @classmethod
    def of(cls, catalog: Catalog, template: str, params: GenerationParams) -> CheckpointHeader:
        return cls(
            catalog_digest=catalog.digest,
            template_digest=template,
            model=params.model,
            temperature=params.temperature,
            per_skill=params.per_skill,
            kinds=tuple(k.value for k in params.kinds),
            rivals=params.rivals,
        )


_WHAT_CHANGED = {
    "catalog_digest": "the skills (catalog digest {old} → {new})",
    "template_digest": "the prompt templates (digest {old} → {new})",
    "model": "the model ({old} → {new})",
    "temperature": "the temperature ({old} → {new})",
    "per_skill": "--per-skill ({old} → {new})",
    "kinds": "--kinds ({old} → {new})",
    "rivals": "the rivals per target ({old} → {new})",
    "schema_version": "the checkpoint format ({old} → {new})",
}


def _short(value: Any) -> str:
    if isinstance(value, str) and value.startswith("sha256:"):
        return value[:19]
    if isinstance(value, tuple | list):
        return ",".join(map(str, value))
    return str(value)


class Checkpoint:
    """The JSONL checkpoint of a generation: a header line, then one line per finished target."""

    def __init__(self, path: Path, header: CheckpointHeader, results: dict[str, TargetResult]) -> None:
        self.path = path
        self.header = header
        self.results = results

    @classmethod
    def open(
        cls, path: str | os.PathLike[str], header: CheckpointHeader, *, restart: bool = False
    ) -> Checkpoint:
        """Resume from ``path`` (refused when its header differs) or start it afresh."""
        path = Path(path)
        if restart and path.exists():
            path.unlink()
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("w", encoding="utf-8") as fh:
                fh.write(header.model_dump_json() + "\n")
                fh.flush()
                os.fsync(fh.fileno())
            return cls(path, header, {})
        raw = path.read_bytes()
        lines = raw.decode("utf-8", errors="replace").splitlines()
        advice = "delete it or pass --restart to generate afresh"
        try:
            old = CheckpointHeader.model_validate_json(lines[0]) if lines else None
        except ValidationError:
            old = None
        if old is None or old.kind != CHECKPOINT_KIND:
            raise InputError(f"{path}: not a generation checkpoint (unreadable first line); {advice}")
        changed = [
            _WHAT_CHANGED[key].format(old=_short(getattr(old, key)), new=_short(getattr(header, key)))
            for key in _WHAT_CHANGED
            if getattr(old, key) != getattr(header, key)
        ]
        paid = any(line.strip() for line in lines[1:])
        if changed and not paid:  # nothing was paid for under the old inputs: start afresh
            return cls.open(path, header, restart=True)
        if changed:
            raise InputError(
                f"{path}: checkpoint of an earlier generation with different inputs: "
                f"{'; '.join(changed)} changed since; {advice}"
            )
        results: dict[str, TargetResult] = {}
        for line in lines[1:]:
            try:
                result = TargetResult.model_validate_json(line)
            except ValidationError:
                continue  # a line cut short by an interruption: that target is simply done again
            if result.ok:
                results[result.target] = result
        if raw and not raw.endswith(b"\n"):
            with path.open("a", encoding="utf-8") as fh:
                fh.write("\n")
        return cls(path, header, results)

    def finished(self, request: GenerationRequest) -> TargetResult | None:
        """The recorded result for this request, if it was made with exactly this prompt."""
        result = self.results.get(request.target)
        if result is not None and result.request_digest == request.digest:
            return result
        return None


def append_result(path: str | os.PathLike[str], result: TargetResult) -> None:
    """Append one line to a checkpoint: a single ``write`` on an O_APPEND file, then fsync."""
    line = (result.model_dump_json() + "\n").encode("utf-8")
    fd = os.open(os.fspath(path), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)


def write_report(path: str | os.PathLike[str], report: GenerationReport) -> Path:
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(report.model_dump_json(indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path
