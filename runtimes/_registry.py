"""Build an object named in a plain ``name -> "module:Class"`` registry, importing its module lazily."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from skillreach.errors import NotFoundError

__all__ = ["build_named", "class_named"]


def class_named(registry: Mapping[str, str], name: str, what: str) -> Any:
    """``registry[name]``'s class (its module imported now); an unknown name lists the known ones."""
    target = registry.get(name)
    if target is None:
        raise NotFoundError(f"unknown {what} {name!r}; known {what}s: {', '.join(sorted(registry))}")
    module_name, _, cls_name = target.partition(":")
    return getattr(importlib.import_module(module_name), cls_name)


def build_named(registry: Mapping[str, str], name: str, what: str, **options: Any) -> Any:
    """``registry[name]``'s class called with ``options``; an unknown name lists the known ones."""
    return class_named(registry, name, what)(**options)
