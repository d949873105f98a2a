"""``skillreach uplift``: quality with and without the skill, paired per case; misses classified.

The agent is the local Messages API stand-in behind the real ``anthropic`` runtime. With ``deploy`` in
the catalog it loads the skill on the first attempt of the u* and w* cases and skips it on the second
(a routing miss), always on z0, never on n*. Once loaded it answers well ("canary"). Without the skill,
u* and z0 are answered as well anyway, w* badly, n* badly.
"""

from __future__ import annotations

import json
import re
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from skillreach.author.uplift import uplift_report
from skillreach.cli import main
from skillreach.errors import InputError
from skillreach.models import Checks, OutputCheck, ProbeRecord, Query, QuerySet
from skillreach.queries.sets import seal, write_query_set
from tests.fakes.messages_api import MessagesAPI, Reply, query_text, skill_call, text_reply, turn_of
from tests.helpers.staged import write_skill

CHECKS = Checks(output=(OutputCheck(contains="canary"),))
CASES = ["u0", "u1", "u2", "u3", "w0", "w1", "w2", "w3", "n0", "n1", "z0"]


def _query_set() -> QuerySet:
    qs = [Query(id=c, text=f"roll out release {c}", expected_skill="deploy", checks=CHECKS) for c in CASES]
    qs += [Query(id="p0", text="merge the pdfs p0", expected_skill="pdf")]
    return seal(QuerySet(catalog_id="u", queries=tuple(qs)), source="test")


class Worker:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.first_turns: Counter[str] = Counter()

    def __call__(self, body: dict[str, Any]) -> Any:
        m = re.search(r"\b([uwnzp]\d)\b", query_text(body))
        assert m is not None
        case = m.group(1)
        if turn_of(body) > 0:
            return text_reply("Rolled out with a canary first.")
        listing = next((t["description"] for t in body.get("tools") or [] if t["name"] == "Skill"), "")
        if "- deploy:" in listing:
            with self.lock:
                n = self.first_turns[case]
                self.first_turns[case] += 1
            if case == "z0" or (case[0] in "uw" and n % 2 == 0):
                return Reply([skill_call("deploy")])
        return text_reply("Rolled out with a canary." if case[0] in "uz" else "I pushed it.")


def test_uplift_classifies_scripted_misses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    skills = tmp_path / "skills"
    write_skill(skills, "deploy", "Deploy the web service to production.", "# deploy\n\nCanary first.\n")
    write_skill(skills, "pdf", "Merge, split and fill PDF files.", "# pdf\n")
    qpath = tmp_path / "queries.json"
    write_query_set(_query_set(), qpath)
    with MessagesAPI(Worker(), latency=0.0) as api:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        args = ["uplift", "deploy", "--skills", str(skills), "--queries", str(qpath)]
        args += ["--runtime", "anthropic", "--model", "claude-sonnet-4-5", "--attempts", "2"]
        code = main([*args, "--json"])
        out = capsys.readouterr()
        assert code == 0, out.err
        report = json.loads(out.out)
        code = main(args)
        text = capsys.readouterr().out
    assert code == 0
    by = {c["case"]: c for c in report["cases"]}
    for c in ("u0", "u1", "u2", "u3"):
        assert by[c]["miss"] == "didn't need it", by[c]
        assert (by[c]["activated"], by[c]["missed"]) == (1, 1)
    for c in ("w0", "w1", "w2", "w3"):
        assert by[c]["miss"] == "wrongly skipped", by[c]
        assert by[c]["uplift"] == pytest.approx(1.0)
    assert by["n0"]["miss"] == by["n1"]["miss"] == "unclear"  # never loaded: quality with it unknown
    assert by["z0"]["miss"] is None
    assert report["misses"] == {"didn't need it": 4, "wrongly skipped": 4, "unclear": 2}
    assert report["uplift"]["value"] == pytest.approx(4 / 9)
    assert report["uplift"]["cases"] == 9
    assert report["uplift"]["ci95"][0] < 4 / 9 < report["uplift"]["ci95"][1]
    assert "uplift: +0.444" in text
    assert "wrongly skipped 4" in text


def test_uplift_report_pure_and_bad_input() -> None:
    qs = _query_set()

    def rec(case: str, invoked: tuple[str, ...], text: str, attempt: int = 1) -> ProbeRecord:
        return ProbeRecord(query_id=case, attempt=attempt, invoked=invoked, final_text=text)

    with_arm = [rec("w0", ("deploy",), "canary"), rec("w0", (), "no", 2), rec("u0", (), "canary")]
    without_arm = [rec("w0", (), "nope"), rec("u0", (), "canary")]
    r = uplift_report(qs, "deploy", with_arm, without_arm, margin=0.1)
    by = {c.case: c for c in r.cases}
    assert by["w0"].miss == "wrongly skipped"
    assert by["u0"].miss == "unclear"  # missed, and never activated: no quality with the skill
    assert r.uplift is not None
    assert r.uplift.cases == 1
    with pytest.raises(InputError, match="quality checks"):
        uplift_report(qs, "pdf", [], [])
    with pytest.raises(InputError, match="--margin"):
        uplift_report(qs, "deploy", [], [], margin=1.5)
