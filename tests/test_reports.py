"""Reports: the HTML is parsed (html.parser) and its numbers compared with the artifact's."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from io import StringIO

import pytest
from rich.console import Console

from skillreach.models import NO_SKILL, Catalog, ProbeRecord, Query, QueryKind, QuerySet, Skill
from skillreach.reports import fmt_rate, print_scorecard, render_html, render_markdown
from skillreach.reports.markdown import md_escape
from skillreach.scoring import score
from skillreach.scoring.artifact import Artifact

EVIL = '<script>alert("x")</script>'


class Page(HTMLParser):
    """Every element with its attributes and text; a count of each tag."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[dict[str, str | None]] = []
        self.tags: dict[str, int] = {}
        self._stack: list[dict[str, str | None]] = []
        self.text: list[str] = []
        self._row: str | None = None
        self._kind: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags[tag] = self.tags.get(tag, 0) + 1
        if tag == "tr":
            self._row = dict(attrs).get("data-class")
            self._kind = dict(attrs).get("data-kind")
        el: dict[str, str | None] = {
            "_tag": tag,
            **dict(attrs),
            "_text": "",
            "_row": self._row,
            "_row_kind": self._kind,
        }
        self.elements.append(el)
        if tag not in {"meta", "line", "rect", "circle", "br", "img", "input", "link"}:
            self._stack.append(el)

    def handle_endtag(self, tag: str) -> None:
        while self._stack:
            if self._stack.pop()["_tag"] == tag:
                break

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        for el in self._stack:
            el["_text"] = (el["_text"] or "") + data

    def find(self, **attrs: str) -> list[dict[str, str | None]]:
        return [e for e in self.elements if all(e.get(k.replace("_", "-")) == v for k, v in attrs.items())]


def parse(html: str) -> Page:
    page = Page()
    page.feed(html)
    page.close()
    return page


@pytest.fixture
def artifact() -> Artifact:
    skills = tuple(
        Skill(name=n, description=f"Handles {n} work. {EVIL}" if n == "pdf" else f"Handles {n} work.")
        for n in ("pdf", "xlsx", "docx", "unused")
    )
    qs = QuerySet(
        queries=(
            Query(id="q1", text=f"convert this {EVIL} to pdf", expected_skill="pdf"),
            Query(id="q2", text="sum column B", expected_skill="xlsx", acceptable_skills=("docx",)),
            Query(id="q3", text="what's the weather", kind=QueryKind.out_of_scope),
        )
    )
    probes = [
        ProbeRecord(query_id="q1", attempt=1, invoked=("pdf",)),
        ProbeRecord(query_id="q1", attempt=2, invoked=("xlsx", "pdf")),
        ProbeRecord(query_id="q2", attempt=1, invoked=("docx", "xlsx")),
        ProbeRecord(query_id="q2", attempt=2, error=f"HTTP 529 {EVIL}"),
        ProbeRecord(query_id="q3", attempt=1),
        ProbeRecord(query_id="q3", attempt=2, invoked=("pdf",), cost_usd=0.0123),
    ]
    return score(qs, probes, Catalog(id="docs", skills=skills))


def test_html_numbers_equal_the_artifact(artifact: Artifact) -> None:
    page = parse(render_html(artifact))
    metrics = {e["data-metric"]: e for e in page.elements if e.get("data-metric")}
    assert set(metrics) == {*type(artifact.metrics).model_fields}
    for name, el in metrics.items():
        assert json.loads(el["data-value"] or "") == artifact.metric(name), name
        ci = artifact.intervals.get(name)
        if ci is not None:
            assert (float(el["data-lo"] or ""), float(el["data-hi"] or "")) == ci
        value = artifact.metric(name)
        shown = f"{value:.3f}" if value is not None else "n/a"
        assert shown in (el["_text"] or ""), name
    rows = {e["data-class"]: e for e in page.elements if e.get("data-class")}
    assert set(rows) == {"pdf", "xlsx", NO_SKILL}  # active classes; inactive ones listed apart
    for c in artifact.classes:
        if not c.active:
            continue
        row = {e["data-field"]: e for e in page.elements if e["_row"] == c.label and e.get("data-field")}
        fields = ("support", "predicted", "tp", "fp", "fn", "precision", "recall", "f1", "trajectory_recall")
        for field in fields:
            assert json.loads(row[field]["data-value"] or "") == getattr(c, field), (c.label, field)
        for field, ci in (("recall", c.recall_ci), ("precision", c.precision_ci)):
            assert ci is not None
            assert (float(row[field]["data-lo"] or ""), float(row[field]["data-hi"] or "")) == ci
            text = " ".join((row[field]["_text"] or "").split())
            assert f"{getattr(c, field):.3f} [{ci[0]:.3f}, {ci[1]:.3f}]" in text
    kinds = {e["data-kind"] for e in page.elements if e.get("data-kind")}
    assert kinds == {k.kind for k in artifact.by_kind}
    for k in artifact.by_kind:
        row = [e for e in page.elements if e.get("data-field") and e["_row_kind"] == k.kind]
        assert {e["data-field"]: json.loads(e["data-value"] or "") for e in row} == {
            "top1_accuracy": k.top1_accuracy,
            "abstention_rate": k.abstention_rate,
            "trajectory_reachability": k.trajectory_reachability,
        }
    counts = {e["data-count"]: int(e["data-value"] or "") for e in page.elements if e.get("data-count")}
    assert counts == {"probes": 6, "queries": 3, "scored": 5, "errors": 1}
    cells = {
        (e["data-cell-expected"], e["data-cell-predicted"]): int(e["data-value"] or "")
        for e in page.elements
        if e.get("data-cell-expected") is not None
    }
    assert cells == {(c.expected, c.predicted): c.count for c in artifact.confusion}
    collisions = {
        (e["data-collision-expected"], e["data-collision-predicted"]): int(e["data-value"] or "")
        for e in page.elements
        if e.get("data-collision-expected") is not None
    }
    assert collisions == {(c.expected, c.predicted): c.count for c in artifact.collisions}
    attractors = [
        (e["data-attractor"], int(e["data-value"] or "")) for e in page.find() if e.get("data-attractor")
    ]
    assert attractors == [(t.skill, t.fp) for t in artifact.top_attractors]
    assert [int(e["data-error-count"] or "") for e in page.elements if e.get("data-error-count")] == [1]


