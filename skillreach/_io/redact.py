"""The one redaction pass: what every error line, log line, stored probe error and ``doctor`` output goes
through before it leaves the process.

It masks, wherever they appear in a text:

- the password of a URL (``http://user:SECRET@host`` → ``http://user:***@host``);
- the value of a query parameter that carries a credential (``?token=``, ``key=``, ``api_key=``,
  ``access_token=``, ``sig=``, ``signature=``, ``password=``, ``secret=``, ``X-Amz-Signature=``,
  ``k=``, ``code=`` …);
- an ``Authorization: Bearer …`` / ``x-api-key: …`` value;
- provider keys by their shape (``sk-ant-…``, ``sk-…``, ``sk-proj-…``), keeping the prefix;
- the values of the configured keys wherever they appear: the providers' variables in the environment
  (:data:`SECRET_ENV`, and any ``*_API_KEY`` / ``*_TOKEN`` / ``*_SECRET`` / ``*_PASSWORD`` variable) and
  what :func:`register_secret` was given (the settings' secret fields: the database URL, the webhooks);
- the path of a webhook URL (a Slack or Discord hook's path is its token).

:func:`redact_stored` is for text of users' own that is *kept* (prompts stored by ``skillreach ingest
--keep-prompts``): the above, then every secret the maintained detectors of `detect-secrets
<https://github.com/Yelp/detect-secrets>`_ find — AWS access keys and secret keys, GitHub, GitLab,
Slack, Stripe, OpenAI, npm, PyPI, SendGrid, Twilio, Mailchimp, Discord and Telegram tokens, JSON Web
Tokens, Azure storage, IBM, Artifactory, Cloudant, SoftLayer and Square credentials, a URL's basic-auth
password, a value assigned to a secret-looking key (``password = …``, ``api_key: …``) — and a PEM or
PuTTY private key masked whole, from its first line to its last. (Its entropy detectors are not used:
they would mask every commit hash; nor its public-IP one: an address is no secret.) The detectors load
on first use (half a second), so the commands that store no user text never pay for them.

:func:`redact` does the same to every string of a structure and blanks the values of secret-looking
keys. :class:`RedactingFilter` is a :mod:`logging` filter for handlers (message and traceback);
:func:`install_redaction` redacts every log record of the process as it is made (Prefect's loggers and
handlers included) and every uncaught traceback (the CLI and the flow runs install it).
"""

from __future__ import annotations

import functools
import logging
import os
import re
from typing import Any

__all__ = [
    "MASK",
    "SECRET_ENV",
    "RedactingFilter",
    "install_redaction",
    "redact",
    "redact_stored",
    "redact_text",
    "register_secret",
    "register_url_password",
    "secret_values",
]

MASK = "***"

SECRET_ENV = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "OPENAI_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AZURE_OPENAI_API_KEY",
    "OPENROUTER_API_KEY",
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "PREFECT_API_KEY",
)
"""Variables whose values are secrets wherever they appear (beside any ``*_API_KEY``, ``*_TOKEN``, …).
Of any other variable holding a URL (``ANTHROPIC_BASE_URL``, ``HTTPS_PROXY``,
``SKILLREACH_DATABASE_URL``) the password is a secret, not the rest: an error may name the URL."""

_SECRET_NAME = re.compile(r"(?:API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)$", re.I)
_SECRET_KEY = re.compile(r"(key|token|secret|password|passwd|auth|credential|cookie|signature)", re.I)
_MIN_SECRET = 8
"""Shorter values are not searched for (``"abc"`` would mask every ``abc`` of a text)."""
_MIN_PASSWORD = 12
"""A URL's password is searched for alone from this length (a shorter one, ``postgres`` say, would mask
every ``postgresql://`` of a text); in a URL it is masked whatever its length."""

_URL_PASSWORD = re.compile(r"(?P<pre>[a-z][a-z0-9+.\-]*://[^:/@\s]*):(?P<pw>[^@/\s]+)@", re.I)
_QUERY_TOKEN = re.compile(
    r"(?P<pre>[?&;](?:[\w.\-]*?(?:token|key|secret|password|passwd|pwd|auth|sig|signature|"
    r"credential|session)[\w.\-]*|code|k|pw|pwd)=)(?P<value>[^&#\s'\"<>]+)",
    re.I,
)
_HEADER = re.compile(
    r"(?P<pre>\b(?:authorization|x-api-key|api-key|x-goog-api-key)\b[\"']?\s*[:=]\s*[\"']?(?:bearer\s+|basic\s+)?)"
    r"(?P<value>[^\s\"',;]{4,})",
    re.I,
)
_PROVIDER_KEY = re.compile(
    r"\b(?P<pre>sk-(?:ant-(?:api\d+-|admin\d+-)?|proj-)?)(?P<value>[A-Za-z0-9_\-]{12,})"
)
_WEBHOOK_PATH = re.compile(r"(?P<pre>https?://[^/\s]+)/[^\s'\"<>]+", re.I)
"""A URL's path, masked in a text that names a webhook (``hooks.``, ``/webhook``, ``/services/``)."""

