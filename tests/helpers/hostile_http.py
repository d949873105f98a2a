"""A real HTTP server on 127.0.0.1 that answers as a hostile ``PREFECT_API_URL`` would: one way of
misbehaving per server, for every path and method.

- ``big``: 200 and a 50 MB body (a JSON string, so a reader that takes it whole gets valid JSON);
- ``wrong-shape``: 200 and JSON of the wrong shape (an object where Prefect answers a list, and back);
- ``health-only``: ``/health`` answers ``true`` as Prefect does, every other path JSON of the wrong shape;
- ``drip``: 200, then one byte a second for ever;
- ``silent``: accepts the connection and never says a word;
- ``not-http``: answers with bytes that are not HTTP at all.

Each request is counted (``hits``), so a test can tell that a command asked and then gave up.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from typing import Any

__all__ = ["MODES", "HostileServer"]

MODES = ("big", "wrong-shape", "health-only", "drip", "silent", "not-http")
BIG = 50 * 10**6


def _read_request(conn: socket.socket) -> bytes:
    conn.settimeout(5)
    data = b""
    try:
        while b"\r\n\r\n" not in data and len(data) < 65536:
            chunk = conn.recv(4096)
            if not chunk:
                break
            data += chunk
    except OSError:
        pass
    head, _, rest = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip() or 0)
    try:
        while len(rest) < length:
            chunk = conn.recv(65536)
            if not chunk:
                break
            rest += chunk
    except OSError:
        pass
    return head


def _send(conn: socket.socket, status: str, body: bytes, *, ctype: str = "application/json") -> None:
    conn.sendall(
        f"HTTP/1.1 {status}\r\ncontent-type: {ctype}\r\ncontent-length: {len(body)}\r\n"
        "connection: close\r\n\r\n".encode()
        + body
    )


class HostileServer:
    """``with HostileServer("big") as s: s.url`` — the API URL (``http://127.0.0.1:PORT/api``)."""

    def __init__(self, mode: str) -> None:
        if mode not in MODES:
            raise ValueError(mode)
        self.mode = mode
        self.hits: list[str] = []
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self._sock.settimeout(0.2)
        self._stop = threading.Event()
        self._held: list[socket.socket] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._sock.getsockname()[1]}/api"

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        self._held.append(conn)
        if self.mode == "silent":
            return  # held open, never answered
        head = _read_request(conn)
        line = head.split(b"\r\n", 1)[0].decode("latin-1")
        self.hits.append(line)
        path = line.split(" ")[1] if " " in line else ""
        try:
            if self.mode == "big":
                _send(conn, "200 OK", b'"' + b"x" * (BIG - 2) + b'"')
            elif self.mode == "wrong-shape":
                _send(conn, "200 OK", b'{"unexpected": [1, 2, 3], "state": 7}')
            elif self.mode == "health-only":
                if path.rstrip("/").endswith("/health"):
                    _send(conn, "200 OK", b"true")
                else:
                    _send(conn, "200 OK", b'[{"id": 5, "name": null, "state": "nope"}]')
            elif self.mode == "drip":
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100000\r\n\r\n"
                )
                while not self._stop.is_set():
                    conn.sendall(b" ")
                    time.sleep(1)
            elif self.mode == "not-http":
                conn.sendall(b"\x00\xff\x1b[2Jhello, I am not HTTP\r\n\r\n" * 10)
        except OSError:
            pass
        finally:
            if self.mode != "drip":
                conn.close()

    def __enter__(self) -> HostileServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(5)
        for conn in self._held:
            with contextlib.suppress(OSError):
                conn.close()
        self._sock.close()
