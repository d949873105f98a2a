"""Hostile input on the alert side (issue 40): a webhook that drips its answer, addresses spelt to slip
past the check (and a name that resolves to the metadata service), chat markup in skill names, an empty
mute key, terminal control characters in ``alerts list``. Each: one clear line and exit code where a
command is at fault, no traceback, no hang, nothing sent where it may not go."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from skillreach.cli import main
from skillreach.service.alerts import breach_payload, send_alert, slack_message
from tests.helpers import hang
from tests.helpers.webhooks import WebhookSink

SKILLREACH = str(Path(sys.executable).with_name("skillreach"))
SPELLINGS = [
    "http://2852039166/T0/HOOKSECRET",
    "http://0xa9fea9fe/T0/HOOKSECRET",
    "http://0xA9FEA9FE/T0/HOOKSECRET",
    "http://169.254.43518/T0/HOOKSECRET",
    "http://169.16689662/T0/HOOKSECRET",
    "http://0251.0376.0251.0376/T0/HOOKSECRET",
    "http://0xa9.0xfe.0xa9.0xfe/T0/HOOKSECRET",
    "http://169.254.169.254./T0/HOOKSECRET",
    "http://[::ffff:169.254.169.254]/T0/HOOKSECRET",
    "http://[::ffff:a9fe:a9fe]/T0/HOOKSECRET",
    "http://[::a9fe:a9fe]/T0/HOOKSECRET",
    "http://[64:ff9b::a9fe:a9fe]/T0/HOOKSECRET",
    "http://[2002:a9fe:a9fe::]/T0/HOOKSECRET",
    "https://[fe80::1%25eth0]:8443/T0/HOOKSECRET",
    "http://100.100.100.200/T0/HOOKSECRET",
]


def _payload(skill: str = "pdf", **extra: Any) -> dict[str, Any]:
    return {**breach_payload(skill=skill, metric="activation", delta=-0.5, interval=(-0.7, -0.3),
                             baseline_id=f"{skill}@1", run_link="file:///r/report.html", gate=-0.05), **extra}


@contextlib.contextmanager
def dripping(*, head_first: bool) -> Iterator[str]:
    """A webhook that answers a byte every 0.2 s for two minutes: its status line and headers
    (``head_first=False``), or its headers at once and then a body that never ends."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def answer(conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            conn.recv(65536)
            head = b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n"
            drip = b"x" * 600 if head_first else head
            if head_first:
                conn.sendall(head)
            for byte in drip:
                if stop.wait(0.2):
                    return
                conn.sendall(bytes([byte]))

    def serve() -> None:
        with contextlib.suppress(OSError):
            while not stop.is_set():
                conn, _ = server.accept()
                threading.Thread(target=answer, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}/hook/HOOKSECRET"
    finally:
        stop.set()
        server.close()


# ------------------------------------------------------------------------------------------- hangs


def test_a_webhook_that_drips_its_answer_does_not_hang_delivery() -> None:
    with dripping(head_first=False) as slow, WebhookSink() as fine:
        start = time.monotonic()
        out = send_alert(_payload(), [slow, f"{fine.base_url}/hook/OK"], timeout_s=2)
        took = time.monotonic() - start
    assert took < 12, f"{took:.1f} s: the deadline is for the whole exchange, not per read"
    assert [d.ok for d in out] == [False, True]
    assert out[0].error == "no complete answer within 2 s"
    assert out[0].retry
    assert len(fine.requests) == 1  # the other webhook is not held up


def test_an_answer_whose_body_drips_is_taken_by_its_status() -> None:
    with dripping(head_first=True) as slow:
        start = time.monotonic()
        [got] = send_alert(_payload(), [slow], timeout_s=5)
    assert got.ok
    assert got.status == 200
    assert time.monotonic() - start < 5


