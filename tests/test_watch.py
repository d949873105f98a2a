"""The pure diff behind the ``watch`` flow."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from skillreach.service.watch import (
    MODEL_SNAPSHOT_CHANGED,
    SKILL_ADDED,
    SKILL_CHANGED,
    SKILL_REMOVED,
    diff_catalog,
    diff_model,
    events_for,
)


def test_added_changed_removed() -> None:
    old = {"pdf": "sha256:1", "xlsx": "sha256:2", "docx": "sha256:3"}
    new = {"pdf": "sha256:1", "xlsx": "sha256:9", "pptx": "sha256:4"}
    d = diff_catalog(old, new)
    assert d.added == {"pptx": "sha256:4"}
    assert d.changed == {"xlsx": ("sha256:2", "sha256:9")}
    assert d.removed == {"docx": "sha256:3"}
    assert not d.empty
    assert not d.first
    evs = events_for("skills/", d)
    assert [(e.event, e.payload["skill"]) for e in evs] == [
        (SKILL_ADDED, "pptx"), (SKILL_CHANGED, "xlsx"), (SKILL_REMOVED, "docx")]
    assert evs[0].resource["prefect.resource.id"] == "skillreach.skill.pptx"
    assert evs[1].payload == {"skill": "xlsx", "source": "skills/", "previous_digest": "sha256:2",
                              "digest": "sha256:9"}


def test_first_snapshot_emits_nothing() -> None:
    d = diff_catalog(None, {"pdf": "sha256:1"})
    assert d.first
    assert d.empty
    assert events_for("s", d) == []


def test_model_snapshot_change() -> None:
    assert diff_model("anthropic", "claude-sonnet-4-5", None, "x-1") is None
    assert diff_model("anthropic", "claude-sonnet-4-5", "x-1", "x-1") is None
    ch = diff_model("anthropic", "claude-sonnet-4-5", "x-1", "x-2")
    assert ch is not None
    [ev] = events_for("s", diff_catalog({}, {}), [ch])
    assert ev.event == MODEL_SNAPSHOT_CHANGED
    assert ev.payload == {"runtime": "anthropic", "alias": "claude-sonnet-4-5", "previous": "x-1",
                          "current": "x-2"}
    assert ev.resource["prefect.resource.id"] == "skillreach.model.claude-sonnet-4-5"


snapshots = st.dictionaries(st.sampled_from("abcdefgh"), st.sampled_from(["d1", "d2", "d3"]))


@given(snapshots, snapshots)
def test_diff_accounts_for_every_name(old: dict[str, str], new: dict[str, str]) -> None:
    d = diff_catalog(old, new)
    assert set(d.added) | set(d.changed) | set(d.removed) | {k for k in old if old.get(k) == new.get(k)} == (
        set(old) | set(new))
    assert not (set(d.added) & set(d.removed))
    assert d.empty == (old == new)
    # applying the diff to the old snapshot gives the new one
    rebuilt = {k: v for k, v in old.items() if k not in d.removed}
    rebuilt.update(d.added)
    rebuilt.update({k: v[1] for k, v in d.changed.items()})
    assert rebuilt == new
