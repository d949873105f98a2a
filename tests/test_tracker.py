"""Properties of the shared trajectory tracker (spec/metrics.md ``raw``)."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from skillreach.models import Query
from skillreach.study.contract import ProbeOptions, Tracker

NAMES = st.sampled_from(["a", "b", "c", "d", "e"])


def feed(tracker: Tracker, calls: list[str]) -> int:
    """Invoke until the tracker says stop; return how many calls were made."""
    made = 0
    for name in calls:
        made += 1
        if not tracker.invoke(name):
            break
    return made


@given(
    calls=st.lists(NAMES, max_size=30),
    expected=st.one_of(st.none(), NAMES),
    acceptable=st.lists(NAMES, max_size=2, unique=True),
    max_turns=st.integers(min_value=1, max_value=6),
    early_exit=st.booleans(),
)
def test_tracker_invariants(
    calls: list[str], expected: str | None, acceptable: list[str], max_turns: int, early_exit: bool
) -> None:
    acceptable = [a for a in acceptable if a != expected]
    t = Tracker(expected, acceptable, max_turns=max_turns, early_exit=early_exit)
    made = feed(t, calls)
    raw = t.invoked
    # never longer than max_turns; no consecutive repeats
    assert len(raw) <= max_turns
    assert all(x != y for x, y in itertools.pairwise(raw))
    # raw is the collapsed prefix of the calls actually made
    collapsed: list[str] = []
    for name in calls[:made]:
        if not collapsed or collapsed[-1] != name:
            collapsed.append(name)
    assert raw == collapsed
    # early exit: stops the moment the expected skill is invoked, which is then last
    if early_exit and expected is not None and expected in raw:
        assert t.early_exit
        assert raw[-1] == expected
        assert raw.count(expected) == 1
    if not early_exit:
        assert not t.early_exit
    # every read, acceptable skills included, uses one turn
    if len(collapsed) >= max_turns or t.done:
        assert t.done
    if t.done:
        assert t.invoke("a") is False
        assert t.invoked == raw  # nothing after the exit is recorded


def test_acceptable_skills_consume_turns() -> None:
    t = Tracker("z", ["a"], max_turns=2)
    feed(t, ["a", "b", "z"])
    assert t.invoked == ["a", "b"]
    assert t.exhausted
    assert not t.early_exit


def test_repeats_collapse_and_do_not_use_turns() -> None:
    t = Tracker("c", max_turns=2)
    assert t.invoke("a")
    assert t.invoke("a")
    assert not t.invoke("c")
    assert t.invoked == ["a", "c"]
    assert t.early_exit


def test_for_query_carries_options_and_attempt() -> None:
    q = Query(id="q", text="t", expected_skill="a", acceptable_skills=("b",))
    opts = ProbeOptions(max_turns=4, early_exit=False, compliance=True)
    t = Tracker.for_query(q, opts, attempt=3)
    assert t.options is opts
    assert t.attempt == 3
    assert t.max_turns == 4
    assert t.acceptable == frozenset({"b"})
    t.invoke("a")
    assert t.expected_loaded
    assert not t.done


def test_probe_options_refuse_nonsense() -> None:
    import pytest

    from skillreach.errors import ConfigError

    with pytest.raises(ConfigError, match="max_turns must be at least 1"):
        ProbeOptions(max_turns=0)
    with pytest.raises(ConfigError, match="step_budget"):
        ProbeOptions(step_budget=0)
    with pytest.raises(ConfigError, match="timeout_s"):
        ProbeOptions(timeout_s=0)
