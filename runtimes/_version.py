"""A runtime's version, asked once: an agent CLI's ``--version`` line, or an SDK's package version.

Recorded on every probe (``ProbeRecord.runtime_version``) and in the artifact: a baseline is pinned to
it, so a changed CLI or SDK is seen, never silently mixed with earlier figures.
"""

from __future__ import annotations

import asyncio
import functools
from importlib import metadata

from skillreach.runtimes._agentcli import tool_version

__all__ = ["own_version", "package_version", "program_version"]


@functools.cache
def _program_version(executable: str) -> str | None:
    return tool_version(executable)


async def program_version(executable: str) -> str | None:
    """The first line ``executable --version`` prints (``2.1.328 (Claude Code)``), once per program."""
    return await asyncio.to_thread(_program_version, executable)


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
