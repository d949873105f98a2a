"""What ``check --changed`` says: GitHub annotations, the step summary, and the terminal — quiet by
default (what is not ok, plus one line each for a changed yardstick, stale baselines and tampered
records), everything with ``--verbose``."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from skillreach._io.console import strip_control

__all__ = [
    "FAILING",
    "annotate",
    "failing",
    "metric_lines",
    "not_ok_lines",
    "step_summary",
    "undecided",
    "victim_line",
]

FAILING = ("breach", "unparseable", "takes", "yardstick")
"""Statuses that fail the check whatever the flags (``inconclusive`` fails unless --lenient, ``no
baseline`` unless --allow-missing)."""
ICON = {
    "ok": "✅",
    "inconclusive": "⚠️",
    "breach": "❌",
    "no baseline": "➕",
    "new": "🆕",
    "no cases": "ℹ️",
    "accepted": "✍️",
    "expired": "⌛",
    "refused": "⛔",
    "unparseable": "❌",
    "takes": "❌",
    "yardstick": "❌",
}


def failing(status: str, *, strict: bool, allow_missing: bool) -> bool:
    return status in FAILING or (strict and status == "inconclusive") or (
        status == "no baseline" and not allow_missing
    )


def annotate(level: str, file: str | None, title: str, message: str) -> str:
    """A GitHub workflow command (``::error file=…,title=…::message``), values escaped as GitHub asks;
    control characters (a carriage return included) are dropped, not escaped."""

    def prop(v: str) -> str:
        return (
            strip_control(v)
            .replace("%", "%25")
            .replace("\n", "%0A")
            .replace(":", "%3A")
            .replace(",", "%2C")
        )

    msg = strip_control(message).replace("%", "%25").replace("\n", "%0A")
    props = ([f"file={prop(file)}"] if file else []) + [f"title={prop(title)}"]
    return f"::{level} {','.join(props)}::{msg}"


def victim_line(name: str, cmp: Any, loss: Any) -> str | None:
    """``algorithmic-art: activation 0.500 → 0.000 (lost 2 of 2 cases to canvas-design) — breach`` when
    the skill's activation fell past its gate (breach or inconclusive), else ``None``."""
    from skillreach.reports.gates import fmt_value

    drop = next(
        (
            r
            for r in cmp.results
            if r.metric == "activation" and r.verdict.value in ("breach", "inconclusive")
        ),
        None,
    )
    if drop is None:
        return None
    return (
        f"{name}: activation {fmt_value(drop.base)} → {fmt_value(drop.new)} ({loss.sentence()}) — "
        f"{drop.verdict.value}"
    )


def metric_lines(name: str, results: Iterable[dict[str, Any]]) -> list[str]:
    """One line per gated metric that is not ok (``results``: a comparison's results as JSON)."""
    out = []
    for g in results:
        if g["verdict"] not in ("breach", "inconclusive"):
            continue
        ci = f"[{g['ci95'][0]:+.3f}, {g['ci95'][1]:+.3f}]" if g["ci95"] else "–"
        out.append(
            f"{name}: {g['metric']} ({g['cohort']}) {g['verdict']}: Δ {g['mean_diff']:+.3f}, 95% CI {ci}, "
            f"gate {g['gate']:+.2f}, {g['k']} cases" + (f". {g['note']}" if g["note"] else "")
        )
    return out


def not_ok_lines(results: Sequence[dict[str, Any]]) -> list[str]:
    """What the terminal shows by default: the victims, every metric that is not ok, every take,
    yardstick change and refusal, and each new skill's figures (one line each)."""
    out: list[str] = [r["victim"] for r in results if r.get("victim")]
    for r in results:
        st = r["status"]
        if "comparison" in r and st != "ok":
            out += metric_lines(r["skill"], r["comparison"]["results"])
        elif st == "takes":
            out += [r["message"], f"  {r['advice']}"]
        elif st == "new":
            out.append(r["message"])
        elif st not in ("ok", "accepted", "yardstick") and "message" in r:  # the yardstick: its own line
            out.append(f"{r['skill']}: {st}: {r['message']}")
    return out


