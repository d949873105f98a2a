"""The spec copy in docs/spec must not drift from the project's shared spec."""

from __future__ import annotations

import pytest

from tests.conftest import REPO, SHARED


@pytest.mark.parametrize("name", ["interfaces.md", "metrics.md"])
def test_spec_copy_is_current(name: str) -> None:
    shared = SHARED / "spec" / name
    if not shared.is_file():
        pytest.skip("../shared/spec is not present beside the checkout")
    assert (REPO / "docs" / "spec" / name).read_text() == shared.read_text(), (
        f"docs/spec/{name} differs from ../shared/spec/{name}; copy the shared one over"
    )