_registered: set[str] = set()


def register_secret(*values: str | None) -> None:
    """Mask these values (and a URL's password among them) wherever they appear."""
    for value in values:
        if value and len(value) >= _MIN_SECRET:
            _registered.add(value)
        _passwords(value, _registered)


def register_url_password(*urls: str | None) -> None:
    """Mask the password of these URLs wherever it appears (the URL itself may be named)."""
    for url in urls:
        _passwords(url, _registered)


def _passwords(value: str | None, into: set[str]) -> None:
    if value and "://" in value:
        for m in _URL_PASSWORD.finditer(value):
            if len(m["pw"]) >= _MIN_PASSWORD:
                into.add(m["pw"])


def secret_values() -> list[str]:
    """The values masked wherever they appear, as :func:`redact_text` reads them now (the registered
    ones and the environment's), the longest first; pass them to :func:`redact_text` to redact many
    texts at once (a page of thousands) without reading the environment for each."""
    return _secret_values()


def _secret_values() -> list[str]:
    values = set(_registered)
    for name, value in os.environ.items():
        if not value:
            continue
        if (name in SECRET_ENV and len(value) >= _MIN_SECRET) or (
            len(value) >= _MIN_PASSWORD and _SECRET_NAME.search(name)  # PGPASSWORD=postgres: not alone
        ):
            values.add(value)
        _passwords(value, values)
    return sorted(values, key=len, reverse=True)  # the longest first: a value holding another


def redact_text(text: str, values: list[str] | None = None) -> str:
    """``text`` with every secret the module doc lists masked (``values``: :func:`secret_values`, read
    once for many texts)."""
    if not text:
        return text
    for value in _secret_values() if values is None else values:
        if value in text:
            text = text.replace(value, MASK)
    if "://" in text:
        text = _URL_PASSWORD.sub(lambda m: f"{m['pre']}:{MASK}@", text)
        if "hooks." in text or "/webhook" in text or "/services/" in text:
            text = _WEBHOOK_PATH.sub(lambda m: f"{m['pre']}/{MASK}", text)
    if "=" in text:
        text = _QUERY_TOKEN.sub(lambda m: f"{m['pre']}{MASK}", text)
    text = _HEADER.sub(lambda m: f"{m['pre']}{MASK}", text)
    if "sk-" in text:
        text = _PROVIDER_KEY.sub(lambda m: f"{m['pre']}{MASK}", text)
    return text


_UNUSED_DETECTORS = frozenset({"Base64HighEntropyString", "HexHighEntropyString", "IPPublicDetector"})
"""detect-secrets detectors left out: entropy (every commit hash, every UUID) and public IPs (no secret)."""
_KEYWORD_AS = ("prompt.yaml", "prompt.py")
"""The file kinds whose rules the keyword detector applies to each line: config (``key = value``,
``key: value``, unquoted) and code (``key = "value"``)."""
_PEM_END = re.compile(r"-----END [A-Z0-9 ]*-----|^Private-MAC: \S+$", re.M)
_MIN_GROUP = 8
"""A detector's match whose capture group is at least this long masks the group (``aws_secret = "…"``:
the value), else the whole match (``ghp_…``: its group is the prefix)."""


@functools.cache
def _detectors() -> tuple[list[Any], Any, re.Pattern[str], Any]:
    """detect-secrets' regex detectors, its keyword detector, the keywords it looks for (a line without
    one is not given to it) and its private-key detector's class."""
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    from detect_secrets.plugins.base import RegexBasedDetector
    from detect_secrets.plugins.keyword import DENYLIST, KeywordDetector
    from detect_secrets.plugins.private_key import PrivateKeyDetector

    classes: list[Any] = list(get_mapping_from_secret_type_to_class().values())
    regex = [
        cls()
        for cls in classes
        if issubclass(cls, RegexBasedDetector) and cls.__name__ not in _UNUSED_DETECTORS
    ]
    words = re.compile("|".join(DENYLIST), re.I)
    return regex, KeywordDetector(), words, PrivateKeyDetector


