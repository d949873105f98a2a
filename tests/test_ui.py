"""``skillreach ui`` without a browser: the history cut at every pin change, the chart's geometry, the
store's indexed queries (SQLite and PostgreSQL), the history points equal to what ``baseline record``
records, hostile names escaped on every page of the real command, and the command's one-line errors."""

from __future__ import annotations

import json
import os
import socket
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from skillreach.store import Store
from skillreach.store.dashboard import (
    StudyFilter,
    index_progress,
    latest_points,
    pending_studies,
    save_points,
    skill_points,
    studies_page,
    study_alert_counts,
    study_kinds,
)
from skillreach.ui.charts import history_chart, time_span
from skillreach.ui.history import HistoryPoint, Marker, Pins, segments
from tests.helpers import hang
from tests.helpers.dashboard import running_ui

SKILLREACH = Path(sys.executable).with_name("skillreach")
PG_URL = os.environ.get("SKILLREACH_TEST_PG_URL")
T0 = datetime(2026, 11, 1, 2, 0, tzinfo=UTC)
HOSTILE = '"><script>window.__pwned=1</script><img src=x onerror=alert(1)>'


def _pins(model: str = "m-1", corpus: str = "sha256:" + "a" * 64, rubric: str | None = None,
          runtime: str = "fake", version: str | None = "1.0") -> Pins:
    return Pins(model, corpus, rubric, runtime, version)


def _point(day: int, value: float, pins: Pins, study: str | None = None) -> HistoryPoint:
    return HistoryPoint(T0 + timedelta(days=day), study or f"st-{day}", "compliance", pins,
                        {"activation": {"value": value, "ci95": [max(0, value - 0.1), min(1, value + 0.1)],
                                        "n": 10, "cases": 5}})


# ---------------------------------------------------------------------------------------- the history


def test_segments_break_at_every_pin_and_never_join_across_one() -> None:
    a, b = _pins(), _pins(model="m-2")
    c = _pins(model="m-2", runtime="fake", version="1.1")
    d = _pins(model="m-2", version="1.1", rubric="sha256:" + "r" * 64)
    e = _pins(model="m-2", version="1.1", rubric="sha256:" + "r" * 64, corpus="sha256:" + "b" * 64)
    points = [_point(i, 0.9, p) for i, p in enumerate([a, a, b, b, c, d, e, a])]
    segs = segments(reversed(points))  # any order in
    assert [len(s.points) for s in segs] == [2, 2, 1, 1, 1, 1]
    assert [s.change for s in segs] == [
        (), ("model m-1 → m-2",), ("runtime fake 1.0 → fake 1.1",), ("rubric none → rrrrrrrr",),
        ("corpus aaaaaaaa → bbbbbbbb",),
        ("model m-2 → m-1", "corpus bbbbbbbb → aaaaaaaa", "rubric rrrrrrrr → none",
         "runtime fake 1.1 → fake 1.0"),
    ]  # back to the first pins: a segment of its own, never the first one continued
    assert segments([]) == []


def test_the_chart_draws_one_group_per_segment_the_bar_over_its_pins_and_the_markers() -> None:
    a, b = _pins(), _pins(model="m-2")
    points = [_point(0, 0.9, a), _point(1, 0.8, a), _point(2, 0.85, a), _point(3, 0.5, b)]
    segs = segments(points)
    markers = [Marker(T0 + timedelta(days=1, hours=3), "alpha", "edited", "abc"),
               Marker(T0 + timedelta(days=2, hours=3), "delta", "neighbour added", "def"),
               Marker(T0 - timedelta(days=30), "alpha", "added")]  # outside the axis: not drawn
    chart = history_chart("activation", "Activation", segs, span=time_span([p.at for p in points]),
                          markers=markers, bar=(a, 0.88, (0.8, 0.95), "bar alpha@1"))
    assert len(chart.segments) == 2
    first, second = chart.segments
    assert len(first.lines) == 1
    assert len(first.lines[0].split()) == 3
    assert len(first.bands) == 1
    assert not first.whiskers
    assert not second.lines
    assert len(second.whiskers) == 1
    assert len(chart.boundaries) == 1
    assert chart.boundaries[0].short == "model → m-2"
    assert first.x1 < chart.boundaries[0].x < second.x0  # between the segments, on neither line
    assert chart.bar is not None
    assert chart.bar.x1 <= first.x1 + 4
    assert [m.own for m in chart.markers] == [True, False]
    ys = [d.y for d in first.dots]
    assert ys[0] < ys[1]  # 0.9 is drawn above 0.8 (SVG y grows downwards)
    assert chart.measured == 4
    empty = history_chart("compliance", "Compliance", segs, span=time_span([p.at for p in points]))
    assert empty.measured == 0
    assert empty.note


