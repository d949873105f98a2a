"""The run folders read into the store's ``skill_points``: for each finished study, every skill with
positive cases gets the record ``skillreach baseline record`` would build from that study
(:func:`skillreach.baselines.records.record_baseline`: its four metrics with their clustered intervals and
its pins), the study's gate verdict for it (``gate.json``) and the cases it did not always reach, with
who took them (the record's ``taken_by``).

A study is read once (``skill_point_studies`` says so, with why it gave nothing when it gave nothing); the
dashboard's :class:`Indexer` thread reads the newest pending studies first, a few at a time, so a page
never waits for it (the page says how many studies are still to read).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from skillreach.errors import SkillreachError
from skillreach.store.dashboard import pending_studies, save_points
from skillreach.store.database import Store, StudyRow

__all__ = ["Indexer", "index_pending", "points_of_study"]

log = logging.getLogger("skillreach.ui.indexer")

_VERDICT_ORDER = ("breach", "drift", "inconclusive", "refused", "ok")


def _gate_verdicts(folder: Path, digest: str | None) -> dict[str, tuple[str, str | None]]:
    """skill → (its gate verdict in the study's ``gate.json``, the baseline compared with)."""
    from skillreach.reports.gate_file import read_gate

    try:
        gate = read_gate(folder, digest)
    except SkillreachError:
        return {}
    if gate is None:
        return {}
    comparisons, not_compared = gate
    out: dict[str, tuple[str, str | None]] = {}
    for c in comparisons:
        if not isinstance(c, Mapping) or not isinstance(c.get("skill"), str):
            continue
        seen = {str(r.get("verdict")) for r in c.get("results") or [] if isinstance(r, Mapping)}
        verdict = next((v for v in _VERDICT_ORDER if v in seen), str(c.get("verdict") or "ok"))
        out[c["skill"]] = (verdict[:32], str(c.get("base_id") or "") or None)
    for line in not_compared:
        skill, sep, rest = line.partition(": ")
        if sep and skill not in out:
            out[skill] = (rest.split(" — ")[0][:32], None)
    return out


def _lost(record: Any) -> list[list[Any]]:
    """``[case, probes that missed, probes, {taker: probes}]`` of each positive case not always reached."""
    out: list[list[Any]] = []
    for case, o in sorted(record.per_case.items()):
        if o.role != "positive" or not o.activated:
            continue
        missed = sum(1 for a in o.activated if a == 0)
        if missed:
            out.append([case, missed, len(o.activated), dict(o.taken_by)])
    return out


def points_of_study(row: StudyRow) -> tuple[list[dict[str, Any]], str | None]:
    """The ``skill_points`` rows of one finished study, and why there are none when there are none."""
    from skillreach.baselines.records import record_baseline
    from skillreach.queries.sets import load_query_set
    from skillreach.scoring.artifact import read_artifact
    from skillreach.study.folder import read_study_file

    folder = Path(row.out_dir)
    path = folder / "artifact.json"
    if not path.is_file():
        return [], f"no artifact.json in {folder}"
    try:
        artifact = read_artifact(path)
        study = read_study_file(folder)
        qpath = study.query_set_path(folder)
        query_set = load_query_set(qpath)
    except SkillreachError as exc:
        return [], exc.message
    expected = {q.expected_skill for q in query_set.queries if q.expected_skill}
    skills = sorted(set(artifact.catalog.skills) & expected)
    gates = _gate_verdicts(folder, artifact.digest)
    at = row.finished_at or row.created_at
    points: list[dict[str, Any]] = []
    for skill in skills:
        try:
            rec = record_baseline(artifact, qpath, skill, query_set=query_set,
                                  judge_model=study.judge_model, now=at)
        except SkillreachError as exc:
            log.info("study %s, skill %s: no point (%s)", row.id, skill, exc.message)
            continue
        verdict, base = gates.get(skill, (None, None))
        points.append({
            "skill": skill, "at": at, "kind": row.kind, "model": rec.model[:128],
            "runtime": rec.runtime.name[:64], "runtime_version": (rec.runtime.version or None),
            "corpus_version": rec.corpus_version, "rubric_version": rec.rubric_version,
            "skill_version": rec.skill_version[:128],
            "metrics": {k: v.model_dump(mode="json") if v is not None else None
                        for k, v in rec.metrics.items()},
            "verdict": verdict, "baseline_id": base, "lost": _lost(rec),
        })
    return points, None if points else "no skill of the catalog has a positive case"


def index_pending(store: Store, *, limit: int = 20, budget_s: float | None = None) -> int:
    """Read up to ``limit`` pending studies (newest first; stop after ``budget_s``); studies read."""
    from sqlalchemy.exc import IntegrityError

    start = time.monotonic()
    done = 0
    for row in pending_studies(store, limit):
        try:
            points, note = points_of_study(row)
        except Exception as exc:  # a folder that cannot be read is noted, never a dead indexer
            points, note = [], f"{type(exc).__name__}: {exc}"[:500]
        with contextlib.suppress(IntegrityError):  # another dashboard read it at the same moment
            save_points(store, row.id, points, note)
        done += 1
        if budget_s is not None and time.monotonic() - start > budget_s:
            break
    return done


class Indexer:
    """A thread reading pending studies every ``interval_s`` seconds (at once after a round that found
    some), until :meth:`stop`."""

    def __init__(self, store: Store, *, interval_s: float = 10.0, batch: int = 20) -> None:
        self.store, self.interval_s, self.batch = store, interval_s, batch
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.rounds = 0

    def run_once(self) -> int:
        return index_pending(self.store, limit=self.batch, budget_s=5.0)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                found = self.run_once()
            except Exception as exc:  # a database that went away: said, and tried again later
                log.warning("indexing the run folders failed: %s", type(exc).__name__)
                found = 0
            self.rounds += 1
            if not found:
                self._stop.wait(self.interval_s)

    def start(self) -> Indexer:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="skillreach-ui-indexer", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
