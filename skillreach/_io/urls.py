"""URLs a user configures for us to call: webhooks, checked when they are read and again, on the
address itself, when they are called.

:func:`check_webhook` refuses, with one line that names the webhook by its place and shows no more of
it than scheme and host (its path is a token): a scheme other than http or https, no host, a port that
is not a number in 1–65535 (``http://h:99999/``), and the addresses a server-side request must never
reach — link-local (169.254.0.0/16, fe80::/10; the cloud metadata service lives at 169.254.169.254),
the metadata host names (``metadata.google.internal``, ``metadata``, …), Alibaba's 100.100.100.200 and
AWS's fd00:ec2::254 — however the address is spelt: every form the C resolver accepts for IPv4
(``2852039166``, ``0xa9fea9fe``, ``169.254.43518``, ``0251.0376.0251.0376``) and IPv4 carried in IPv6
(``::ffff:169.254.169.254``, ``::a9fe:a9fe``, NAT64 ``64:ff9b::…``, 6to4 ``2002:a9fe:a9fe::``).

A check of the string is not enough (a host name may resolve to such an address): :func:`resolve_checked`
resolves the host, checks every address it resolves to, and returns them — the caller connects to one
of those addresses, never resolves the name again.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from urllib.parse import urlsplit

__all__ = ["METADATA_HOSTS", "address_problem", "check_webhook", "literal_address", "resolve_checked",
           "url_label"]

METADATA_HOSTS = frozenset(
    {"metadata.google.internal", "metadata.goog", "metadata", "instance-data", "instance-data.ec2.internal"}
)
_METADATA_IPS = frozenset({ipaddress.ip_address("100.100.100.200"), ipaddress.ip_address("fd00:ec2::254")})
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_LEGACY_V4 = re.compile(r"[0-9]+|0x[0-9a-f]*|(?:(?:0x[0-9a-f]*|[0-9]+)\.){1,3}(?:0x[0-9a-f]*|[0-9]+)", re.I)
"""The shapes ``inet_aton`` reads as an IPv4 address: one to four parts, each decimal, octal or hex."""

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def url_label(url: str) -> str:
    """``scheme://host/…`` of ``url`` (never its path, query or password); safe on any string."""
    try:
        parts = urlsplit(url.strip())
        host = parts.hostname or "?"
    except ValueError:
        return "(not a URL)"
    return f"{parts.scheme or '?'}://{host}/…"


def literal_address(host: str) -> Address | None:
    """The address ``host`` spells, in any form a resolver would read as one, else ``None`` (a name)."""
    name = host.strip().lower().rstrip(".").strip("[]").split("%", 1)[0]
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        pass
    if _LEGACY_V4.fullmatch(name):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(name))
        except OSError:
            return None
    return None


def _embedded_v4(ip: Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one carries (mapped, compatible, NAT64, 6to4), if any."""
    if not isinstance(ip, ipaddress.IPv6Address):
        return None
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in _NAT64 or (int(ip) >> 32 == 0 and int(ip) > 1):  # NAT64, or IPv4-compatible (::a.b.c.d)
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def address_problem(ip: Address, spelt: str | None = None) -> str | None:
    """Why a request may not go to ``ip`` (link-local or a metadata service, itself or the IPv4 address
    it carries), else ``None``; ``spelt``: the host as the URL wrote it, named when it differs."""
    for candidate in (ip, _embedded_v4(ip)):
        if candidate is not None and (candidate.is_link_local or candidate in _METADATA_IPS):
            shown = str(ip) if spelt in (None, str(ip)) else f"{spelt} ({ip})"
            return f"{shown} is a link-local or metadata address; webhooks may not point at it"
    return None


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
    ip = literal_address(name)
    return address_problem(ip, name) if ip is not None else None


def resolve_checked(url: str) -> tuple[list[str], str]:
    """``(addresses, problem)`` for ``url``: the addresses the client may connect to, in the resolver's
    order, every one it gives checked; ``problem`` is ``""`` when the request may go, else why not (then
    ``addresses`` is empty). A name that does not resolve raises the resolver's ``OSError`` (it may
    resolve later: a reason to try again, not a refusal). Blocking (the system resolver): call it under
    the exchange's deadline."""
    problem = check_webhook(url)
    if problem is not None:
        return [], problem
    parts = urlsplit(url.strip())
    host = str(parts.hostname)
    port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except UnicodeError as exc:
        return [], f"{host} is not a host name ({type(exc).__name__})"
    found: list[Address] = []
    for info in infos:
        ip = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        why = address_problem(ip, host)
        if why is not None:
            return [], why
        if ip not in found:
            found.append(ip)
    if not found:
        raise OSError(f"{host} resolves to no address")
    return [str(ip) for ip in found], ""