# ---------------------------------------------------------------------------------------- the store


def _reset_pg(url: str) -> None:
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text("DROP SCHEMA public CASCADE"))
        conn.execute(text("CREATE SCHEMA public"))
    engine.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'store.db'}"
    else:
        if not PG_URL:
            pytest.skip("no PostgreSQL: set SKILLREACH_TEST_PG_URL (bash .ci/run starts one)")
        _reset_pg(PG_URL)
        url = PG_URL
    s = Store(url)
    yield s
    s.close()


def _study(store: Store, sid: str, *, kind: str = "study", runtime: str = "fake", out: str = "/tmp/x",
           status: str = "done") -> None:
    store.begin_study(sid, out_dir=out, runtime=runtime, model="m", catalog_id="all",
                      catalog_digest="sha256:" + "c" * 64, queries_digest="sha256:" + "q" * 64,
                      fingerprint="fp-" + sid, attempts=1, config={}, kind=kind)
    if status != "running":
        store.finish_study(sid, status=status)


def _row(
    skill: str, at: datetime, value: float, *, kind: str = "study", verdict: str | None = None
) -> dict[str, Any]:
    return {"skill": skill, "at": at, "kind": kind, "model": "m", "runtime": "fake", "runtime_version": None,
            "corpus_version": "sha256:" + "a" * 64, "rubric_version": None, "skill_version": None,
            "metrics": {"activation": {"value": value, "ci95": [0.0, 1.0], "n": 4, "cases": 4}},
            "verdict": verdict, "baseline_id": None, "lost": []}


def test_the_dashboards_queries_page_filter_and_pick_the_newest(store: Store) -> None:
    for i in range(7):
        _study(store, f"st-{i}", kind="compliance" if i % 2 else "study",
               status="done" if i < 6 else "failed")
    store.add_alert({"event": "skillreach.gate.breached", "skill": "beta", "metric": "activation"},
                    study_id="st-3")
    store.add_alert({"event": "skillreach.gate.inconclusive", "skill": "beta", "metric": "activation"},
                    study_id="st-4")
    assert len(pending_studies(store, 50)) == 6  # done studies only, newest first
    save_points(store, "st-1", [_row("alpha", T0, 0.5, kind="compliance", verdict="ok"),
                                _row("beta", T0, 0.9, kind="compliance")])
    save_points(store, "st-2", [_row("alpha", T0 + timedelta(days=1), 0.7)])
    save_points(store, "st-3", [_row("alpha", T0 + timedelta(days=2), 0.6, kind="compliance")])
    save_points(store, "st-5", [], note="no artifact.json")
    assert index_progress(store) == (4, 6)
    assert {s.id for s in pending_studies(store, 50)} == {"st-0", "st-4"}
    assert [p.metrics["activation"]["value"] for p in skill_points(store, "alpha")] == [0.5, 0.7, 0.6]
    assert [p.study_id for p in skill_points(store, "alpha", limit=2)] == ["st-2", "st-3"]  # the newest
    newest = latest_points(store)
    assert newest["alpha"].study_id == "st-3"
    assert newest["beta"].study_id == "st-1"
    assert latest_points(store, kinds=["study"])["alpha"].study_id == "st-2"
    assert latest_points(store, gated=True)["alpha"].study_id == "st-1"
    save_points(store, "st-1", [_row("alpha", T0, 0.4, kind="compliance")])  # read again: replaced
    assert next(p.metrics["activation"]["value"] for p in skill_points(store, "alpha")) == 0.4
    rows, total = studies_page(store, StudyFilter(), offset=0, limit=3)
    assert total == 7
    assert len(rows) == 3
    assert [r.id for r in studies_page(store, StudyFilter(kind="compliance"))[0]] == ["st-5", "st-3", "st-1"]
    assert [r.id for r in studies_page(store, StudyFilter(verdict="breached"))[0]] == ["st-3"]
    assert "st-3" not in {r.id for r in studies_page(store, StudyFilter(verdict="ok"))[0]}
    assert [r.id for r in studies_page(store, StudyFilter(verdict="failed"))[0]] == ["st-6"]
    assert study_alert_counts(store, ["st-3", "st-4", "st-0"]) == {"st-3": (1, 1), "st-4": (0, 1)}
    assert study_kinds(store) == ["compliance", "study"]
    store.writing  # noqa: B018 - the store stays usable
    from skillreach.store import forget_before

    forget_before(store, datetime.now(UTC) + timedelta(days=1))  # gc: the points go with their studies
    assert skill_points(store, "alpha") == []
    assert index_progress(store) == (0, 0)