def _secret_spans(text: str) -> list[tuple[int, int]]:
    regex, keyword, words, private_key = _detectors()
    spans: list[tuple[int, int]] = []
    for detector in regex:
        for pattern in detector.denylist:
            for m in pattern.finditer(text):
                if isinstance(detector, private_key):  # the whole key: its first line to its last
                    start = text.rfind("\n", 0, m.start()) + 1
                    end = _PEM_END.search(text, m.end())
                    spans.append((start, end.end() if end else len(text)))
                    continue
                groups = [i for i in range(1, (m.lastindex or 0) + 1) if m.group(i)]
                best = max(groups, key=lambda i: m.end(i) - m.start(i), default=0)
                if best and m.end(best) - m.start(best) >= _MIN_GROUP:
                    spans.append(m.span(best))
                else:
                    spans.append(m.span())
    if not words.search(text):
        return spans
    offset = 0
    for line in text.split("\n"):
        if ("=" in line or ":" in line) and words.search(line):
            for kind in _KEYWORD_AS:
                for found in keyword.analyze_line(filename=kind, line=line):
                    value = found.secret_value or ""
                    if len(value) >= 4:
                        at = line.find(value)
                        while at >= 0:
                            spans.append((offset + at, offset + at + len(value)))
                            at = line.find(value, at + len(value))
        offset += len(line) + 1
    return spans


def redact_stored(text: str) -> str:
    """User text that is stored (prompts kept by ``ingest --keep-prompts``): :func:`redact_text`, then
    every secret detect-secrets' detectors find masked (see the module doc)."""
    if not text:
        return text
    text = redact_text(text)
    spans = sorted(_secret_spans(text))
    if not spans:
        return text
    out: list[str] = []
    pos = 0
    for begin, end in spans:
        if end <= pos:
            continue
        out.append(text[pos : max(begin, pos)])
        out.append(MASK)
        pos = end
    out.append(text[pos:])
    return "".join(out)


def redact(value: Any, *, keys: bool = True) -> Any:
    """``value`` with every string redacted (:func:`redact_text`) and, with ``keys``, the values of
    secret-looking keys blanked; dicts, lists and tuples are copied (tuples become lists)."""
    if isinstance(value, dict):
        return {
            # a secret is text: a count whose key names tokens (``routing_max_tokens``) is no secret
            k: (
                MASK
                if keys and isinstance(k, str) and isinstance(v, str) and v and _SECRET_KEY.search(k)
                else redact(v, keys=keys)
            )
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact(v, keys=keys) for v in value]
    if isinstance(value, str):
        return redact_text(value)
    return value


class RedactingFilter(logging.Filter):
    """For a handler: the record's message (arguments merged) and traceback, redacted."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: leave it to the handler to report
            return True
        record.msg = redact_text(message)
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = redact_text(logging.Formatter().formatException(record.exc_info))
        elif record.exc_text:
            record.exc_text = redact_text(record.exc_text)
        return True


_installed: list[bool] = []


def _redacting_factory(base: Any) -> Any:
    def make(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record: logging.LogRecord = base(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: leave it to the handler to report
            return record
        record.msg = redact_text(message)
        record.args = None
        if record.exc_info and record.exc_info[0] is not None and not record.exc_text:
            record.exc_text = redact_text(logging.Formatter().formatException(record.exc_info))
        return record

    make.skillreach_redacts = True  # type: ignore[attr-defined]
    return make


def install_redaction() -> None:
    """Every log record of this process redacted when it is made, whichever logger and handler it goes
    to — Prefect's console, the logs Prefect's API handler stores, a handler someone adds later — and
    every uncaught exception's traceback (main thread and others) printed redacted. Idempotent.

    A handler formats ``record.msg`` (the message, arguments merged, masked) and, for a traceback,
    ``record.exc_text`` (set here, masked): the standard :class:`logging.Formatter`, Prefect's console
    and API handlers and Rich's handler without ``rich_tracebacks`` all print those."""
    if _installed:
        return
    _installed.append(True)
    current = logging.getLogRecordFactory()
    if not getattr(current, "skillreach_redacts", False):
        logging.setLogRecordFactory(_redacting_factory(current))

    import sys
    import threading
    import traceback

    def excepthook(kind: Any, value: Any, tb: Any) -> None:
        sys.stderr.write(redact_text("".join(traceback.format_exception(kind, value, tb))))

    def thread_excepthook(args: Any) -> None:
        if args.exc_type is SystemExit:
            return
        name = args.thread.name if args.thread is not None else "a thread"
        text = "".join(traceback.format_exception(args.exc_type, args.exc_value, args.exc_traceback))
        sys.stderr.write(redact_text(f"Exception in thread {name}:\n{text}"))

    sys.excepthook = excepthook
    threading.excepthook = thread_excepthook
