"""Headless Chromium driven over the Chrome DevTools Protocol (one websocket, ``websockets``' sync client):
navigate, read the page with JavaScript, fill and submit forms, full-page screenshots.

Chosen over Playwright: the machine's ``/usr/bin/chromium`` is driven directly, with nothing to install
(``websockets`` already comes with Prefect) and no driver process between the test and the browser; what
the tests need is a dozen CDP calls.
"""

from __future__ import annotations

import base64
import json
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.helpers import hang

__all__ = ["CHROMIUM", "Browser", "chromium"]

CHROMIUM = next(
    (p for p in ("/usr/bin/chromium", *(shutil.which(n) for n in ("chromium", "chromium-browser"))) if p and
     Path(p).is_file()),
    None,
)
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--force-device-scale-factor=1")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Browser:
    """One page of a headless Chromium started for the test (:func:`chromium`)."""

    def __init__(self, proc: subprocess.Popen[bytes], port: int, profile: Path) -> None:
        import httpx
        from websockets.sync.client import connect

        self.proc, self.port, self.profile = proc, port, profile
        deadline = hang.Deadline(90)
        targets: list[dict[str, Any]] = []
        while not deadline.expired() and not targets:
            try:
                targets = [t for t in httpx.get(f"http://127.0.0.1:{port}/json/list", timeout=2).json()
                           if t.get("type") == "page"]
            except httpx.HTTPError:
                time.sleep(0.3)
        if not targets:
            raise RuntimeError("Chromium did not open its DevTools endpoint within 90 s")
        self.ws = connect(targets[0]["webSocketDebuggerUrl"], max_size=None, open_timeout=30)
        self.n = 0
        self.events: list[dict[str, Any]] = []
        self.call("Page.enable")
        self.call("Runtime.enable")

    def call(self, method: str, timeout: float = 90.0, **params: Any) -> dict[str, Any]:
        self.n += 1
        self.ws.send(json.dumps({"id": self.n, "method": method, "params": params}))
        deadline = time.monotonic() + timeout
        while True:
            msg = json.loads(self.ws.recv(timeout=max(0.1, deadline - time.monotonic())))
            if msg.get("id") == self.n:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return dict(msg.get("result", {}))
            if "method" in msg:
                self.events.append(msg)

    def js(self, expression: str) -> Any:
        res = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in res:
            raise RuntimeError(f"{expression[:80]}: {res['exceptionDetails']}")
        return res["result"].get("value")

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = hang.Deadline(timeout)
        while not deadline.expired():
            try:
                if self.js("document.readyState") == "complete":
                    return
            except RuntimeError:  # a navigation replaced the context mid-call
                pass
            time.sleep(0.05)
        raise TimeoutError("the page did not finish loading")

    def goto(self, url: str) -> None:
        self.call("Page.navigate", url=url)
        time.sleep(0.05)
        self.wait_ready()

    def submit(self, form_selector: str) -> None:
        """Submit a form as a person does (its submit button clicked), and wait for the next page."""
        before = self.js("performance.timeOrigin")
        self.js(f"document.querySelector({json.dumps(form_selector)}).requestSubmit()")
        deadline = hang.Deadline(60)
        while not deadline.expired():
            try:
                moved = self.js("performance.timeOrigin") != before
                if moved and self.js("document.readyState") == "complete":
                    return
            except RuntimeError:
                pass
            time.sleep(0.05)
        raise TimeoutError("the form's next page did not load")

    def fill(self, selector: str, value: str) -> None:
        self.js(f"document.querySelector({json.dumps(selector)}).value = {json.dumps(value)}")

    def screenshot(self, path: Path, width: int = 1360, max_height: int = 16000) -> Path:
        """The whole page (its full height, up to ``max_height``) as a PNG."""
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=900, deviceScaleFactor=1,
                  mobile=False)
        height = int(self.js("Math.ceil(document.documentElement.scrollHeight)") or 900)
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=min(height, max_height),
                  deviceScaleFactor=1, mobile=False)
        time.sleep(0.2)
        shot = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=height <= max_height)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(shot["data"]))
        return path

    def close(self) -> None:
        try:
            self.ws.close()
        finally:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(15)
            shutil.rmtree(self.profile, ignore_errors=True)


def chromium() -> Browser:
    """A fresh headless Chromium (its own profile folder) on a free debugging port."""
    if CHROMIUM is None:
        raise RuntimeError("no Chromium on this machine")
    port = _free_port()
    profile = Path(tempfile.mkdtemp(prefix="skillreach-chromium-"))
    proc = subprocess.Popen(
        [CHROMIUM, *FLAGS, f"--remote-debugging-port={port}", f"--user-data-dir={profile}", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    try:
        return Browser(proc, port, profile)
    except BaseException:
        proc.kill()
        proc.wait(15)
        shutil.rmtree(profile, ignore_errors=True)
        raise
