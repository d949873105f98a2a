"""A real HTTP server on 127.0.0.1 standing in for alert webhooks."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["WebhookSink"]


class WebhookSink:
    """A real HTTP server on 127.0.0.1 that records every POST (path, JSON body, ``Host`` header);
    ``port`` fixes its port (a receiver that comes back where it was)."""

    def __init__(self, status: int = 200, port: int = 0) -> None:
        self.requests: list[dict[str, Any]] = []
        self.status = status
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                n = int(self.headers.get("content-length", 0))
                raw = self.rfile.read(n)
                try:
                    body: Any = json.loads(raw)
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                sink.requests.append({"path": self.path, "body": body, "host": self.headers.get("host")})
                self.send_response(sink.status)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> WebhookSink:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
