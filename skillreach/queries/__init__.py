"""Query sets: the labelled queries a study asks. Load, seal and verify a set (``sets``; the fast JSON
path in ``_fastjson``), import public trigger-set formats (``importers``), the compliance checks a
case carries (``compliance``), and LLM generation of drafts (``generation``, resumable through
``checkpoint``).

Loading, sealing and importing are exported here; generation loads Jinja2 and is imported by path.
"""

from __future__ import annotations

from skillreach.queries.importers import (
    FORMATS,
    ImportResult,
    detect_format,
    import_queries,
    read_trigger_set,
)
from skillreach.queries.sets import (
    QUERY_FIELDS,
    dump_query_set,
    grow_query_set,
    kind_counts,
    load_query_set,
    query_digest,
    read_query_file,
    seal,
    validate_against_catalog,
    verify_query_set,
    write_query_set,
)

__all__ = [
    "FORMATS",
    "QUERY_FIELDS",
    "ImportResult",
    "detect_format",
    "dump_query_set",
    "grow_query_set",
    "import_queries",
    "kind_counts",
    "load_query_set",
    "query_digest",
    "read_query_file",
    "read_trigger_set",
    "seal",
    "validate_against_catalog",
    "verify_query_set",
    "write_query_set",
]
