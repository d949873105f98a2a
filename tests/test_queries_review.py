"""``queries review`` (the page of generated drafts) and ``queries seal --review`` (its decisions applied):
through the installed command, and the page's buttons clicked in headless Chromium when it is there."""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import EXAMPLE
from tests.helpers import hang

SKILLREACH = Path(sys.executable).with_name("skillreach")
CHROMIUM = next(
    (p for p in (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")) if p), None
)


def _sr(*args: str, cwd: Path, check: bool = True) -> hang.Outcome:
    out = hang.finish([str(SKILLREACH), *args], limit_s=300, cwd=cwd)
    if check:
        assert out.returncode == 0, out.stderr
    return out


@pytest.fixture
def drafts(tmp_path: Path) -> Path:
    """A generated-looking set: five of the example's queries with cited body lines, a near duplicate and
    a leak in the generation report."""
    src = json.loads((EXAMPLE / "queries.json").read_text(encoding="utf-8"))
    by_id = {q["id"]: q for q in src["queries"]}
    picked = [dict(by_id[i]) for i in ("deploy-01", "deploy-02", "deploy-03", "rollback-01", "oos-01")]
    for q in picked:
        skill = q["expected_skill"]
        q["notes"] = f'generated for {skill}; cites {skill}: "run make preflight first"'
    twin = dict(picked[0], id="deploy-01b", text=picked[0]["text"] + " Please.")
    queries = [*picked, twin]
    path = tmp_path / "drafts.yaml"
    path.write_text(json.dumps({"catalog_id": "example", "queries": queries}), encoding="utf-8")
    sealed = tmp_path / "drafts.json"
    _sr("queries", "seal", str(path), "--origin", "generated", "--out", str(sealed), cwd=tmp_path)
    report = {"leaks": [{"query_id": "deploy-02", "kind": "implicit", "skill": "release-deploy",
                         "reasons": ["names release"], "text": "…"}]}
    (tmp_path / "drafts.json.report.json").write_text(json.dumps(report), encoding="utf-8")
    return sealed


def _payload(page: Path) -> dict[str, Any]:
    html = page.read_text(encoding="utf-8")
    m = re.search(r'<script type="application/json" id="drafts">(.*?)</script>', html, flags=re.DOTALL)
    assert m
    return json.loads(m.group(1))


def test_review_page_lists_drafts_with_their_flags(drafts: Path, tmp_path: Path) -> None:
    out = _sr("queries", "review", str(drafts), "--out", "review.html", cwd=tmp_path).stdout
    assert "review page of 6 drafts (3 flagged)" in out
    data = _payload(tmp_path / "review.html")
    rows = {r["id"]: r for r in data["rows"]}
    assert set(rows) == {"deploy-01", "deploy-01b", "deploy-02", "deploy-03", "rollback-01", "oos-01"}
    assert rows["deploy-02"]["leak"] == ["names release"]
    assert rows["deploy-01"]["near_duplicates"] == ["deploy-01b"]
    assert rows["deploy-01b"]["near_duplicates"] == ["deploy-01"]
    assert rows["deploy-03"]["cited"] == "run make preflight first"
    assert rows["oos-01"]["expected_skill"] is None
    assert data["digest"] == json.loads(drafts.read_text(encoding="utf-8"))["provenance"]["digest"]
    assert "release-deploy" in data["skills"]
    html = (tmp_path / "review.html").read_text(encoding="utf-8")
    assert "<script src" not in html
    assert "<link" not in html  # self-contained


def _decisions(drafts: Path, decisions: dict[str, Any], **extra: Any) -> dict[str, Any]:
    digest = json.loads(drafts.read_text(encoding="utf-8"))["provenance"]["digest"]
    return {"kind": "skillreach.review", "drafts_digest": digest, "reviewer": "ana", "decisions": decisions,
            **extra}


def _check_sealed(tmp_path: Path, sealed: Path) -> None:
    data = json.loads(sealed.read_text(encoding="utf-8"))
    by_id = {q["id"]: q for q in data["queries"]}
    assert set(by_id) == {"deploy-01", "deploy-02", "deploy-03", "rollback-01", "oos-01"}
    assert by_id["deploy-03"]["expected_skill"] == "release-rollback"
    review = data["provenance"]["review"]
    assert review["accepted"] == 4
    assert review["rejected"] == 1
    assert review["relabelled"] == 1
    assert review["decisions_digest"].startswith("sha256:")
    assert data["provenance"]["origin"] == "generated"
    _sr("queries", "verify", str(sealed), cwd=tmp_path)


def test_seal_applies_the_review_and_records_it(drafts: Path, tmp_path: Path) -> None:
    decisions = {
        "deploy-01": {"decision": "accept"}, "deploy-01b": {"decision": "reject"},
        "deploy-02": {"decision": "accept"}, "oos-01": {"decision": "accept"},
        "rollback-01": {"decision": "accept"},
        "deploy-03": {"decision": "relabel", "expected_skill": "release-rollback"},
    }
    path = tmp_path / "decisions.json"
    path.write_text(json.dumps(_decisions(drafts, decisions)), encoding="utf-8")
    out = _sr("queries", "seal", str(drafts), "--review", str(path), "--out", "set.json",
              "--skills", str(EXAMPLE / "skills"), cwd=tmp_path, check=False)
    assert out.returncode == 0, out.stderr
    assert "review applied: 4 accepted, 1 rejected, 1 relabelled" in out.stdout
    _check_sealed(tmp_path, tmp_path / "set.json")


def test_seal_review_refusals(drafts: Path, tmp_path: Path) -> None:
    path = tmp_path / "decisions.json"
    cases = [
        (_decisions(drafts, {"deploy-01": {"decision": "accept"}}), "draft 'deploy-02' has no decision"),
        (_decisions(drafts, {"nope": {"decision": "accept"}}), "decision for 'nope', which is not one of"),
        ({**_decisions(drafts, {}), "drafts_digest": "sha256:" + "0" * 64}, "review this set again"),
        ({"decisions": {}}, "not a skillreach review decisions file"),
    ]
    for doc, message in cases:
        path.write_text(json.dumps(doc), encoding="utf-8")
        out = _sr("queries", "seal", str(drafts), "--review", str(path), "--out", "x.json", cwd=tmp_path,
                  check=False)
        assert out.returncode == 2, out.stderr
        assert message in out.stderr
        assert len(out.stderr.splitlines()) == 1
        assert not (tmp_path / "x.json").exists()


# -- the page's buttons, in headless Chromium --------------------------------------------------------


class _Cdp:
    """A minimal Chrome DevTools Protocol client over one websocket (stdlib + websockets)."""

    def __init__(self, url: str) -> None:
        from websockets.sync.client import connect

        self.ws = connect(url, max_size=None)
        self.n = 0

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.n += 1
        self.ws.send(json.dumps({"id": self.n, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv(timeout=60))
            if msg.get("id") == self.n:
                assert "error" not in msg, msg
                return msg.get("result", {})

    def js(self, expression: str) -> Any:
        res = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        assert "exceptionDetails" not in res, res
        return res["result"].get("value")


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine (apt-get install chromium)")
def test_the_pages_buttons_produce_the_decisions_file(drafts: Path, tmp_path: Path) -> None:
    import httpx

    _sr("queries", "review", str(drafts), "--out", "review.html", cwd=tmp_path)
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [str(CHROMIUM), "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
         f"--remote-debugging-port={port}", f"--user-data-dir={tmp_path / 'profile'}", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    try:
        targets: list[dict[str, Any]] = []
        deadline = hang.Deadline(60)
        while not deadline.expired() and not targets:
            try:
                targets = [t for t in httpx.get(f"http://127.0.0.1:{port}/json/list", timeout=2).json()
                           if t.get("type") == "page"]
            except httpx.HTTPError:
                time.sleep(0.3)
        assert targets, "Chromium did not start its DevTools endpoint"
        version = httpx.get(f"http://127.0.0.1:{port}/json/version", timeout=5).json()
        browser = _Cdp(version["webSocketDebuggerUrl"])
        browser.call("Browser.setDownloadBehavior", behavior="allow", downloadPath=str(downloads))
        page = _Cdp(targets[0]["webSocketDebuggerUrl"])
        page.call("Page.enable")
        page.call("Page.navigate", url=(tmp_path / "review.html").resolve().as_uri())
        for _ in range(100):
            rows = page.js("document.querySelectorAll('tbody tr').length")
            if page.js("document.readyState") == "complete" and rows:
                break
            time.sleep(0.1)
        assert page.js("document.querySelectorAll('tbody tr').length") == 6
        assert page.js("document.getElementById('download').disabled") is True
        click = "document.querySelector('button[data-id=\"{}\"][data-decision=\"{}\"]').click()"
        for qid in ("deploy-01", "deploy-02", "rollback-01", "oos-01"):
            page.js(click.format(qid, "accept"))
        page.js(click.format("deploy-01b", "reject"))
        page.js("(() => { const s = document.querySelector('select[data-id=\"deploy-03\"]');"
                " s.value = 'release-rollback'; s.dispatchEvent(new Event('change')); })()")
        page.js("document.getElementById('reviewer').value = 'ana'")
        assert page.js("document.getElementById('progress').textContent") == "6 of 6 decided"
        assert page.js("document.getElementById('download').disabled") is False
        page.js("document.getElementById('download').click()")
        target = downloads / "decisions.json"
        for _ in range(100):
            if target.is_file() and target.stat().st_size:
                break
            time.sleep(0.1)
        assert target.is_file(), "the page's download button wrote no decisions.json"
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
    doc = json.loads(target.read_text(encoding="utf-8"))
    assert doc["reviewer"] == "ana"
    assert doc["decisions"]["deploy-03"] == {"decision": "relabel", "expected_skill": "release-rollback"}
    out = _sr("queries", "seal", str(drafts), "--review", str(target), "--out", "set.json",
              "--skills", str(EXAMPLE / "skills"), cwd=tmp_path)
    assert "review applied: 4 accepted, 1 rejected, 1 relabelled" in out.stdout
    _check_sealed(tmp_path, tmp_path / "set.json")
