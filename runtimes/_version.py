"""A runtime's version, asked once: an agent CLI's version line, or an SDK's package version.

Recorded on every probe (``ProbeRecord.runtime_version``) and in the artifact: a baseline is pinned to
it, so a changed CLI or SDK is seen, never silently mixed with earlier figures.

An agent CLI installed from npm ships its version in the ``package.json`` beside its executable (the
``node_modules/.bin`` link resolved): :func:`program_version` reads it there first, in no time, and says
it the way the program's own ``--version`` does (each runtime gives that line's template, checked against
the real programs by the realcli tests), so a pin does not change with the source. Otherwise it runs
``--version``, and on a machine under load a Node CLI can take 20 s and more to answer: it is asked
again with a longer deadline, and only an answer is kept, never a failure (a later call asks again).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import threading
from importlib import metadata
from pathlib import Path

from skillreach.runtimes._agentcli import tool_version

__all__ = ["VERSION_DEADLINES", "own_version", "package_json_version", "package_version", "program_version"]

VERSION_DEADLINES = (30.0, 60.0, 120.0)
"""Seconds each ``--version`` attempt may take, in turn (a Node CLI took 20.9 s under load)."""
_PACKAGE_JSON_LIMIT = 1_000_000
_LEVELS = 4
_VERSION = re.compile(r"\d+\.\d+\.\d+[0-9A-Za-z.+-]{0,40}")

_known: dict[tuple[str, tuple[str, ...], str], str] = {}
_locks: dict[tuple[str, tuple[str, ...], str], threading.Lock] = {}
_guard = threading.Lock()


def package_json_version(executable: str, packages: tuple[str, ...], line: str) -> str | None:
    """``line`` with ``{version}`` from the ``package.json`` of ``executable``'s npm package: the first
    one in the folders above the resolved executable (at most four up) whose ``name`` is one of
    ``packages`` (or starts with one and ``-``: a platform package such as
    ``@anthropic-ai/claude-code-linux-x64``). None when there is none."""
    if not packages:
        return None
    try:
        real = Path(os.path.realpath(executable))
    except OSError:
        return None
    for folder in [real.parent, *real.parents][:_LEVELS]:
        found = folder / "package.json"
        try:
            if not found.is_file() or found.stat().st_size > _PACKAGE_JSON_LIMIT:
                continue
            data = json.loads(found.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict):
            continue
        name, version = data.get("name"), data.get("version")
        if not isinstance(name, str) or not any(name == p or name.startswith(p + "-") for p in packages):
            continue
        if isinstance(version, str) and _VERSION.fullmatch(version):
            return line.format(version=version)
    return None


def _ask(executable: str, packages: tuple[str, ...], line: str) -> str | None:
    key = (executable, packages, line)
    with _guard:
        lock = _locks.setdefault(key, threading.Lock())
    with lock:  # one asker at a time; the others take its answer
        if key in _known:
            return _known[key]
        version = package_json_version(executable, packages, line)
        for deadline in VERSION_DEADLINES if version is None else ():
            version = tool_version(executable, timeout_s=deadline)
            if version is not None:
                break
        if version is not None:
            _known[key] = version
        return version


async def program_version(
    executable: str, *, packages: tuple[str, ...] = (), line: str = "{version}"
) -> str | None:
    """The program's version line: from its npm package's ``package.json`` (``packages``: the package
    names it may ship in; ``line``: how its ``--version`` says it), else its ``--version``'s first line,
    asked again with longer deadlines (:data:`VERSION_DEADLINES`). Kept once known; None only when
    every attempt failed, and then the next call asks again."""
    return await asyncio.to_thread(_ask, executable, packages, line)


def package_version(distribution: str) -> str | None:
    """``<distribution> <version>`` of an installed package (``anthropic 0.69.0``), None when absent."""
    try:
        return f"{distribution} {metadata.version(distribution)}"
    except metadata.PackageNotFoundError:
        return None


def own_version() -> str:
    """``skillreach <version>``: the version of a runtime that is skillreach's own code (offline ones)."""
    from skillreach import __version__

    return f"skillreach {__version__}"
