"""``gate.json`` in a study folder: the study's gate (comparisons, skills not compared), so that
``skillreach report DIR`` renders the same gate report as the run did. Tied to its artifact by digest."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from skillreach.errors import InputError

__all__ = ["GATE_FILE", "read_gate", "write_gate"]

GATE_FILE = "gate.json"
MAX_GATE_BYTES = 64 * 2**20
"""Bytes a gate report may hold (one comparison per skill: a few KiB each)."""


def write_gate(
    folder: str | os.PathLike[str],
    artifact_digest: str | None,
    comparisons: Sequence[Any],
    not_compared: Sequence[str],
) -> Path:
    """Write ``folder/gate.json`` (atomically) with the comparisons as JSON; return its path."""
    path = Path(folder) / GATE_FILE
    body = {
        "artifact_digest": artifact_digest,
        "comparisons": [c if isinstance(c, dict) else c.model_dump(mode="json") for c in comparisons],
        "not_compared": list(not_compared),
    }
    tmp = path.with_name(f".{GATE_FILE}.tmp")
    try:
        tmp.write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        raise InputError(f"{path}: cannot write the gate report ({exc.strerror})") from exc
    return path


def read_gate(
    folder: str | os.PathLike[str], artifact_digest: str | None
) -> tuple[list[Any], list[str]] | None:
    """(comparisons, not compared) of ``folder/gate.json`` when it belongs to the artifact, else ``None``.

    A gate file of another artifact (the study was re-scored since) is ignored: it gated other figures.
    """
    path = Path(folder) / GATE_FILE
    if not path.is_file():
        return None
    from skillreach._io.json import read_json_file

    try:
        data = read_json_file(path, max_bytes=MAX_GATE_BYTES, what="gate report", allow_nan=True)
    except InputError as exc:
        raise InputError(f"{exc} (not a gate report: delete it or re-run the study)") from exc
    if not isinstance(data, dict) or not isinstance(data.get("comparisons"), list):
        raise InputError(f"{path}: not a gate report (no comparisons); delete it or re-run the study")
    if artifact_digest is None or data.get("artifact_digest") != artifact_digest:
        return None
    return list(data["comparisons"]), [str(s) for s in data.get("not_compared") or []]