def test_untrusted_text_renders_as_text(artifact: Artifact) -> None:
    html = render_html(artifact)
    page = parse(html)
    assert page.tags.get("script", 0) == 0
    text = "".join(page.text)
    assert f"Handles pdf work. {EVIL}" in text  # the description, shown as text
    assert f"convert this {EVIL} to pdf" in text  # a collision's sample query
    assert f"HTTP 529 {EVIL}" in text  # an error message
    assert "&lt;script&gt;" in html


def test_html_is_self_contained(artifact: Artifact) -> None:
    html = render_html(artifact)
    page = parse(html)
    for tag in ("script", "link", "img", "iframe", "object"):
        assert page.tags.get(tag, 0) == 0, tag
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", html)
    assert "@import" not in html
    assert "url(" not in html
    assert page.tags["svg"] >= 1 + 2 * 3  # the heatmap and two interval bars per active class


def test_heatmap_keeps_the_most_confused_labels_when_large() -> None:
    names = [f"s{i:02d}" for i in range(60)]
    qs = QuerySet(queries=tuple(Query(id=f"q{i}", text="t", expected_skill=n) for i, n in enumerate(names)))
    probes = [ProbeRecord(query_id=f"q{i}", invoked=(names[(i + (i % 5 == 0)) % 60],)) for i in range(60)]
    art = score(qs, probes, Catalog(id="big", skills=tuple(Skill(name=n, description="d") for n in names)))
    page = parse(render_html(art))
    shown = {e["data-cell-expected"] for e in page.elements if e.get("data-cell-expected")}
    assert len(shown) <= 40
    confused = {c.expected for c in art.collisions}
    assert confused <= shown
    assert "artifact.json holds every cell" in "".join(page.text)


def test_markdown_summary(artifact: Artifact) -> None:
    md = render_markdown(artifact)
    assert "| Top-1 accuracy | 0.600 [0.231, 0.882] | 5 |" in md
    assert "| Out-of-scope detection | 0.500 [0.095, 0.905] | 2 |" in md
    assert "<script>" not in md
    assert "&lt;script&gt;" in md
    assert "**1 errored**" in md
    header = 0
    for line in md.splitlines():
        if not line.startswith("|"):
            header = 0
            continue
        pipes = len(re.findall(r"(?<!\\)\|", line))
        header = header or pipes
        assert pipes == header, line


def test_md_escape_keeps_tables_intact() -> None:
    assert md_escape("a|b\nc <b>") == "a\\|b c &lt;b&gt;"
    assert md_escape("x_y*z`") == "x\\_y\\*z\\`"


def test_scorecard_prints_rates_with_intervals(artifact: Artifact) -> None:
    buf = StringIO()
    print_scorecard(artifact, Console(file=buf, width=120, color_system=None))
    out = buf.getvalue()
    assert "top1_accuracy" in out
    assert "0.600 [0.231, 0.882]" in out
    assert "1 errored" in out
    assert "collision: pdf → xlsx × 1" in out


def test_fmt_rate() -> None:
    assert fmt_rate(0.8, (0.3755, 0.9638)) == "0.800 [0.376, 0.964]"
    assert fmt_rate(None, None) == "n/a"
    assert fmt_rate(0.5) == "0.500"


def test_reports_of_an_empty_study() -> None:
    qs = QuerySet(queries=(Query(id="q", text="t", expected_skill="a"),))
    art = score(qs, [ProbeRecord(query_id="q", error="boom")])
    page = parse(render_html(art))
    assert json.loads(page.find(data_metric="top1_accuracy")[0]["data-value"] or "") is None
    assert "No scored probe" in "".join(page.text)
    assert "| Top-1 accuracy | n/a |" in render_markdown(art)
