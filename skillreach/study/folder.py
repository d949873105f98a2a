"""A study folder describes itself: ``study.json`` beside ``artifact.json``.

``study.json`` holds the resolved configuration without secrets, the catalog digest, the runtime and its
version, the model asked for and the snapshot it resolved to, the judge, the fingerprint and the tool
version; ``query_set.json`` beside it is a copy of the sealed query set the study ran, with its digest.
Any command that reads a study (``baseline record``, ``report``, ``score``, ``check``) needs nothing else.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from skillreach.errors import InputError, NotFoundError
from skillreach.models import Frozen, QuerySet

__all__ = ["QUERY_SET_FILE", "STUDY_FILE", "StudyFile", "read_study_file", "write_study_file"]

STUDY_FILE = "study.json"
QUERY_SET_FILE = "query_set.json"
STUDY_FILE_SCHEMA = 1


class StudyFile(Frozen):
    schema_version: int = STUDY_FILE_SCHEMA
    study_id: str
    kind: str = "study"
    config: dict[str, Any]
    """The resolved configuration, secrets left out (:meth:`StudyConfig.public_dict`)."""
    query_set: dict[str, Any]
    """``{"file": "query_set.json", "digest": "sha256:…", "source": <where it was read from>}``."""
    catalog: dict[str, Any]
    runtime: dict[str, Any]
    """``{"name", "version"}``."""
    model: dict[str, Any]
    """``{"requested", "resolved"}``."""
    judge_model: str | None = None
    fingerprint: str
    tool_version: str

    def query_set_path(self, folder: Path) -> Path:
        return folder / str(self.query_set.get("file") or QUERY_SET_FILE)


def write_study_file(
    folder: Path,
    *,
    study_id: str,
    kind: str,
    config: dict[str, Any],
    query_set: QuerySet,
    query_set_source: str,
    catalog_id: str,
    catalog_digest: str,
    runtime: str,
    runtime_version: str | None,
    model: str | None,
    resolved_model: str | None,
    judge_model: str | None,
    fingerprint: str,
) -> StudyFile:
    """Write ``study.json`` and ``query_set.json`` (each atomically) into ``folder``."""
    from skillreach import __version__
    from skillreach.queries.sets import write_query_set

    digest = query_set.provenance.digest or query_set.compute_digest()
    provenance = query_set.provenance.model_copy(update={"digest": digest})
    sealed = query_set.model_copy(update={"provenance": provenance})
    write_query_set(sealed, folder / QUERY_SET_FILE)
    record = StudyFile(
        study_id=study_id,
        kind=kind,
        config=config,
        query_set={"file": QUERY_SET_FILE, "digest": digest, "source": query_set_source},
        catalog={"id": catalog_id, "digest": catalog_digest},
        runtime={"name": runtime, "version": runtime_version},
        model={"requested": model, "resolved": resolved_model},
        judge_model=judge_model,
        fingerprint=fingerprint,
        tool_version=__version__,
    )
    path = folder / STUDY_FILE
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(record.model_dump_json(indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return record


MAX_STUDY_FILE_BYTES = 16 << 20
"""Bytes a study.json may hold (its configuration and names: kilobytes)."""


def _huge_int(data: Any, where: str = "") -> str | None:
    """The path of the first integer outside int64 in ``data`` (``config.attempts``), else None."""
    if isinstance(data, dict):
        items: Any = data.items()
    elif isinstance(data, list):
        items = enumerate(data)
    else:
        if type(data) is int and not -(2**63) <= data < 2**63:
            return where or "study"
        return None
    for key, value in items:
        found = _huge_int(value, f"{where}.{key}" if where else str(key))
        if found is not None:
            return found
    return None


def read_study_file(folder: Path) -> StudyFile:
    """The ``study.json`` of a study folder (a folder written before it existed has none: NotFoundError)."""
    from skillreach._io.json import JsonProblem, read_json_file

    path = folder / STUDY_FILE
    try:
        # bounded: size, depth, digits, UTF-8 (a study.json is kilobytes; NaN as json.dumps writes it)
        data = read_json_file(path, max_bytes=MAX_STUDY_FILE_BYTES, what="a study.json", allow_nan=True)
    except FileNotFoundError:
        raise NotFoundError(f"{path}: no such file; this folder was not written by skillreach run") from None
    except JsonProblem as exc:
        raise InputError(f"{exc}; re-run the study into this folder") from exc
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: not readable JSON ({exc}); re-run the study into this folder") from exc
    huge = _huge_int(data)
    if huge is not None:
        raise InputError(
            f"{path}: {huge}: an integer outside the 64-bit range a study records; re-run the study into "
            "this folder"
        )
    try:
        return StudyFile.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "study"
        raise InputError(f"{path}: {field}: {err['msg']}") from exc
