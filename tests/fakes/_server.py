"""What the HTTP stand-ins share: a threaded server on 127.0.0.1 used as a context manager, injected
faults, and a quiet handler that answers JSON."""

from __future__ import annotations

import contextlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

__all__ = ["JSONHandler", "LocalServer"]


class JSONHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are two writes: no delayed-ACK stall

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return

    def read_raw(self) -> bytes:
        return self.rfile.read(int(self.headers.get("content-length") or 0))

    def send_bytes(
        self, status: int, data: bytes, content_type: str, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client gave up
            self.wfile.write(data)

    def send_json(
        self,
        status: int,
        payload: dict[str, Any],
        headers: dict[str, str] | None = None,
        content_type: str = "application/json",
    ) -> None:
        self.send_bytes(status, json.dumps(payload).encode(), content_type, headers)


class LocalServer:
    """A stand-in server in a thread: ``with Sub(...) as api: api.base_url``. Subclasses give
    :meth:`handler` (the request handler class) and may set ``base_path`` (``/v1``)."""

    base_path = ""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self._faults: list[tuple[int, str | None]] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def handler(self) -> type[BaseHTTPRequestHandler]:
        raise NotImplementedError

    def fail(self, status: int, *, times: int = 1, retry_after: float | None = None) -> None:
        """The next ``times`` requests answer ``status`` (with ``retry-after`` when given)."""
        with self._lock:
            self._faults.extend([(status, None if retry_after is None else str(retry_after))] * times)

    def _next_fault(self) -> tuple[int, str | None] | None:
        with self._lock:
            return self._faults.pop(0) if self._faults else None

    @property
    def base_url(self) -> str:
        assert self._server is not None, "start the server first (use it as a context manager)"
        return f"http://127.0.0.1:{self._server.server_address[1]}{self.base_path}"

    def __enter__(self) -> Self:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self.handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
