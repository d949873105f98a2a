"""Four skills with bodies (and one without) for the query-generation tests, and the leak check."""

from __future__ import annotations

import json
import re
from pathlib import Path

from skillreach.models import Catalog, Skill
from skillreach.skills.bm25 import STOPWORDS

__all__ = ["ATLAS", "EMPTY", "FORMS", "MERGE", "SHEETS", "SKILLS", "catalog", "description_grams",
           "leaked_phrases", "write_skills"]

FORMS = Skill(
    name="pdf-forms",
    description=(
        "Fill and flatten PDF forms with pypdf, including AcroForm checkboxes and signature fields. "
        'Use when the user says "fill in this form".'
    ),
    body=(
        "# PDF forms\n\n"
        "Fill and flatten PDF forms with pypdf, including AcroForm checkboxes and signature fields.\n\n"
        "## Steps\n\n"
        "Read the field names with `python scripts/list_fields.py input.pdf` before writing anything.\n"
        "Write the values into a JSON file keyed by field name, then run "
        "`python scripts/fill.py input.pdf values.json output.pdf`.\n\n"
        "Flatten the result so that nobody can edit the values afterwards.\n"
        "The pdf-forms helper refuses encrypted files; decrypt them first.\n"
    ),
)
MERGE = Skill(
    name="pdf-merge",
    description="Merge, split and reorder the pages of PDF documents with qpdf.",
    body=(
        "# Pages\n\n"
        "Use qpdf for every page operation.\n\n"
        "Combine several files into one with `qpdf --empty --pages a.pdf b.pdf -- out.pdf`.\n\n"
        "Split a long document into single pages when a reviewer wants them separately.\n"
        "Rotate scanned pages that came out sideways before sending them on.\n"
    ),
)
SHEETS = Skill(
    name="spreadsheet-report",
    description="Build Excel workbooks with formulas, charts and conditional formatting via openpyxl.",
    body=(
        "# Workbooks\n\n"
        "Create the workbook with openpyxl and keep raw data on its own sheet.\n\n"
        "Add a line chart for monthly totals and colour negative numbers red.\n"
        "Never hard-code totals: write SUM formulas so the sheet stays correct.\n"
    ),
)
ATLAS = Skill(
    name="gene-atlas",
    description="Look up expression patterns in the zebrafish developmental atlas (ZFIN) by gene symbol.",
    body=(
        "# Expression lookup\n\n"
        "Query the expression endpoint with the gene symbol and the developmental stage.\n"
        "Report the anatomical structures where the gene is expressed, with the figure links.\n"
    ),
)
EMPTY = Skill(name="empty-notes", description="Placeholder notes without instructions.", body="")

SKILLS = (FORMS, MERGE, SHEETS, ATLAS)


def catalog(*skills: Skill) -> Catalog:
    return Catalog(id="full", skills=skills or SKILLS)


def write_skills(root: Path, skills: tuple[Skill, ...] = SKILLS) -> Path:
    for s in skills:
        folder = root / s.name
        folder.mkdir(parents=True, exist_ok=True)
        front = json.dumps(s.description)  # a JSON string is a valid YAML scalar
        (folder / "SKILL.md").write_text(f"---\nname: {s.name}\ndescription: {front}\n---\n{s.body}")
    return root


def description_grams(description: str) -> set[tuple[str, ...]]:
    """What must never reach a request: 4-word runs of the description with ≥ 2 non-stopwords."""
    words = [w.casefold() for w in re.findall(r"[^\W_]+", description)]
    return {
        tuple(words[i : i + 4])
        for i in range(len(words) - 3)
        if sum(w not in STOPWORDS for w in words[i : i + 4]) >= 2
    }


def leaked_phrases(text: str, description: str) -> list[str]:
    words = [w.casefold() for w in re.findall(r"[^\W_]+", text)]
    seen = {tuple(words[i : i + 4]) for i in range(len(words) - 3)}
    hits = [" ".join(g) for g in description_grams(description) & seen]
    if " ".join(description.split()).casefold() in " ".join(text.split()).casefold():
        hits.append(description)
    return hits