def undecided(results: list[dict[str, Any]]) -> str:
    """What would decide each inconclusive gate, e.g. ``demo activation: add about 9 positive cases for
    demo (now 4)``."""
    parts: list[str] = []
    for r in results:
        for g in (r.get("comparison") or {}).get("results", []):
            if g["verdict"] != "inconclusive":
                continue
            parts.append(
                f"{r['skill']} {g['metric']}"
                + (f" ({g['cohort']})" if g["cohort"] != "paired" else "")
                + (f": {g['note']}" if g.get("note") else "")
            )
    return "; ".join(parts)


def _md(text: str) -> str:
    return strip_control(text).replace("|", "\\|")


def _rows(results: Sequence[dict[str, Any]], *, only_not_ok: bool) -> list[str]:
    from skillreach.reports.gates import fmt_value

    rows = []
    for r in results:
        st = r["status"]
        if "comparison" not in r:
            if only_not_ok and st in ("ok", "new", "accepted"):
                continue
            rows.append(f"| {_md(r['skill'])} | – | – | – | – | – | – | {ICON.get(st, '')} {st}: "
                        f"{_md(r.get('message', ''))} |")
            continue
        for g in r["comparison"]["results"]:
            if only_not_ok and g["verdict"] not in ("breach", "inconclusive"):
                continue
            ci = f"[{g['ci95'][0]:+.3f}, {g['ci95'][1]:+.3f}]" if g["ci95"] else "–"
            note = f" — {_md(g['note'])}" if g["note"] else ""
            rows.append(
                f"| {_md(r['skill'])} | {g['metric']} | {g['cohort']} | {fmt_value(g['base'])} | "
                f"{fmt_value(g['new'])} | {fmt_value(g['mean_diff'], signed=True)} | {ci} | "
                f"{ICON.get(g['verdict'], '')} {g['verdict']}{note} |"
            )
    return rows


_HEAD = [
    "| skill | metric | cohort | baseline | new | Δ | 95% CI | verdict |",
    "|---|---|---|---|---|---|---|---|",
]


def step_summary(
    *,
    rev: str,
    how: str,
    headline: str,
    routing: str,
    stale: Sequence[str],
    tampered: Sequence[str],
    results: Sequence[dict[str, Any]],
    probes: str,
    code: int,
    verbose: bool,
) -> str:
    """The pull request's step summary. Its first line says what in the yardstick changed; then what is
    not ok (victims, takes, metrics, refusals), one line each for stale baselines and tampered records,
    and every gated metric in a collapsed table."""
    out = [f"**{_md(headline)}**", "", "## skillreach check", "",
           f"Compared with `{rev[:12]}` ({how}). {_md(routing)} {_md(probes)}".rstrip(), ""]
    if stale:
        out.append(f"- Baselines stale: {_md('; '.join(stale))}")
    if tampered:
        out.append(f"- Tampered: {_md(', '.join(tampered))} (their digests do not match their content)")
    victims = [r["victim"] for r in results if r.get("victim")]
    out += [f"- **{_md(v)}**" for v in victims]
    for r in results:
        if r["status"] == "takes":
            out += [f"- **{_md(r['message'])}** — {_md(r['advice'])}"]
        elif r["status"] == "new":
            out.append(f"- 🆕 {_md(r['message'])}")
        elif r["status"] == "accepted":
            out.append(f"- ✍️ {_md(r['skill'])}: {_md(r['message'])}")
    bad = _rows(results, only_not_ok=True)
    if bad:
        out += ["", *_HEAD, *bad]
    elif results:
        out += ["", "Every gated metric is ok."]
    every = _rows(results, only_not_ok=False)
    if every:  # everything, collapsed: the verbose view of the same table
        opened = "<details open>" if verbose else "<details>"
        out += ["", f"{opened}<summary>every gated metric</summary>", "", *_HEAD, *every, "", "</details>"]
    out += ["", f"**Exit {code}**", ""]
    return "\n".join(out) + "\n"
