"""skillreach: measure whether LLM agents reach the right Agent Skill."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("skillreach")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0"

__all__ = ["__version__"]
