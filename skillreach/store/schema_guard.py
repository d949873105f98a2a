"""A store whose schema a newer skillreach wrote: recognised before any migration runs, and refused in
one line saying so and what to do (upgrade skillreach), the store left unchanged."""

from __future__ import annotations

import re
from pathlib import Path

from sqlalchemy.engine import make_url

from skillreach.errors import ConfigError

__all__ = ["known_revisions", "refuse_newer"]

VERSIONS = Path(__file__).with_name("migrations") / "versions"


def known_revisions() -> frozenset[str]:
    """The revisions of the migrations this skillreach ships (read from their files' ``revision =``)."""
    found = set()
    for path in VERSIONS.glob("*.py"):
        m = re.search(r"^revision\s*=\s*['\"]([^'\"]+)['\"]", path.read_text(encoding="utf-8"), re.M)
        if m:
            found.add(m.group(1))
    return frozenset(found)


def refuse_newer(revision: str | None, url: str, head: str) -> None:
    """A :class:`ConfigError` when ``revision`` (the store's) is none this skillreach ships (``head`` its
    newest): a newer skillreach wrote that store."""
    if revision is None or revision == head or revision in known_revisions():
        return
    from skillreach import __version__

    shown = make_url(url).render_as_string(hide_password=True)
    raise ConfigError(
        f"the store {shown} has schema {revision}, newer than this skillreach {__version__} knows (its "
        f"newest is {head}): a newer skillreach upgraded it; upgrade skillreach (pip install -U "
        "skillreach) to use this store — it was left unchanged"
    )