def test_a_study_whose_webhook_drips_ends_with_the_alert_pending(
    world: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from skillreach.flows.service import rebaseline_all
    from skillreach.flows.study import study
    from tests.helpers.world import cfg, run

    run(rebaseline_all, cfg(world, "base"))
    monkeypatch.setenv("SKILLREACH_HOME", str(world["home"]))
    monkeypatch.setenv("SKILLREACH_ALERT_DELIVERY", json.dumps({"timeout_s": 2}))
    with dripping(head_first=False) as slow:
        monkeypatch.setenv("SKILLREACH_ALERT_WEBHOOKS", json.dumps([slow]))
        start = time.monotonic()
        result = run(study, cfg(world, "n1", runtime_script="bad"))
        took = time.monotonic() - start
    assert len(result.breaches) == 1
    assert took < 60, took
    capsys.readouterr()
    assert main(["alerts", "list"]) == 0
    listed = capsys.readouterr().out
    assert "gate.breached:alpha:activation  pending (try 2 at " in listed
    assert ": no complete answer within 2 s from http://127.0.0.1:" in listed


# ------------------------------------------------------------------------------------ the address


@pytest.mark.parametrize("url", SPELLINGS)
def test_every_spelling_of_the_metadata_address_is_refused_in_one_line(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SKILLREACH_ALERT_WEBHOOKS", json.dumps([url]))
    capsys.readouterr()
    assert main(["alerts", "list"]) == 2
    out = capsys.readouterr()
    lines = out.err.strip().splitlines()
    assert len(lines) == 1, out.err
    assert "SKILLREACH_ALERT_WEBHOOKS" in lines[0]
    assert "link-local or metadata address" in lines[0]
    assert "HOOKSECRET" not in out.err + out.out
    assert "Traceback" not in out.err
    # and at the moment of sending, whatever the settings said
    [refused] = send_alert(_payload(), [url], timeout_s=5)
    assert not refused.ok
    assert not refused.retry
    assert str(refused.error).startswith("refused: ")


def test_one_spelling_through_the_installed_command(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
           "SKILLREACH_ALERT_WEBHOOKS": json.dumps(["http://169.254.43518/T0/HOOKSECRET"])}
    done = hang.finish([SKILLREACH, "alerts", "list"], limit_s=120, cwd=tmp_path, env=env)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert "Traceback" not in done.stderr
    assert "169.254.43518 (169.254.169.254) is a link-local or metadata address" in done.stderr
    assert "HOOKSECRET" not in done.stderr


HOSTS_PROBE = """
import json, sys
from skillreach.service.alerts import send_alert
urls = json.loads(sys.argv[1])
out = send_alert({"event": "skillreach.gate.breached", "skill": "pdf", "metric": "activation",
                  "delta": -0.5, "interval": [-0.7, -0.3], "baseline_id": "b", "run_link": "L"}, urls,
                 timeout_s=5)
print(json.dumps([[d.ok, d.error] for d in out]))
"""


def test_the_address_a_name_resolves_to_is_checked_and_is_the_one_connected_to(tmp_path: Path) -> None:
    """In a mount namespace of its own, ``/etc/hosts`` maps names to the metadata address, to it and
    loopback, and to loopback alone: the first two are refused whatever the settings' check said of the
    name, the third is posted to the resolved address with the name in its ``Host`` header."""
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("unshare is not installed: no private /etc/hosts")
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 localhost\n169.254.169.254 metadata-alias.example\n"
                     "127.0.0.1 two-faced.example\n169.254.169.254 two-faced.example\n"
                     "127.0.0.1 hooks.team.example\n")
    with WebhookSink() as sink:
        port = sink.base_url.rsplit(":", 1)[1]
        urls = [f"http://metadata-alias.example:{port}/hook/HOOKSECRET",
                f"http://two-faced.example:{port}/hook/HOOKSECRET", f"http://hooks.team.example:{port}/hook/OK"]
        script = (f"mount --bind {hosts} /etc/hosts && "
                  f"exec {sys.executable} -c '{HOSTS_PROBE}' '{json.dumps(urls)}'")
        done = hang.finish([unshare, "-rm", "sh", "-c", script], limit_s=120)
        if done.returncode != 0 and "mount" in done.stderr + done.stdout and not done.stdout.strip():
            pytest.skip(f"no private mount namespace here: {done.stderr.strip()[-200:]}")
        assert done.returncode == 0, done.stderr[-2000:]
        got = json.loads(done.stdout.strip().splitlines()[-1])
        assert got[0] == [False, "refused: metadata-alias.example (169.254.169.254) is a link-local or "
                                 "metadata address; webhooks may not point at it"]
        assert got[1][0] is False
        assert "two-faced.example (169.254.169.254)" in got[1][1]
        assert got[2] == [True, None]
        assert [(r["path"], r["host"]) for r in sink.requests] == [("/hook/OK", f"hooks.team.example:{port}")]


# ------------------------------------------------------------------------------------------ chat


def test_chat_markup_in_names_and_texts_reaches_slack_as_text() -> None:
    hostile = _payload("<!channel>", cause="<@U123>", cause_detail="lost 4 of 4 cases to <@U123> & <!here>",
                       next_step="open <https://evil.example|the fix> > now")
    with WebhookSink() as sink:
        [got] = send_alert(hostile, [f"{sink.base_url}/hook"], timeout_s=5)
    assert got.ok
    body = json.dumps(sink.requests[0]["body"])
    for raw in ("<!channel>", "<@U123>", "<!here>", "<https://evil.example|the fix>", "> now"):
        assert raw not in body, raw
    text = sink.requests[0]["body"]["text"]
    assert text.startswith("skillreach gate breach: &lt;!channel&gt; activation changed -0.500")
    assert "lost 4 of 4 cases to &lt;@U123&gt; &amp; &lt;!here&gt;" in text
    assert "next: open &lt;https://evil.example|the fix&gt; &gt; now" in text
    notice = slack_message({"event": "skillreach.live.verdict", "skill": "<!everyone>",
                            "metric": "live_share", "message": "taken by <@U1>", "run_link": "L"})
    assert "<!everyone>" not in json.dumps(notice)
    assert "&lt;@U1&gt;" in notice["text"]


# ---------------------------------------------------------------------------------------- mutes


@pytest.mark.parametrize("key", ["", "   ", "\t"])
def test_an_empty_mute_key_is_refused_in_one_line(key: str, tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    done = hang.finish(
        [SKILLREACH, "alerts", "mute", key, "--for", "7d"],
        limit_s=120,
        cwd=tmp_path,
        env=env,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("skillreach: error: alerts mute: the key is empty; give an alert key")
    assert done.stderr.count("\n") == 1
    assert "Traceback" not in done.stderr
    listed = hang.finish([SKILLREACH, "alerts", "list"], limit_s=120, cwd=tmp_path, env=env)
    assert "muted" not in listed.stdout  # nothing muted


def test_an_empty_mute_left_in_a_store_mutes_nothing(
    world: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from datetime import UTC, datetime, timedelta

    from skillreach.store import AlertMuteRow, Store
    from skillreach.study import StudyConfig
    from skillreach.tasks.alerts import deliver_alerts
    from tests.helpers.world import run

    world["home"].mkdir(parents=True, exist_ok=True)
    with Store(f"sqlite:///{world['home'] / 'skillreach.db'}") as store, store.writing() as s:
        s.add(AlertMuteRow(key="", until=datetime.now(UTC) + timedelta(days=7)))  # an older version's
    with WebhookSink() as sink:
        config = StudyConfig.build(None, home=world["home"], alert_webhooks=[f"{sink.base_url}/hook"])
        assert run(deliver_alerts, config, None, [_payload()]) == ["delivered"]
    assert len(sink.requests) == 1


# -------------------------------------------------------------------------------------- terminal


def test_alerts_list_shows_no_terminal_control_characters(tmp_path: Path) -> None:
    from skillreach.store import Store, alert_key

    home = tmp_path / ".skillreach"
    home.mkdir()
    nasty = "pdf\x1b[2J\x1b]0;owned\x07\x00\u202egnp.exe\u2066\x9b\u061c"
    with Store(f"sqlite:///{home / 'skillreach.db'}") as store:
        payload = _payload(nasty)
        store.add_alert(payload, key=alert_key(payload), delivery="repeat")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    done = subprocess.run([SKILLREACH, "alerts", "list"], cwd=tmp_path, env=env, capture_output=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    for raw in (b"\x1b", b"\x07", b"\x00", *(c.encode() for c in "\u202e\u2066\x9b\u061c")):
        assert raw not in done.stdout, raw
    assert b"gate.breached:pdf[2J]0;owned" in done.stdout  # shown, defanged


def test_a_post_never_raises_on_a_broken_url() -> None:
    out = asyncio.run(_post_all(["http://[::1", "http://h:99999/x", "ftp://x/y", ""]))
    assert [d.ok for d in out] == [False] * 4
    assert all(d.error for d in out)


async def _post_all(urls: list[str]) -> list[Any]:
    from skillreach.service.delivery import post_many

    return await post_many([(u, {"text": "x"}) for u in urls], timeout_s=3)


def test_a_name_that_does_not_resolve_is_tried_again_not_refused() -> None:
    [got] = send_alert(_payload(), ["http://no-such-host.invalid/hook/HOOKSECRET"], timeout_s=5)
    assert not got.ok
    assert got.retry  # the name may resolve later
    assert got.error == "gaierror"
