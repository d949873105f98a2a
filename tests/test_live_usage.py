"""Live usage (issue 32): the usage tables, the live gate and the discriminator's verdict — pure
functions over :class:`~skillreach.live.events.LiveEvent` lists — and the HTML page."""

from __future__ import annotations

import itertools
from datetime import UTC, date, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skillreach.live.events import LiveEvent
from skillreach.live.gate import check_live_gate, drop_onset, live_shares, windows_for
from skillreach.live.usage import usage_report
from skillreach.live.verdict import CatalogChange, FrozenResult, decide, nearest_change
from skillreach.settings import LiveGateConfig

T0 = datetime(2026, 11, 2, tzinfo=UTC)  # a Monday
_ids = itertools.count()


def prompt(at: datetime, session: str = "s1", *, sidechain: bool = False) -> list[LiveEvent]:
    n = next(_ids)
    return [
        LiveEvent(
            source="t",
            event_id=f"p{n}",
            kind="prompt",
            at=at,
            agent="claude-code",
            session_id=session,
            prompt_id=f"p{n}",
            sidechain=sidechain,
        )
    ]


def call(
    at: datetime,
    skill: str | None,
    *,
    ran: str | None = None,
    session: str = "s1",
    prompt_id: str | None = None,
    version: str = "unknown",
    hidden: bool = False,
    sidechain: bool = False,
    success: bool | None = True,
) -> LiveEvent:
    n = next(_ids)
    return LiveEvent(
        source="t",
        event_id=f"c{n}",
        kind="skill",
        at=at,
        agent="claude-code",
        session_id=session,
        prompt_id=prompt_id,
        skill=skill,
        skill_ran=ran,
        hidden=hidden,
        sidechain=sidechain,
        skill_version=version,
        success=success,
    )


def day(n: int, hour: int = 0) -> datetime:
    return T0 + timedelta(days=n, hours=hour)


def month(
    before: int, after: int, *, switch: int = 28, days: int = 42, per_day: int = 10, grow_after: int = 0
) -> list[LiveEvent]:
    """``per_day`` prompts a day (``+grow_after`` from ``switch`` on); the first ``before`` (then
    ``after``) of each day's prompts activate ``pdf``, the next two ``docx``, the grown ones ``xlsx``."""
    out: list[LiveEvent] = []
    for d in range(days):
        late = d >= switch
        for i in range(per_day + (grow_after if late else 0)):
            [p] = prompt(day(d, i % 24), session=f"s{d}")
            out.append(p)
            skill = (
                "pdf"
                if i < (after if late else before)
                else "docx"
                if i < per_day - 2
                else None
                if i < per_day
                else "xlsx"
            )
            if skill:
                out.append(
                    call(
                        p.at,
                        skill,
                        ran=skill,
                        session=p.session_id,
                        prompt_id=p.prompt_id,
                        version="git:a" if d < 20 else "git:b",
                    )
                )
    return out


def test_shares_count_each_prompt_once_and_keep_subagents_and_hidden_calls_apart() -> None:
    ev = [*prompt(day(0)), *prompt(day(0, 1)), *prompt(day(0, 2), sidechain=True)]
    p1, p2 = ev[0].prompt_id, ev[1].prompt_id
    ev += [
        call(day(0), "pdf", ran="pdf", prompt_id=p1),
        call(day(0), "pdf", ran="pdf", prompt_id=p1),  # the same prompt again: one activation
        call(day(0, 1), "docx", ran="pdf", prompt_id=p2),  # asked for docx, ran pdf
        call(day(0, 1), None, hidden=True, prompt_id=p2),  # custom_skill: never a skill's
        call(day(0, 2), "pdf", ran="pdf", sidechain=True),
        call(day(1), "xlsx", ran="xlsx", success=False),  # a day with calls and no prompt
    ]
    r = usage_report(ev, by="day")
    rows = {(x.skill, x.period): x for x in r.rows}
    pdf = rows[("pdf", date(2026, 11, 2))]
    assert (pdf.prompts, pdf.activations, pdf.share, pdf.sidechain_activations) == (2, 2, 1.0, 1)
    assert ("docx", date(2026, 11, 2)) not in rows  # what ran counts, not what was asked for
    assert rows[("xlsx", date(2026, 11, 3))].share is None  # no prompt that day: no share
    [mm] = r.mismatches
    assert (mm.requested, mm.ran, mm.calls) == ("docx", "pdf", 1)
    assert r.hidden == 1
    assert r.failed == 1
    totals = {t.period: t for t in r.totals}
    assert totals[date(2026, 11, 2)].sidechain_prompts == 1
    assert totals[date(2026, 11, 2)].sidechain_activations == 1