# ------------------------------------------------------------------------ points = baseline record's


def _sr(*args: str, cwd: Path, ok: tuple[int, ...] = (0,)) -> hang.Outcome:
    out = hang.finish([str(SKILLREACH), *args], limit_s=600, cwd=cwd)
    assert out.returncode in ok, out.stderr
    return out


def test_a_history_point_is_the_record_baseline_record_writes(tmp_path: Path) -> None:
    """The dashboard computes nothing of its own: its point of a skill is ``baseline record``'s record."""
    from skillreach.ui.indexer import index_pending

    _sr("run", "--out", "runs/demo", cwd=tmp_path)  # the bundled example, offline
    with Store(f"sqlite:///{tmp_path / '.skillreach' / 'skillreach.db'}") as store:
        assert index_pending(store) == 1
        points = {p.skill: p for p in latest_points(store).values()}
    assert len(points) == 12  # every skill of the example with a positive case
    for skill in ("release-deploy", "log-search"):
        rec = json.loads(_sr("baseline", "record", "--artifact", "runs/demo/artifact.json", "--skill", skill,
                             cwd=tmp_path).stdout)
        p = points[skill]
        assert p.metrics == rec["metrics"]
        assert (p.model, p.runtime, p.runtime_version) == (rec["model"], rec["runtime"]["name"],
                                                           rec["runtime"]["version"])
        assert (p.corpus_version, p.rubric_version) == (rec["corpus_version"], rec["rubric_version"])
        missed = {case for case, o in rec["per_case"].items()
                  if o["outcomes"]["role"] == "positive" and 0 in o["outcomes"]["activated"]}
        assert {c[0] for c in p.lost} == missed


# ----------------------------------------------------------------------------- hostile text, escaped


def test_hostile_names_are_text_on_every_page(tmp_path: Path) -> None:
    """A skill, a runtime, an alert and a study error made of markup: every page shows them as text."""
    db = tmp_path / ".skillreach" / "skillreach.db"
    with Store(f"sqlite:///{db}") as store:
        _study(store, "st-h", runtime="<b>rt</b>", out=str(tmp_path / "runs" / HOSTILE))
        row = _row(HOSTILE, T0, 0.5, verdict="breach")
        row["lost"] = [["case-1", 2, 2, {HOSTILE: 2}]]
        save_points(store, "st-h", [row])
        store.add_alert({"event": "skillreach.gate.breached", "skill": HOSTILE, "metric": "activation",
                         "cause_detail": f"lost 2 of 2 cases to {HOSTILE}"}, study_id="st-h")
        _study(store, "st-f", status="failed")
        store.finish_study("st-f", status="failed", error=f"boom {HOSTILE}")
    from urllib.parse import quote

    with running_ui(tmp_path, log=tmp_path / "ui.log") as ui:
        pages = {p: ui.get(p) for p in ("/", "/runs", "/runs/st-h", "/runs/st-f", "/decisions", "/agents",
                                        f"/skills/{quote(HOSTILE, safe='')}",
                                        "/runs?verdict=" + quote(HOSTILE))}
    for path, resp in pages.items():
        body = resp.text
        assert "<script>window.__pwned" not in body, path
        assert "<img src=x" not in body, path
        assert "script-src" not in resp.headers["content-security-policy"]  # no script may run at all
        assert resp.headers["x-content-type-options"] == "nosniff"
    assert pages["/"].status_code == 200
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in pages["/"].text  # shown, as text
    skill_page = pages[f"/skills/{quote(HOSTILE, safe='')}"]
    assert skill_page.status_code == 200
    assert "lost 2 of 2 cases to &#34;&gt;&lt;script&gt;" in skill_page.text
    assert "boom &#34;&gt;&lt;script&gt;" in pages["/runs/st-f"].text
    assert pages["/runs?verdict=" + quote(HOSTILE)].status_code == 400  # a bad filter: one line, escaped


