"""The bundled example: 13 operations and document skills that compete with each other, and a sealed
query set over them (all four kinds, neutral ``acceptable_skills``, compliance and quality checks).

``EXAMPLE_SKILLS`` is the folder of skills (``<name>/SKILL.md``), ``EXAMPLE_QUERIES`` the sealed JSON
set, ``EXAMPLE_QUERIES_SOURCE`` the hand-written YAML it was sealed from::

    skillreach queries seal skillreach/example/queries.yaml --catalog-id example \\
        --skills skillreach/example/skills --out skillreach/example/queries.json
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["EXAMPLE_CATALOG_ID", "EXAMPLE_DIR", "EXAMPLE_QUERIES", "EXAMPLE_QUERIES_SOURCE", "EXAMPLE_SKILLS"]

EXAMPLE_DIR = Path(__file__).resolve().parent
EXAMPLE_SKILLS = EXAMPLE_DIR / "skills"
EXAMPLE_QUERIES = EXAMPLE_DIR / "queries.json"
EXAMPLE_QUERIES_SOURCE = EXAMPLE_DIR / "queries.yaml"
EXAMPLE_CATALOG_ID = "example"
