"""The spec copy in docs/spec must not drift from the project's shared spec.

The copy may extend the shared text with sections of the project's own (appended after it), but it
must contain the shared text unchanged.
"""

from __future__ import annotations

import pytest

from tests.conftest import REPO, SHARED


@pytest.mark.parametrize("name", ["interfaces.md", "metrics.md"])
def test_spec_copy_contains_the_shared_text(name: str) -> None:
    shared = SHARED / "spec" / name
    if not shared.is_file():
        pytest.skip("../shared/spec is not present beside the checkout")
    ours = (REPO / "docs" / "spec" / name).read_text()
    assert shared.read_text() in ours, (
        f"docs/spec/{name} does not contain ../shared/spec/{name} unchanged; copy the shared one over "
        "and keep the project's own sections after it"
    )


def test_staged_section_is_the_projects_own_and_names_the_procedure() -> None:
    text = (REPO / "docs" / "spec" / "metrics.md").read_text()
    assert "## Staged comparison (this project's own section" in text
    assert "O'Brien–Fleming" in text
