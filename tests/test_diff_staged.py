"""``skillreach diff A B --staged`` (issue 18): Δ top-1 tested after each stage of queries against the
two-sided O'Brien–Fleming boundary — stops when the verdict (better / worse) is known, reports the
probes saved; a diff with no change runs to its last look. Through the CLI against two studies of the
offline ``fake`` runtime, scripted so that B routes far better than A; and by a seeded simulation."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from skillreach.baselines.sequential import obf_boundaries, plan_stages, stage_order, staged_diff
from skillreach.cli import main
from tests.helpers import hang

SKILLREACH = Path(sys.executable).parent / "skillreach"
NAMES = {
    "charts": "Turn CSV tables into charts. Use when the user wants a chart from data.",
    "docker": "Write and fix Dockerfiles. Use for docker build problems.",
    "translate": "Translate text between languages. Use when the user asks for a translation.",
}
PER_SKILL = 16


def _skills(root: Path, edit: str = "") -> Path:
    for name, desc in NAMES.items():
        d = root / name
        d.mkdir(parents=True, exist_ok=True)
        text = desc + (edit if name == "charts" else "")
        (d / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {text}\n---\n# {name}\n", "utf-8")
    return root


def _script(path: Path, hit: float) -> Path:
    """The agent loads the expected skill on the first ``hit`` share of each skill's queries (by index);
    on the rest it answers without a skill."""
    entries: dict[str, object] = {"*": [], **{f"canary-{i}": list(NAMES) for i in (1, 2, 3)}}
    for name in NAMES:
        for i in range(PER_SKILL):
            entries[f"{name}-{i:02d}"] = [name] if (i * 7 % PER_SKILL) < hit * PER_SKILL else []
    path.write_text(json.dumps(entries), encoding="utf-8")
    return path


def _study(root: Path, name: str, skills: Path, script: Path) -> Path:
    (root / f"{name}.toml").write_text(
        f'skills = ["{skills}"]\nqueries = "{root / "queries.json"}"\nruntime = "fake"\nattempts = 1\n'
        f'[runtime_options]\nscript = "{script}"\n',
        encoding="utf-8",
    )
    assert main(["run", "--config", str(root / f"{name}.toml"), "--out", str(root / name)]) == 0
    return root / name


@pytest.fixture(scope="module")
def arms(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("staged-diff")
    queries = [
        {"id": f"{n}-{i:02d}", "text": f"help with {n} job {i}", "expected_skill": n, "kind": "implicit"}
        for n in NAMES
        for i in range(PER_SKILL)
    ]
    (root / "queries.json").write_text(json.dumps({"catalog_id": "all", "queries": queries}), "utf-8")
    before = _skills(root / "skills-a")
    after = _skills(root / "skills-b", edit=" Also plots, graphs and dashboards.")
    same = _skills(root / "skills-c", edit=" Nothing new.")
    _study(root, "A", before, _script(root / "a.json", 0.3))
    _study(root, "B", after, _script(root / "b.json", 1.0))
    _study(root, "C", same, _script(root / "c.json", 0.3))  # the edit changed no routing
    return root


def test_a_clear_improvement_stops_early_and_says_what_it_saved(
    arms: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    args = ["diff", str(arms / "A"), str(arms / "B"), "--vary", "description", "--skill", "charts"]
    assert main([*args, "--staged", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    st = result["staged"]
    assert result["verdict"] == "better"  # the fixed diff agrees
    assert st["verdict"] == "better"
    assert st["looks_planned"] == 4
    assert st["stages"] == [12, 24, 36, 48]
    assert st["decided_at"] == st["looks_taken"] == 2  # 24 of 48 queries decide it
    assert st["cases_used"] == st["stages"][st["looks_taken"] - 1]
    assert st["probes_planned"] == 2 * 48  # both arms, one attempt each
    assert st["probes_used"] == 2 * st["cases_used"]
    first = st["looks"][0]
    assert first["decision"] == "go on"  # the first look needs overwhelming evidence
    last = st["looks"][-1]
    assert last["ci"][0] > 0
    # the repeated interval is wider than the fixed one at the same look: c′ₖ > t(0.975)
    assert all(lk["critical"] > 2.0 for lk in st["looks"])

    # the terminal output: the stage table and the sentence with the probes saved
    assert main([*args, "--staged"]) == 0
    out = capsys.readouterr().out
    saved = 96 - st["probes_used"]
    assert (
        f"staged: better at look {st['looks_taken']} of 4 ({st['cases_used']} of 48 queries, "
        f"{st['probes_used']} of 96 probes; {saved} probes saved, {100 * saved / 96:.0f} %)"
    ) in out
    assert "O'Brien–Fleming" in out

    # without --staged: no staged section
    assert main([*args, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["staged"] is None


def test_no_change_runs_every_look_and_the_command_a_user_runs(arms: Path) -> None:
    md, html = arms / "diff.md", arms / "diff.html"
    out = hang.finish(
        [str(SKILLREACH), "diff", str(arms / "A"), str(arms / "C"), "--vary", "description", "--staged",
         "--looks", "3", "--json", "--markdown", str(md), "--html", str(html)],
        limit_s=120,
    )
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    st = json.loads(out.stdout)["staged"]
    assert st["verdict"] == "no detectable change"
    assert st["looks_taken"] == st["looks_planned"] == 3
    assert st["decided_at"] is None
    assert st["probes_used"] == st["probes_planned"] == 96
    assert [lk["decision"] for lk in st["looks"]] == ["go on", "go on", "no detectable change"]
    text = md.read_text(encoding="utf-8")
    assert "staged: no detectable change at look 3 of 3" in text
    assert "0 probes saved" in text
    page = html.read_text(encoding="utf-8")
    assert 'data-staged-verdict="no detectable change"' in page
    assert 'data-probes-saved="0"' in page

    bad = hang.finish([str(SKILLREACH), "diff", str(arms / "A"), str(arms / "C"), "--staged",
                       "--looks", "0"], limit_s=60)
    assert bad.returncode == 2
    assert "Traceback" not in bad.stderr
    assert "--looks" in bad.stderr


def test_the_stages_follow_the_seeded_order_and_the_obf_boundaries() -> None:
    rng = np.random.default_rng(3)
    diffs = {f"q{i:02d}": float(rng.choice([-1.0, 0.0, 1.0])) for i in range(30)}
    st = staged_diff(diffs, dict.fromkeys(diffs, 2), looks=3, seed=5)
    order = stage_order(list(diffs), 5)
    assert st.stages == plan_stages(30, 3) == [10, 20, 30]
    z = obf_boundaries([1 / 3, 2 / 3, 1.0])
    for lk, upto, zk in zip(st.looks, st.stages, z, strict=False):
        x = np.array([diffs[c] for c in order[:upto]])
        from scipy import stats as sps

        crit = sps.t.isf(sps.norm.sf(zk), upto - 1)
        half = crit * x.std(ddof=1) / np.sqrt(upto)
        assert lk.mean_diff == pytest.approx(x.mean())
        assert lk.critical == pytest.approx(crit)
        assert lk.ci[0] == pytest.approx(max(-1.0, x.mean() - half))
        assert lk.ci[1] == pytest.approx(min(1.0, x.mean() + half))
    empty = staged_diff({}, {})
    assert empty.verdict == "no pairs"
    assert empty.probes_saved == 0


def _simulate(p_a: float, p_b: float, rng: np.random.Generator, n: int = 60) -> dict[str, float]:
    a = rng.random(n) < p_a
    b = rng.random(n) < p_b
    return {f"q{i}": float(b[i]) - float(a[i]) for i in range(n)}


def test_simulation_false_verdicts_stay_within_alpha_and_true_changes_cost_fewer_probes() -> None:
    """1,000 seeded diffs of 60 queries: with no true change a staged verdict other than *no detectable
    change* is rare (≤ 5 % within Monte-Carlo error; measured 3.6 %); with B routing 0.4 better
    (0.3 → 0.7) the staged diff spends ≥ 30 % fewer probes than the fixed one (measured 39 %) and
    reaches *better* as often within 2 points (99.3 % vs 99.7 %); at 0.3 better (0.4 → 0.7) it still
    saves ≥ 20 % (measured 25 %, power 90.6 % vs 91.5 %)."""
    rng = np.random.default_rng(18)
    runs = 1000
    false = sum(staged_diff(_simulate(0.5, 0.5, rng), {}, seed=i).verdict != "no detectable change"
                for i in range(runs))
    mc = 2 * np.sqrt(0.05 * 0.95 / runs)
    assert false / runs <= 0.05 + mc

    from scipy import stats as sps

    for p_a, p_b, spend in ((0.3, 0.7, 0.70), (0.4, 0.7, 0.80)):
        used, staged_better, fixed_better = 0, 0, 0
        for i in range(runs):
            d = _simulate(p_a, p_b, rng)
            st = staged_diff(d, dict.fromkeys(d, 2), seed=i)
            used += st.probes_used
            staged_better += st.verdict == "better"
            x = np.array(list(d.values()))
            half = sps.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / np.sqrt(len(x))
            fixed_better += x.mean() - half > 0
        assert used / (runs * 120) <= spend
        assert abs(staged_better - fixed_better) / runs <= 0.02
