"""Skills and catalogs: discovery and frontmatter parsing of SKILL.md folders (``discovery``), the
author's lint (``lint``), catalog assembly (``catalog``: full, singleton, competitive neighbourhood)
and asymmetric BM25 overlap between descriptions (``bm25``, with its compiled kernel for big catalogs).

Discovery and lint are exported here; ``catalog`` and ``bm25`` load numpy and are imported by path.
"""

from __future__ import annotations

from skillreach.skills.discovery import (
    SKILL_FILE,
    SKIPPED_DIRS,
    Discovery,
    Frontmatter,
    NoFrontmatterError,
    Precedence,
    Shadowed,
    discover,
    find_skill_files,
    load_skills,
    parse_skill,
    read_frontmatter,
)
from skillreach.skills.lint import (
    DESCRIPTION_MAX,
    DESCRIPTION_MIN,
    NAME_MAX,
    NAME_PATTERN,
    RESERVED_TOOL_NAMES,
    Finding,
    LintFailed,
    LintReport,
    description_findings,
    format_github,
    format_text,
    lint,
    listing_text,
)

__all__ = [
    "DESCRIPTION_MAX",
    "DESCRIPTION_MIN",
    "NAME_MAX",
    "NAME_PATTERN",
    "RESERVED_TOOL_NAMES",
    "SKILL_FILE",
    "SKIPPED_DIRS",
    "Discovery",
    "Finding",
    "Frontmatter",
    "LintFailed",
    "LintReport",
    "NoFrontmatterError",
    "Precedence",
    "Shadowed",
    "description_findings",
    "discover",
    "find_skill_files",
    "format_github",
    "format_text",
    "lint",
    "listing_text",
    "load_skills",
    "parse_skill",
    "read_frontmatter",
]
