"""Refuse an output folder that holds probes of another configuration (``skillreach run --out DIR``).

A study's probes are comparable only under one fingerprint (catalog digest, query-set digest, runtime,
model snapshot, the options that change what is measured: :func:`skillreach.study.runner.fingerprint`).
A run into a folder whose ``probes.jsonl`` holds records of another fingerprint — or, per the folder's
``study.json``, another number of attempts — would add a second configuration beside the first one
silently; :func:`out_conflict` says what differs so the command can refuse in one line (``--force``
adds the configuration anyway).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from skillreach.errors import InputError
from skillreach.models import ProbeRecord
from skillreach.study.config import StudyConfig
from skillreach.study.folder import STUDY_FILE, StudyFile, read_study_file
from skillreach.study.plan import StudyInputs

__all__ = ["MEASURING_FIELDS", "check_out_folder", "out_conflict"]

MEASURING_FIELDS = (
    "runtime",
    "model",
    "catalog",
    "target",
    "skill_precedence",
    "neighborhood_k",
    "neighborhood_size",
    "seed",
    "runtime_options",
    "attempts",
    "max_turns",
    "early_exit",
    "compliance",
    "listing_budget_chars",
)
"""Configuration fields (``study.json``'s ``config``) that change what a study measures; a difference
in one of them is named in the refusal."""


def _short(value: Any) -> str:
    if isinstance(value, str) and value.startswith("sha256:"):
        return value if len(value) <= 19 else value[:19] + "…"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "…"


def _study_file(out: Path) -> StudyFile | None:
    if not (out / STUDY_FILE).is_file():
        return None
    try:
        return read_study_file(out)
    except InputError:
        return None


def out_conflict(
    out: Path,
    existing: Sequence[ProbeRecord],
    *,
    fingerprint: str,
    config: Mapping[str, Any],
    catalog_digest: str,
    queries_digest: str,
    resolved_model: str | None,
) -> str | None:
    """What configuration the probes already in ``out`` ran, when it is not this one; else ``None``.

    ``config`` is the new study's public configuration (:meth:`StudyConfig.public_dict`). Records without
    a fingerprint (written by hand or by an old version) cannot be told apart and never conflict.
    """
    others = [r for r in existing if r.fingerprint is not None and r.fingerprint != fingerprint]
    study = _study_file(out)
    if study is not None and study.fingerprint != fingerprint and not others:
        study = None  # study.json of a configuration whose probes are gone: nothing would mix
    attempts_moved = (
        study is not None
        and study.fingerprint == fingerprint
        and study.config.get("attempts") not in (None, config.get("attempts"))
    )
    if not others and not attempts_moved:
        return None
    diffs: list[str] = []
    if study is not None:
        was = study.config
        if study.catalog.get("digest") not in (None, catalog_digest):
            diffs.append(f"catalog digest {_short(study.catalog['digest'])} → {_short(catalog_digest)}")
        if study.query_set.get("digest") not in (None, queries_digest):
            diffs.append(
                f"query-set digest {_short(study.query_set['digest'])} → {_short(queries_digest)}"
            )
        for field in MEASURING_FIELDS:
            if field in was and field in config and was[field] != config[field]:
                diffs.append(f"{field} {_short(was[field])} → {_short(config[field])}")
        resolved_was = study.model.get("resolved")
        if resolved_was != resolved_model and not any(d.startswith("model ") for d in diffs):
            diffs.append(f"model snapshot {_short(resolved_was)} → {_short(resolved_model)}")
    elif others:
        rec = others[-1]
        if rec.runtime and rec.runtime != config.get("runtime"):
            diffs.append(f"runtime {rec.runtime!r} → {config.get('runtime')!r}")
        if rec.resolved_model != resolved_model:
            diffs.append(f"model snapshot {_short(rec.resolved_model)} → {_short(resolved_model)}")
    if not diffs:
        old = others[-1].fingerprint if others else study.fingerprint if study else None
        diffs.append(f"fingerprint {_short(old)} → {_short(fingerprint)}")
    return "; ".join(diffs)


def check_out_folder(
    out: Path,
    existing: Sequence[ProbeRecord],
    *,
    fingerprint: str,
    config: StudyConfig,
    inputs: StudyInputs,
    resolved_model: str | None,
) -> None:
    """Raise the one-line :class:`InputError` of :func:`out_conflict` (exit 2) when there is one."""
    qs = inputs.query_set
    what = out_conflict(
        out,
        existing,
        fingerprint=fingerprint,
        config=config.public_dict(),
        catalog_digest=inputs.catalog.digest,
        queries_digest=qs.provenance.digest or qs.compute_digest(),
        resolved_model=resolved_model,
    )
    if what is not None:
        raise InputError(
            f"--out {out}: holds probes of another configuration ({what}); pass another --out, "
            "or --force to add this configuration beside them"
        )