def test_weeks_versions_and_stale_skills() -> None:
    ev = month(6, 6, days=21)
    r = usage_report(ev, by="week", catalog=["pdf", "docx", "xlsx", "pptx"], stale_days=7, now=day(21))
    assert r.periods == (date(2026, 11, 2), date(2026, 11, 9), date(2026, 11, 16))
    assert r.share_series("pdf") == [pytest.approx(0.6)] * 3
    spans = {(v.skill, v.version): v for v in r.versions}
    assert spans[("pdf", "git:a")].last < spans[("pdf", "git:b")].first == day(20)
    assert spans[("pdf", "git:a")].activations + spans[("pdf", "git:b")].activations == 6 * 21
    by_version = {(x.period, x.version): x.activations for x in r.version_rows if x.skill == "pdf"}
    assert by_version[(date(2026, 11, 16), "git:a")] == 6 * 6
    assert by_version[(date(2026, 11, 16), "git:b")] == 6 * 1
    assert [(s.skill, s.last_activation) for s in r.stale] == [("pptx", None), ("xlsx", None)]
    # a skill added to the catalog within the span has not had the time to be stale
    young = usage_report(
        ev,
        by="week",
        catalog=["pdf", "pptx", "xlsx"],
        stale_days=7,
        now=day(21),
        added={"pptx": day(18), "xlsx": day(2)},
    )
    assert [s.skill for s in young.stale] == ["xlsx"]
    # the window cuts the tables; the stale list reads every event given
    cut = usage_report(ev, by="day", since=day(14), until=day(21), catalog=["pdf"], stale_days=30)
    assert min(cut.periods) == date(2026, 11, 16)
    assert len(cut.periods) == 7
    assert cut.stale == ()


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 13), st.sampled_from(["pdf", "docx", None]), st.booleans()), max_size=60
    )
)
def test_period_tables_add_up(spec: list[tuple[int, str | None, bool]]) -> None:
    """Per period, the skills' activations add up to the period's; a skill's versions to the skill;
    a share is activations over the same period's prompts."""
    ev: list[LiveEvent] = []
    for d, skill, side in spec:
        [p] = prompt(day(d), session=f"s{d}", sidechain=side)
        ev.append(p)
        if skill:
            ev.append(
                call(p.at, skill, ran=skill, prompt_id=p.prompt_id, sidechain=side, version=f"v{d % 2}")
            )
    for by in ("day", "week"):
        r = usage_report(ev, by=by)  # type: ignore[arg-type]
        for t in r.totals:
            assert t.activations == sum(x.activations for x in r.rows if x.period == t.period)
            assert t.prompts >= t.activations  # each activation answers one main-agent prompt here
        for x in r.rows:
            assert x.activations == sum(
                v.activations for v in r.version_rows if (v.skill, v.period) == (x.skill, x.period)
            )
            if x.prompts:
                assert x.share == pytest.approx(x.activations / x.prompts)


def test_the_gate_flags_a_fall_past_it_and_lists_the_skills_that_rose() -> None:
    gate = LiveGateConfig()  # −25 % relative, 14 days against the 28 before
    end = day(42)
    fell = check_live_gate(month(6, 3), gate, end)
    assert [d.skill for d in fell] == ["pdf"]
    [d] = fell
    assert (d.share.reference_share, d.share.recent_share) == (pytest.approx(0.6), pytest.approx(0.3))
    assert d.relative == pytest.approx(-0.5)
    assert d.onset == day(28)  # the day the share changed
    assert [s.skill for s in d.rose] == ["docx"]  # docx took the prompts pdf no longer answers
    assert check_live_gate(month(6, 5), gate, end) == []  # −17 %: within the gate
    # the mix moved: the same pdf activations, more prompts for another skill
    mix = check_live_gate(month(6, 6, grow_after=10), gate, end)
    assert [d.skill for d in mix] == ["docx", "pdf"]  # both: their requests are the same, the mix grew
    assert all([s.skill for s in d.rose] == ["xlsx"] for d in mix)
    # too little evidence is not judged
    assert check_live_gate(month(6, 3, per_day=3), gate, end) == []
    assert check_live_gate(month(6, 3), gate.model_copy(update={"min_activations": 500}), end) == []
    assert check_live_gate(month(6, 3), gate, end, skills=["docx"]) == []


def test_the_windows_follow_the_setting() -> None:
    w = windows_for(LiveGateConfig(recent="7d", reference="21d"), day(42))
    assert (w.reference_start, w.recent_start, w.until) == (day(14), day(35), day(42))
    ref, new, shares = live_shares(month(6, 3), w)
    assert (ref, new) == (210, 70)
    assert shares["pdf"].relative == pytest.approx(0.3 / 0.5 - 1)  # the reference holds a week at 30 %
    with pytest.raises(ValueError, match="activation_share"):
        LiveGateConfig(activation_share=0.2)
    with pytest.raises(ValueError, match="empty window"):
        LiveGateConfig(recent="0d")


