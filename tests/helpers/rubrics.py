"""Rubric checks on three queries of the shared world, and the fake agent's answers to them."""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["ANSWERS", "RUBRIC", "with_rubrics"]

RUBRIC = "Names the rollback plan."
# FakeJudge keywords of RUBRIC: names, rollback, plan
ANSWERS = {
    "alpha-0": ("chart done; rollback plan ready", 2 / 3),
    "alpha-1": ("chart done", 0.0),
    "alpha-2": ("names the rollback plan", 1.0),
}


def with_rubrics(world: dict[str, Path]) -> None:
    data = json.loads(world["queries"].read_text())
    for q in data["queries"]:
        if q["id"] in ANSWERS:
            q["checks"] = {"rubric": RUBRIC}
    world["queries"].write_text(json.dumps(data))
    entries = json.loads(world["good"].read_text())
    for qid, (text, _) in ANSWERS.items():
        entries[qid] = {"invoked": ["alpha"], "final_text": text}
    world["good"].write_text(json.dumps(entries))
