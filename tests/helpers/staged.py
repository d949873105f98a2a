"""Helpers of the staged-gate, optimize and uplift tests: baseline records built by hand, a git repo
of skills with a committed baseline (for ``check --changed``), SKILL.md files with extra frontmatter,
and a query-generation stand-in that writes cited drafts."""

from __future__ import annotations

import json
import re
import subprocess
import threading
from pathlib import Path
from typing import Any

import yaml

from skillreach.baselines.records import BaselineRecord, CaseCounts, CaseOutcomes, metric_value

__all__ = ["GIT_ENV", "CitedWriter", "commit_baseline", "git", "make_record", "run_study", "write_skill"]

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def make_record(
    activated: dict[str, list[int]],
    *,
    compliance: dict[str, list[bool]] | None = None,
    skill_version: str = "git:1111",
    bid: str = "deploy@base",
    digests: dict[str, str] | None = None,
) -> BaselineRecord:
    """A record of skill ``deploy`` whose positive cases activated as given (``digests``: each case's
    content digest; ``None`` where not given)."""
    per_case = {
        qid: CaseOutcomes(
            role="positive",
            kind="implicit",
            probes=len(acts),
            activated=tuple(acts),
            compliance=tuple((compliance or {}).get(qid, ())),
            digest=(digests or {}).get(qid),
        )
        for qid, acts in activated.items()
    }
    return BaselineRecord(
        baseline_id=bid,
        skill="deploy",
        created_at="2026-12-01T00:00:00Z",
        skill_version=skill_version,
        skill_version_origin="git",
        corpus_version="queries.json@sha256:" + "a" * 64,
        model="claude-sonnet-4-5-20250929",
        runtime="fake",
        runs_per_case=max(len(v) for v in activated.values()),
        cases=CaseCounts(positive=len(activated), negative=0),
        metrics={
            m: metric_value(per_case, m)
            for m in ("activation", "false_activation", "compliance", "task_quality")
        },
        per_case=per_case,
    )


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def write_skill(
    root: Path, name: str, description: str, body: str = "", extra: dict[str, Any] | None = None
) -> Path:
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    front = yaml.safe_dump(
        {"name": name, "description": description, **(extra or {})}, sort_keys=False, width=1000
    )
    path = folder / "SKILL.md"
    path.write_text(f"---\n{front}---\n{body}", encoding="utf-8")
    return path


def run_study(repo: Path, config: Path, out: Path) -> Path:
    """One study in process (the study flow's body), as ``check`` runs it; returns the artifact."""
    from skillreach.cli.run_cmds import run_study as run
    from skillreach.study import StudyConfig

    cfg = StudyConfig.build(
        config, skills=(repo / "skills",), queries=repo / "evals" / "queries.json", out=out
    )
    run(cfg, use_prefect=False, kind="check")
    return out / "artifact.json"


def commit_baseline(repo: Path, artifact: Path, skill: str) -> None:
    from skillreach.cli import main

    code = main(
        [
            "baseline",
            "record",
            "--artifact",
            str(artifact),
            "--skill",
            skill,
            "--queries",
            str(repo / "evals" / "queries.json"),
            "--skills",
            str(repo / "skills"),
            "--commit",
        ]
    )
    assert code == 0


_BODY = re.compile(r'<skill_body id="([A-Z0-9-]+)">\n(.*?)\n</skill_body>', re.DOTALL)
_KIND = re.compile(r'^- "([a-z_]+)":', re.MULTILINE)


class CitedWriter:
    """Answers query-generation requests as a good model would: drafts of every kind asked for, each
    citing six words of the body it was shown. ``asked`` counts the requests."""

    def __init__(self) -> None:
        self.asked = 0
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> str:
        with self._lock:
            self.asked += 1
        prompt = body["messages"][0]["content"]
        shown = dict(_BODY.findall(prompt))
        m = re.search(r"Write (\d+) requests? of each", prompt)
        per_kind = int(m.group(1)) if m else 2
        drafts = []
        for kind in _KIND.findall(prompt):
            for i in range(per_kind):
                label = "RIVAL-1" if kind == "neighbor_negative" else "SKILL"
                lines = [ln for ln in shown[label].splitlines() if len(ln.split()) >= 6]
                words = " ".join(f"{kind[:3]}{i}x{j}" for j in range(6))
                item = {
                    "kind": kind,
                    "text": f"Please help me with {words}",
                    "citation": " ".join(lines[i % len(lines)].split()[:6]),
                }
                if kind == "neighbor_negative":
                    item["rival"] = label
                drafts.append(item)
        return json.dumps({"queries": drafts})
