"""``skillreach ui`` in a real browser (headless Chromium over CDP, ``tests/helpers/chromium.py``), on a store
filled by a team's week of real runs (``tests/helpers/dashboard.py``): the skills table, a skill's history
in two segments after the model snapshot moved, a probe's trajectory, two runs compared, the agents'
matrix, and a candidate accepted from the Decisions page — the commit ``baseline accept`` writes, with
who and why — refused when read-only and without the session's token.

Each page's screenshot is written under the test's output (``screenshots/``); with ``UI_SCREENSHOTS_TO=DIR``
they are copied there too (``docs/`` holds one of each).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers.chromium import CHROMIUM, Browser, chromium
from tests.helpers.dashboard import HOSTILE, SKILLREACH, UI_URL, Team, make_team, running_ui

pytestmark = pytest.mark.skipif(CHROMIUM is None,
                                reason="no Chromium on this machine (apt-get install chromium)")


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Team:
    return make_team(tmp_path_factory.mktemp("team"))


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("screenshots")


@pytest.fixture(scope="module")
def ui(team: Team, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with running_ui(team.repo, "--allow-writes", log=tmp_path_factory.mktemp("logs") / "ui.log") as u:
        assert u.token, u.log.read_text(encoding="utf-8")
        yield u


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    b = chromium()
    yield b
    b.close()


def _shot(browser: Browser, shots: Path, name: str, max_height: int = 16000) -> Path:
    path = browser.screenshot(shots / f"ui-{name}.png", max_height=max_height)
    assert path.stat().st_size > 10_000
    to = os.environ.get("UI_SCREENSHOTS_TO")
    if to:
        Path(to).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(to) / path.name)
    return path


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


def _unharmed(browser: Browser) -> None:
    """Nothing hostile ran or became markup: no flag set, no injected image."""
    assert browser.js("typeof window.__pwned") == "undefined"
    assert browser.js("document.querySelectorAll('img').length") == 0


def test_the_skills_table_puts_what_needs_a_person_first(team: Team, ui: Any, browser: Browser,
                                                         shots: Path) -> None:
    browser.goto(ui.url + "/")
    rows = browser.js("[...document.querySelectorAll('#skills tbody tr')].map(r => r.dataset.skill)")
    assert set(rows) >= {"alpha", "beta", "gamma", "delta"}
    assert rows[0] == "beta"  # a breached gate and a candidate waiting
    beta = browser.js("document.querySelector('#skills tr[data-skill=beta]').innerText")
    assert "lost 3 of 4 cases to delta" in beta
    assert "candidate" in beta
    assert "fake-snap-20260101" in beta  # the bar's pins
    delta = browser.js("document.querySelector('#skills tr[data-skill=delta]').innerText")
    assert "no query expects it" in delta
    _unharmed(browser)
    _shot(browser, shots, "skills")


def test_a_skills_history_has_two_segments_after_the_model_snapshot_moved(
    team: Team, ui: Any, browser: Browser, shots: Path
) -> None:
    browser.goto(ui.url + "/skills/alpha")
    chart = "svg.chart[data-metric=activation]"
    segs = browser.js(f"[...document.querySelectorAll('#history {chart} g.segment')]"
                      ".map(g => [g.dataset.pins, +g.dataset.points])")
    assert len(segs) == 2
    assert "model fake-snap-20260101" in segs[0][0]
    assert "model fake-snap-20260301" in segs[1][0]
    assert segs[0][1] >= 3  # r1, r2 and the re-baselining, under the first pins
    assert segs[1][1] == 1
    boundary = browser.js(f"document.querySelector('#history {chart} g.boundary title').textContent")
    assert boundary == "new segment: model fake-snap-20260101 → fake-snap-20260301"
    # no line crosses the pins: each polyline lies inside its own segment's group
    assert browser.js(f"document.querySelectorAll('#history {chart} > polyline').length") == 0
    assert browser.js(f"document.querySelectorAll('#history {chart} g.bar').length") == 1  # alpha's bar
    marks = browser.js(f"[...document.querySelectorAll('#history {chart} g.marker title')]"
                       ".map(t => t.textContent)")
    assert any("delta: added to the catalog" in m for m in marks)
    assert browser.js("document.querySelectorAll('#segments tbody tr').length") == 2
    _unharmed(browser)
    browser.goto(ui.url + "/skills/beta")
    segs = browser.js(f"document.querySelectorAll('#history {chart} g.segment').length")
    assert segs == 2  # beta too: its drop under the first snapshot, then the new one
    _shot(browser, shots, "skill")
    lost = browser.js("document.querySelector('#lost').innerText")
    assert "beta-0" in lost
    assert "delta ×1" in lost
    assert "delta" in browser.js("document.querySelector('#confusion').innerText")
    gamma_marks = None
    browser.goto(ui.url + "/skills/gamma")
    gamma_marks = browser.js("[...document.querySelectorAll('#history g.marker.own title')]"
                             ".map(t => t.textContent)")
    assert any("gamma: description or body edited" in m for m in gamma_marks)


def test_a_probes_trajectory_what_it_was_shown_and_its_checks(team: Team, ui: Any, browser: Browser,
                                                              shots: Path) -> None:
    browser.goto(f"{ui.url}/runs/{team.runs['r2']}")
    assert "breach" in browser.js("document.querySelector('#report').innerText")  # the gate section
    gate = browser.js("document.querySelector('#gate').innerText")
    assert "beta" in gate
    assert "activation -0.750" in gate
    assert browser.js("document.querySelectorAll('#probe-list tbody tr').length") == 14
    _unharmed(browser)
    _shot(browser, shots, "run", max_height=2600)
    href = browser.js("[...document.querySelectorAll('#probe-list a')]"
                      ".find(a => a.textContent === 'alpha-0').href")
    browser.goto(href)
    steps = browser.js("document.querySelector('#trajectory').innerText")
    assert "alpha" in steps
    assert "expected" in steps
    listing = browser.js("document.querySelector('#listing').textContent")
    assert "- beta: Write and fix Dockerfiles" in listing
    assert "- delta: Build, fix and optimise" in listing  # delta was in r2's catalog
    checks = browser.js("[...document.querySelectorAll('#checks tbody tr')].map(r => r.innerText)")
    assert any("requires Bash /make chart/" in c and "passed" in c for c in checks)
    assert any("forbids Bash /rm -rf/" in c and "passed" in c for c in checks)
    assert any("Chart ready" in c and "passed" in c for c in checks)
    assert 'onerror="window.__pwned=2"' in browser.js("document.querySelector('#final-text').textContent")
    assert HOSTILE in browser.js("document.querySelector('.tool-input').textContent")
    _unharmed(browser)
    _shot(browser, shots, "probe")
    browser.goto(f"{ui.url}/runs/{team.runs['r1']}/probes/1/alpha-4")
    assert HOSTILE in browser.js("document.querySelector('#query-text').textContent")
    _unharmed(browser)


def test_two_runs_compared_paired(team: Team, ui: Any, browser: Browser, shots: Path) -> None:
    browser.goto(ui.url + "/runs")
    r1, r2 = team.runs["r1"], team.runs["r2"]
    browser.js(f"document.querySelector('input[name=a][value={r1}]').checked = true")
    browser.js(f"document.querySelector('input[name=b][value={r2}]').checked = true")
    _shot(browser, shots, "runs")
    browser.submit("#compare")
    if browser.js("!!document.querySelector('#refused')"):  # more than one axis moved: compare anyway
        browser.goto(browser.js("document.querySelector('a[href*=\"force=1\"]').href"))
    diff = browser.js("document.querySelector('#diff').innerText")
    assert "beta" in diff
    assert "delta" in diff  # the skill that took beta's cases
    assert browser.js("location.search").count("a=") == 1
    _unharmed(browser)
    _shot(browser, shots, "compare", max_height=2600)


def test_the_agents_matrix(team: Team, ui: Any, browser: Browser, shots: Path) -> None:
    browser.goto(ui.url + "/agents")
    matrix = browser.js("document.querySelector('#matrix').innerText")
    for word in ("fake", "keyword", "one", "two", "activation", "false activation"):
        assert word in matrix
    assert "0.67 [0.21, 0.94]" in matrix  # fake sent one of two's three cases to one
    _shot(browser, shots, "agents")


def test_an_alert_links_to_the_skills_page_on_the_dashboard(team: Team, ui: Any, browser: Browser) -> None:
    """The ``ui_url`` setting: the breach's webhook message and its stored payload name beta's page."""
    assert len(team.alerts) == 1
    text = team.alerts[0]["body"]["text"]
    assert "lost 3 of 4 cases to delta" in text
    assert f"dashboard: {UI_URL}/skills/beta" in text
    browser.goto(ui.url + "/skills/beta")
    assert "gate.breached" in browser.js("document.querySelector('#alerts').innerText")


def _post_accept(url: str, **kw: Any) -> httpx.Response:
    data = {"skill": "beta", "name": "Mallory", "reason": "lower it", "csrf": kw.pop("csrf", "x")}
    return httpx.post(url + "/decisions/accept", data=data, timeout=60, follow_redirects=False, **kw)


def test_an_accept_writes_the_commit_only_with_writes_and_the_token(team: Team, ui: Any, browser: Browser,
                                                                    shots: Path, tmp_path: Path) -> None:
    repo = team.repo
    head = _git(repo, "rev-parse", "HEAD")
    candidate = (repo / "baselines" / "candidates" / "beta.json").read_text(encoding="utf-8")
    # read-only (the default): no form, and a write is refused
    with running_ui(repo, log=tmp_path / "ro.log") as ro:
        browser.goto(ro.url + "/decisions")
        assert browser.js("!!document.querySelector('#readonly')")
        assert browser.js("document.querySelectorAll('form.accept').length") == 0
        refused = _post_accept(ro.url)
        assert refused.status_code == 403
        assert "read-only" in refused.text
    # writes enabled, but no session token: no form, and a write is refused
    browser.goto(ui.url + "/decisions")
    assert browser.js("!!document.querySelector('#nosession')")
    assert browser.js("document.querySelectorAll('form.accept').length") == 0
    assert _post_accept(ui.url).status_code == 403
    assert _post_accept(ui.url, cookies={"skillreach_ui_session": "guess"}).status_code == 403
    # the token but not the form's CSRF value, or from another site: refused
    assert _post_accept(ui.url, cookies={"skillreach_ui_session": ui.token}).status_code == 403
    from skillreach.ui.app import csrf_value

    cross = _post_accept(ui.url, cookies={"skillreach_ui_session": ui.token}, csrf=csrf_value(ui.token),
                         headers={"Sec-Fetch-Site": "cross-site"})
    assert cross.status_code == 403
    assert _git(repo, "rev-parse", "HEAD") == head  # nothing was written
    # the session link, then the form, as a person fills it
    browser.goto(f"{ui.url}/?token={ui.token}")
    assert "token" not in browser.js("location.href")  # dropped from the address once in the cookie
    browser.goto(ui.url + "/decisions")
    assert browser.js("document.querySelectorAll('form.accept').length") == 1
    browser.fill("form.accept input[name=name]", "Ana Example")
    reason = "delta owns container images now; beta narrowed on purpose"
    browser.fill("form.accept input[name=reason]", reason)
    _shot(browser, shots, "decisions")
    cli = tmp_path / "cli"  # what the command writes, from the same state, for comparison
    shutil.copytree(repo, cli, symlinks=True)
    done = subprocess.run([str(SKILLREACH), "baseline", "accept", "beta"], cwd=cli, capture_output=True,
                          text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    browser.submit("form.accept")
    assert browser.js("!!document.querySelector('#accepted')"), browser.js("document.body.innerText")
    assert "Accepted beta" in browser.js("document.querySelector('#accepted').innerText")
    # the commit `baseline accept` writes: on the service branch (where candidates wait), the same tree
    ref = "skillreach/baselines"
    assert _git(repo, "rev-parse", "HEAD") == head  # the working tree and its branch untouched
    assert _git(repo, "rev-parse", f"{ref}~1") == head  # one commit
    assert _git(repo, "rev-parse", f"{ref}^{{tree}}") == _git(cli, "rev-parse", f"{ref}^{{tree}}")
    subject = _git(repo, "log", "-1", "--format=%s", ref)
    assert subject == _git(cli, "log", "-1", "--format=%s", ref)
    assert subject.startswith("baseline accept beta: candidate beta@")
    body = _git(repo, "log", "-1", "--format=%b", ref)
    assert "accepted by a person after a gate breached during re-baselining" in body
    assert "accepted by: Ana Example (skillreach ui)" in body
    assert "reason: delta owns container images now; beta narrowed on purpose" in body
    changed = _git(repo, "show", "--name-status", "--format=", ref).splitlines()
    assert sorted(changed) == ["D\tbaselines/candidates/beta.json", "M\tbaselines/beta.json"]
    assert _git(repo, "show", f"{ref}:baselines/beta.json") + "\n" == candidate
    browser.goto(ui.url + "/")
    beta = browser.js("document.querySelector('#skills tr[data-skill=beta]').innerText")
    assert "candidate" not in beta  # decided
