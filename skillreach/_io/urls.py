"""URLs a user configures for us to call: webhooks, checked when they are read.

:func:`check_webhook` refuses, with one line that names the webhook by its place and shows no more of
it than scheme and host (its path is a token): a scheme other than http or https, no host, a port that
is not a number in 1–65535 (``http://h:99999/``), and the addresses a server-side request must never
reach — link-local (169.254.0.0/16, fe80::/10; the cloud metadata service lives at 169.254.169.254),
the metadata host names (``metadata.google.internal``, ``metadata``, …), Alibaba's 100.100.100.200 and
AWS's fd00:ec2::254.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

__all__ = ["METADATA_HOSTS", "check_webhook", "url_label"]

METADATA_HOSTS = frozenset(
    {"metadata.google.internal", "metadata.goog", "metadata", "instance-data", "instance-data.ec2.internal"}
)
_METADATA_IPS = frozenset({ipaddress.ip_address("100.100.100.200"), ipaddress.ip_address("fd00:ec2::254")})


def url_label(url: str) -> str:
    """``scheme://host/…`` of ``url`` (never its path, query or password); safe on any string."""
    try:
        parts = urlsplit(url.strip())
        host = parts.hostname or "?"
    except ValueError:
        return "(not a URL)"
    return f"{parts.scheme or '?'}://{host}/…"


def check_webhook(url: str) -> str | None:
    """What is wrong with ``url`` as a webhook (one phrase), or ``None`` when it may be posted to."""
    text = url.strip()
    try:
        parts = urlsplit(text)
    except ValueError as exc:
        return f"not a URL ({exc})"
    if parts.scheme.lower() not in ("http", "https"):
        return f"scheme {parts.scheme or '(none)'!r} is not http or https"
    try:
        host = parts.hostname
    except ValueError:
        host = None
    if not host:
        return "no host"
    try:
        port = parts.port
    except ValueError:
        raw = parts.netloc.rpartition("@")[2].rpartition(":")[2]
        return f"port {raw!r} is not a port (1-65535)"
    if port == 0:
        return "port 0 is not a port (1-65535)"
    name = host.lower().rstrip(".")
    if name in METADATA_HOSTS:
        return f"{name} is a cloud metadata service; webhooks may not point at it"
    try:
        ip = ipaddress.ip_address(name.split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.is_link_local or ip in _METADATA_IPS:
        return f"{ip} is a link-local or metadata address; webhooks may not point at it"
    return None