def test_onset_finds_the_change_point() -> None:
    timeline = [(day(d, i), "pdf" if i < (8 if d < 9 else 2) else None) for d in range(15) for i in range(10)]
    timeline += [(day(d, i), None) for d in range(15) for i in range(10)]  # every line a prompt as well
    assert drop_onset(timeline, "pdf") == day(9)
    assert drop_onset(timeline[:1], "pdf") is None


def _drop() -> object:
    [d] = check_live_gate(month(6, 3), LiveGateConfig(), day(42))
    return d


CHANGES = [
    CatalogChange(at=day(3), skill="docx", how="edited", commit="a" * 40),
    CatalogChange(at=day(27, 15), skill="pdf-forms", how="added", commit="b" * 40),
    CatalogChange(at=day(29), skill="xlsx", how="edited", commit="c" * 40),
]


def test_a_breached_frozen_set_is_a_routing_change_naming_the_taker_and_the_change() -> None:
    drop = _drop()
    frozen = FrozenResult(
        verdict="breach",
        baseline_id="pdf@1",
        base=1.0,
        new=0.25,
        lost=6,
        cases=8,
        taken_by={"pdf-forms": 5, "(no skill)": 1},
    )
    v = decide(drop, frozen, CHANGES)  # type: ignore[arg-type]
    assert v.verdict == "routing change"
    assert v.takers == ("pdf-forms",)
    assert v.nearest is not None
    assert v.nearest.skill == "pdf-forms"
    assert "its cases now go to pdf-forms (5 of 8)" in v.message
    assert (
        "nearest catalog change: pdf-forms added on 2026-11-29 15:00 UTC (commit bbbbbbbbbbbb)" in v.message
    )


def test_a_frozen_set_that_holds_is_the_request_mix() -> None:
    drop = _drop()
    v = decide(drop, FrozenResult(verdict="ok", baseline_id="pdf@1", base=1.0, new=1.0), CHANGES)  # type: ignore[arg-type]
    assert v.verdict == "request mix"
    assert "routing holds, the requests moved" in v.message
    assert "live share of the skills that rose: docx 20.0% → 50.0%" in v.message
    undecided = decide(
        drop,
        FrozenResult(
            verdict="inconclusive",
            baseline_id="pdf@1",
            base=1.0,  # type: ignore[arg-type]
            new=0.8,
            needed="12 more cases",
        ),
    )
    assert undecided.verdict == "undecided"
    assert "12 more cases" in undecided.message


def test_nearest_change_is_by_time() -> None:
    assert nearest_change(CHANGES, day(28, 23)) == CHANGES[2]
    assert nearest_change(CHANGES, day(2)) == CHANGES[0]
    assert nearest_change([], day(2)) is None


def test_git_log_parsing_names_the_skill_folder() -> None:
    from skillreach.live.catalog import parse_git_log

    text = (
        "\0" + "b" * 40 + " 2026-11-30T10:00:00+01:00\n\nA\tskills/pdf-forms/SKILL.md\n"
        "A\tskills/pdf-forms/forms.py\nM\tskills/pdf/SKILL.md\n"
        "\0" + "a" * 40 + " 2026-11-01T00:00:00Z\n\nR100\tskills/old/SKILL.md\tskills/new/SKILL.md\n"
    )
    got = [(c.skill, c.how, c.at.isoformat()) for c in parse_git_log(text)]
    assert got == [
        ("new", "added", "2026-11-01T00:00:00+00:00"),
        ("old", "removed", "2026-11-01T00:00:00+00:00"),
        ("pdf", "edited", "2026-11-30T09:00:00+00:00"),
        ("pdf-forms", "added", "2026-11-30T09:00:00+00:00"),
    ]


def test_the_page_draws_a_line_per_skill_marks_changes_and_escapes_names() -> None:
    from skillreach.reports.usage import render_usage_html

    ev = month(6, 3)
    ev.append(call(day(30), "<script>x</script>", ran="<script>x</script>"))
    r = usage_report(ev, by="day", since=day(0), until=day(42))
    html = render_usage_html(r, changes=CHANGES)
    assert html.count("<polyline") == 3
    assert 'data-skill="pdf"' in html
    assert "<script>" not in html
    assert "&lt;script&gt;x&lt;/script&gt;" in html
    assert 'data-mark="added" data-skill="pdf-forms"' in html
    assert 'data-mark="version" data-skill="pdf"' in html  # git:b went live on day 20
    assert "It moves with the request mix" in html
    assert "It is not the skill's routing accuracy" in html
