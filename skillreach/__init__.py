"""skillreach: measure whether LLM agents reach the right Agent Skill."""

from __future__ import annotations

__all__ = ["__version__"]

__version__: str


def __getattr__(name: str) -> str:
    """``__version__`` on first use: ``importlib.metadata`` (with ``email`` and ``zipfile``) costs the
    command's start-up a tenth of a second and most commands never print a version."""
    if name != "__version__":
        raise AttributeError(f"module 'skillreach' has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("skillreach")
    except PackageNotFoundError:  # running from a source tree that is not installed
        found = "0.0.0"
    globals()["__version__"] = found
    return found
