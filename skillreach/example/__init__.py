"""The bundled example: 13 operations and document skills that compete with each other, and a sealed
query set over them (all four kinds, neutral ``acceptable_skills``, compliance and quality checks).

``EXAMPLE_SKILLS`` is the folder of skills (``<name>/SKILL.md``), ``EXAMPLE_QUERIES`` the sealed JSON
set, ``EXAMPLE_QUERIES_SOURCE`` the hand-written YAML it was sealed from::

    skillreach queries seal skillreach/example/queries.yaml --catalog-id example \\
        --skills skillreach/example/skills --out skillreach/example/queries.json

``EXAMPLE_NIGHTLY_SCRIPT`` is the ``fake`` runtime's script the service studies the example with (every
in-scope query routed to its expected skill, its required commands run, an answer that satisfies its
output checks and its rubric's keywords), so an offline service shows every gate — routing, compliance,
task quality — at work.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["EXAMPLE_CATALOG_ID", "EXAMPLE_DIR", "EXAMPLE_NIGHTLY_SCRIPT", "EXAMPLE_QUERIES",
           "EXAMPLE_QUERIES_SOURCE", "EXAMPLE_SKILLS"]

EXAMPLE_DIR = Path(__file__).resolve().parent
EXAMPLE_SKILLS = EXAMPLE_DIR / "skills"
EXAMPLE_QUERIES = EXAMPLE_DIR / "queries.json"
EXAMPLE_QUERIES_SOURCE = EXAMPLE_DIR / "queries.yaml"
EXAMPLE_CATALOG_ID = "example"
EXAMPLE_NIGHTLY_SCRIPT = EXAMPLE_DIR / "nightly_script.json"