# --------------------------------------------------------------------------------- the command's errors


def test_a_port_in_use_or_a_bad_host_header_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        out = hang.finish([str(SKILLREACH), "ui", "--port", str(port)], limit_s=120, cwd=tmp_path)
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1
    assert f"cannot listen on 127.0.0.1:{port}" in out.stderr
    assert "Traceback" not in out.stderr
    with running_ui(tmp_path, log=tmp_path / "ui.log") as ui:
        rebound = ui.get("/", headers={"Host": "attacker.example"})  # a DNS-rebinding page
        assert rebound.status_code == 400
        assert ui.get("/runs/st-none").status_code == 404
        assert ui.get("/?token=guess").status_code == 403  # read-only: no token opens anything


def test_status_links_the_dashboard_and_each_study_on_it(tmp_path: Path) -> None:
    """``ui_url`` (the setting): ``skillreach status`` names the dashboard and each last study's page."""
    _sr("run", "--out", "runs/demo", cwd=tmp_path)
    env = {**os.environ, "SKILLREACH_UI_URL": "http://dash.example.invalid:8420/", "PREFECT_API_URL": ""}
    out = hang.finish([str(SKILLREACH), "status", "--json"], limit_s=300, cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr
    found = json.loads(out.stdout)
    assert found["dashboard"] == "http://dash.example.invalid:8420/"
    study = json.loads((tmp_path / "runs" / "demo" / "study.json").read_text(encoding="utf-8"))["study_id"]
    assert found["studies"]["study"]["dashboard"] == f"http://dash.example.invalid:8420/runs/{study}"
    text = hang.finish([str(SKILLREACH), "status"], limit_s=300, cwd=tmp_path, env=env).stdout
    assert "dashboard: http://dash.example.invalid:8420/" in text
    assert f"http://dash.example.invalid:8420/runs/{study}" in text


def test_serve_starts_the_dashboard_beside_and_its_alerts_link_to_it(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """``skillreach serve``'s one call (``dashboard_beside``): the dashboard, read-only, in a thread; the
    service's environment then names it, so the flow runs' alerts link to it."""
    import httpx

    from skillreach.ui.server import dashboard_beside

    monkeypatch.chdir(tmp_path)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {"SKILLREACH_UI_PORT": str(port)}
    said: list[str] = []
    thread = dashboard_beside(env, log=said.append)
    assert thread is not None, said
    try:
        assert env["SKILLREACH_UI_URL"] == f"http://127.0.0.1:{port}"
        deadline = datetime.now(UTC) + timedelta(seconds=60)
        while True:
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).json()
                break
            except httpx.HTTPError:
                assert datetime.now(UTC) < deadline, said
        assert health["writes"] is False  # read-only beside the service
        assert any("dashboard at" in line for line in said)
        env2 = {"SKILLREACH_UI_PORT": str(port)}
        assert dashboard_beside(env2, log=said.append) is None  # the port is taken: one line, no crash
        assert "SKILLREACH_UI_URL" not in env2
        assert "dashboard not started" in said[-1]
    finally:
        thread.stop()


def test_an_alert_names_the_skills_dashboard_page() -> None:
    """``ui_url`` is one field of the payload, and the webhook's message says it."""
    from skillreach.service.alerts import breach_payload, notice_payload, slack_message, with_ui_link

    breach = breach_payload(skill="pdf docs", metric="activation", delta=-0.25, interval=(-0.4, -0.1),
                            baseline_id="pdf@1", run_link="http://ui/runs/1", gate=-0.05)
    every = notice_payload("skillreach.baseline.expired", skill="*", message="no baselines yet",
                           run_link="http://ui/r")
    for payload, page in ((breach, "/skills/pdf%20docs"), (every, "/")):
        linked = with_ui_link(payload, "http://dash.example.invalid:8420/")
        assert linked["ui_url"] == "http://dash.example.invalid:8420" + page
        text = slack_message(linked)["text"]
        assert f"dashboard: http://dash.example.invalid:8420{page}" in text
        assert with_ui_link(payload, None) == payload  # no setting: no field, the message as before
