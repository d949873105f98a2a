"""The team kit through the real tools, on a temporary repository of real public skills: the wheel
installed into a clean venv, ``skillreach init``, the GitHub Action's steps run as a script (no GitHub),
and the pre-commit hooks run by the real ``pre-commit``."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO
from tests.helpers import hang
from tests.helpers.action import run_action

UV = Path(sys.executable).with_name("uv")
PRE_COMMIT = Path(sys.executable).with_name("pre-commit")
SKILLS = ("canvas-design", "brand-guidelines", "mcp-builder")


def _run(
    args: list[str], cwd: Path, env: dict[str, str], check: bool = True
) -> hang.Outcome:
    out = hang.finish(args, cwd=cwd, env=env, limit_s=600)
    if check and out.returncode != 0:
        raise AssertionError(f"{' '.join(args)} → {out.returncode}\n{out.stdout}\n{out.stderr}")
    return out


@pytest.fixture(scope="module")
def kit(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The wheel of this checkout installed by pip into a clean venv, as the README's first step says."""
    if not UV.is_file():
        pytest.skip("uv is not installed beside the test interpreter (make .venv/.installed installs it)")
    base = tmp_path_factory.mktemp("kit")
    dist = base / "dist"
    # built from a copy: setuptools leaves build/ and *.egg-info in the tree it builds
    src = base / "src"
    shutil.copytree(REPO, src, symlinks=True, ignore=shutil.ignore_patterns(
        ".venv*", ".git", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", ".skillreach", ".prefect",
        "runs", ".hypothesis",
    ))
    _run([str(UV), "build", "--wheel", "--quiet", "-o", str(dist), str(src)], src, dict(os.environ))
    wheel = next((base / "dist").glob("skillreach-*.whl"))
    venv = base / "venv"
    # what the README says a user types: the standard library's venv and that venv's own pip (which
    # compiles bytecode), not uv
    _run([sys.executable, "-m", "venv", str(venv)], base, dict(os.environ))
    pip_env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "VIRTUAL_ENV"))}
    out = _run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         str(wheel)],
        base, pip_env, check=False,
    )
    if out.returncode != 0 and re.search(r"(?i)connect|network|dns|resolve host|offline", out.stderr):
        pytest.skip(f"the package index cannot be reached: {out.stderr.strip().splitlines()[-1]}")
    assert out.returncode == 0, out.stderr
    tools = base / "tools"
    tools.mkdir()
    (tools / "uv").symlink_to(UV)
    env = {
        k: v for k, v in os.environ.items()
        if not k.startswith(("SKILLREACH_", "VIRTUAL_ENV", "PYTHON", "GITHUB_", "ANTHROPIC_", "OPENAI_"))
    }
    env.update(
        PATH=os.pathsep.join([str(venv / "bin"), str(tools), "/usr/local/bin", "/usr/bin", "/bin"]),
        PREFECT_HOME=str(base / "prefect-home"),
        GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com",
        GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com",
    )
    env.pop("PREFECT_API_URL", None)
    return {"wheel": wheel, "venv": venv, "env": env, "base": base}


def adopt_steps() -> list[list[str]]:
    """The commands of the README's "Adopt it in your repository" block, split as a shell would."""
    import shlex

    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("## Adopt it in your repository", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"\n\n((?:    \S.*\n)+)", section)
    assert block, "the Adopt section has no indented block of commands"
    return [shlex.split(line.split("#", 1)[0]) for line in block.group(1).splitlines()]


def _repo(corpora: Path, root: Path, env: dict[str, str]) -> Path:
    for name in SKILLS:
        src = corpora / "anthropics__skills" / name
        if not (src / "SKILL.md").is_file():
            pytest.skip(f"{src} is not in the corpora")
        shutil.copytree(src, root / "skills" / name)
    _run(["git", "init", "-q", "-b", "main", str(root)], root.parent, env)
    return root


def test_wheel_init_action_and_precommit_on_real_skills(
    kit: dict[str, Any], corpora: Path, tmp_path: Path
) -> None:
    env = dict(kit["env"])
    repo = _repo(corpora, tmp_path / "repo", env)
    sr = ["skillreach"]
    assert _run([*sr, "--version"], repo, env).stdout.startswith("skillreach ")
    # the README's "Adopt it in your repository" steps, as written (pip install is the kit's wheel)
    steps = adopt_steps()
    assert [s[:2] for s in steps] == [
        ["pip", "install"], ["skillreach", "init"], ["skillreach", "lint"], ["skillreach", "queries"],
        ["skillreach", "run"], ["skillreach", "baseline"],
    ], steps
    for step in steps[1:]:
        args = [{"NAME": "canvas-design"}.get(a, a.replace("runs/RUN/", "runs/base/")) for a in step]
        if args[1] == "run":  # everything so far committed: what the study writes must stay ignored
            _run(["git", "add", "-A"], repo, env)
            _run(["git", "commit", "-qm", "skills and skillreach"], repo, env)
            args += ["--out", "runs/base"]
        out = _run(args, repo, env).stdout
        if args[1] == "init":
            assert "wrote .github/workflows/skillreach.yml" in out
        if args[1] == "run":
            assert "runs/" in (repo / ".gitignore").read_text(encoding="utf-8")
            status = _run(["git", "status", "--porcelain"], repo, env).stdout
            assert status == "", "runs/ and .skillreach/ are ignored"
    assert (repo / "baselines").is_dir()
    # a pull request that edits a description
    _run(["git", "checkout", "-q", "-b", "edit"], repo, env)
    md = repo / "skills" / "canvas-design" / "SKILL.md"
    md.write_text(md.read_text(encoding="utf-8").replace("description: ", "description: Posters too. ", 1),
                  encoding="utf-8")
    _run(["git", "commit", "-qam", "edit canvas-design"], repo, env)

    summary = tmp_path / "summary.md"
    gh_env = {**env, "GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)}
    inputs = {
        "skills": "skills", "queries": "evals/queries.json", "config": "skillreach.toml",
        "runtime": "keyword", "scope": "all", "lenient": "true", "max-cost": "1", "since": "main",
        "install": str(kit["wheel"]), "anthropic-api-key": "sk-ant-test-not-a-key",
    }
    temp = tmp_path / "runner-temp"
    temp.mkdir()
    steps = run_action(inputs, repo, gh_env, temp)
    by_name = {s["name"]: s for s in steps}
    report = "\n".join(f"{s['name']}: ran={s['ran']} rc={s['rc']}\n{s['out']}" for s in steps)
    for name in ("Install skillreach", "Lint skills", "Verify the query set",
                 "Check changed skills against their baselines", "Step summary"):
        assert by_name[name]["ran"], report
        assert by_name[name]["rc"] == 0, report
    assert "skillreach " in by_name["Install skillreach"]["out"]
    check_out = by_name["Check changed skills against their baselines"]["out"]
    assert "1 skill gated on 7 of 7 cases (7 probes, --scope all) → exit 0" in check_out, report  # quiet
    assert "sk-ant-test-not-a-key" not in report
    text = summary.read_text(encoding="utf-8")
    assert "## skillreach check" in text
    assert "canvas-design" in text
    assert "### skillreach lint (exit 0)" in text

    # a broken SKILL.md: lint fails with an annotation, check does not run, the summary still does
    bad = repo / "skills" / "brand-guidelines" / "SKILL.md"
    bad.write_text(bad.read_text(encoding="utf-8").replace("name: brand-guidelines", "name: Brand Guide", 1),
                   encoding="utf-8")
    summary.unlink()
    steps = run_action(inputs | {"install": str(kit["wheel"])}, repo, gh_env, temp)
    by_name = {s["name"]: s for s in steps}
    assert by_name["Lint skills"]["rc"] == 1
    assert "::error file=" in by_name["Lint skills"]["out"]
    assert not by_name["Check changed skills against their baselines"]["ran"]
    assert by_name["Step summary"]["ran"]
    assert by_name["Step summary"]["rc"] == 0
    assert "### skillreach lint (exit 1)" in summary.read_text(encoding="utf-8")
    bad.write_text(bad.read_text(encoding="utf-8").replace("name: Brand Guide", "name: brand-guidelines", 1),
                   encoding="utf-8")

    # pre-commit: the hooks of .pre-commit-hooks.yaml, run by the real pre-commit on a commit
    if not PRE_COMMIT.is_file():
        pytest.skip("pre-commit is not installed (it is in the test extra)")
    hooks = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    assert {h["id"] for h in hooks} == {"skillreach-lint", "skillreach-listing-budget"}
    local = []
    for hook in hooks:
        assert hook["language"] == "python"  # installs the package from the hook repository
        # the same hook, with skillreach from the wheel's venv on PATH instead of pre-commit's own venv
        local.append({**hook, "language": "system", "args": [*hook.get("args", []), "--budget", "300"]}
                     if hook["id"] == "skillreach-listing-budget" else {**hook, "language": "system"})
    (repo / ".pre-commit-config.yaml").write_text(
        yaml.safe_dump({"repos": [{"repo": "local", "hooks": local}]}), encoding="utf-8"
    )
    pc_env = {**env, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home")}
    pc = str(PRE_COMMIT)
    _run(["git", "add", "-A"], repo, env)
    _run(["git", "commit", "-qm", "pre-commit config", "--no-verify"], repo, env)
    _run([pc, "install"], repo, pc_env)
    # a commit that touches no SKILL.md: both hooks are skipped
    (repo / "README.md").write_text("skills\n", encoding="utf-8")
    _run(["git", "add", "README.md"], repo, pc_env)
    ok = _run(["git", "commit", "-qm", "readme"], repo, pc_env)
    assert "skillreach lint" in ok.stdout + ok.stderr
    # an invalid name in a changed SKILL.md: the lint hook stops the commit
    bad.write_text(bad.read_text(encoding="utf-8").replace("name: brand-guidelines", "name: Brand Guide", 1),
                   encoding="utf-8")
    _run(["git", "add", "-A"], repo, pc_env)
    refused = _run(["git", "commit", "-qm", "bad name"], repo, pc_env, check=False)
    assert refused.returncode != 0
    assert "skillreach lint (changed SKILL.md files)" in refused.stdout + refused.stderr
    assert "Failed" in refused.stdout + refused.stderr
    # fixed name, but the whole listing is over a 300-character budget: the budget hook stops it
    fixed = bad.read_text(encoding="utf-8").replace("name: Brand Guide", "name: brand-guidelines", 1)
    bad.write_text(fixed.replace("description: ", "description: Slide decks too. ", 1), encoding="utf-8")
    _run(["git", "add", "-A"], repo, pc_env)
    over = _run(["git", "commit", "-qm", "fixed"], repo, pc_env, check=False)
    text = over.stdout + over.stderr
    assert over.returncode != 0, text
    assert re.search(r"skillreach lint \(changed SKILL\.md files\)\.+Passed", text), text
    assert re.search(r"skillreach listing budget \(whole catalog\)\.+Failed", text), text
    assert "budget" in text
    # within budget: the commit goes through
    cfg = (repo / ".pre-commit-config.yaml").read_text(encoding="utf-8").replace("'300'", "'100000'")
    (repo / ".pre-commit-config.yaml").write_text(cfg, encoding="utf-8")
    _run(["git", "add", "-A"], repo, pc_env)
    _run(["git", "commit", "-qm", "fixed"], repo, pc_env)


def test_example_workflow_is_what_init_writes() -> None:
    from skillreach.cli.project_cmds import ACTION_REF, workflow_yaml

    example = (REPO / "examples" / "github-workflow.yml").read_text(encoding="utf-8")
    assert example == workflow_yaml("skills", "evals/queries.json", ACTION_REF)
    spec = yaml.safe_load(example)
    step = spec["jobs"]["skillreach"]["steps"][-1]
    action_inputs = yaml.safe_load((REPO / "action.yml").read_text(encoding="utf-8"))["inputs"]
    assert set(step["with"]) <= set(action_inputs)


# -- the lean default install ----------------------------------------------------------------------

OPTIONAL = (
    "numba", "llvmlite", "pyarrow", "psycopg", "google.antigravity", "openai", "kneed", "sklearn",
    "statsmodels",
)
"""What the default install leaves out (extras fast, postgres, antigravity, openai; the tests' own)."""
DEFAULT = ("scipy", "anthropic", "aiohttp")
"""What the design card puts in it: the statistics and sparse products, the anthropic runtime's SDK and
its transport."""

_FALLBACKS = r"""
import json, sys
from pathlib import Path
from skillreach.scoring import artifact as art
from skillreach.scoring.table import read_columns
from skillreach.skills import load_skills
from skillreach.skills.bm25 import rivals

out = Path(sys.argv[1])
# pyarrow missing: the columnar reader hands every log to the block reader
assert read_columns((out / "probes.jsonl").read_bytes(), source="probes.jsonl") is None
# ... and an artifact is written by the text path, from any size on: the same digest
a = art.read_artifact(out / "artifact.json")
art._ARROW_ROWS = 1
again = art.write_artifact(a, out / "again.json")
assert art.read_artifact(out / "again.json").digest == a.digest
# numba missing: the compiled screen asked for is the sparse screen, the same rivals
skills = load_skills([sys.argv[2]])
fast = rivals(skills, top=3, compiled=True)
assert fast == rivals(skills, top=3, compiled=False)
assert len(fast) == len(skills)
print("fallbacks ok")
"""


def test_default_install_is_lean_and_every_command_works_without_the_extras(
    kit: dict[str, Any], corpora: Path, tmp_path: Path
) -> None:
    env = dict(kit["env"])
    py = str(kit["venv"] / "bin" / "python")
    missing = _run([py, "-c", "import importlib.util as u, sys; print(' '.join(m for m in sys.argv[1:] "
                    "if u.find_spec(m.split('.')[0]) is None or (m == 'google.antigravity' "
                    "and u.find_spec('google') is not None and u.find_spec(m) is None)))", *OPTIONAL],
                   tmp_path, env).stdout.split()
    assert set(missing) == set(OPTIONAL), f"the default install pulls in {set(OPTIONAL) - set(missing)}"
    present = _run([py, "-c", "import importlib.util as u, sys; print(' '.join(m for m in sys.argv[1:] "
                    "if u.find_spec(m) is not None))", *DEFAULT], tmp_path, env).stdout.split()
    assert present == list(DEFAULT), f"the default install lacks {set(DEFAULT) - set(present)}"
    site = Path(_run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp_path,
                     env).stdout.strip())
    # what du counts of the venv pip filled, bytecode and pip's own copy of itself included
    size = sum(f.lstat().st_blocks * 512 for f in site.rglob("*") if not f.is_symlink())
    # 580 MB measured with scipy and anthropic[aiohttp] back in the defaults (issue 42; 372 MB without)
    assert size <= 600e6, f"the default install takes {size / 1e6:.0f} MB (goal with pip: ≤ 600 MB)"

    # every command that needs no network, from the wheel without the extras
    sr = "skillreach"
    _run([sr, "run", "--out", "ex"], tmp_path, env)  # the bundled example, offline
    ex = tmp_path / "ex"
    _run([sr, "score", "--queries", str(ex / "query_set.json"), "--probes", str(ex / "probes.jsonl"),
          "--out", "scored/", "--html", "scored/report.html", "-q"], tmp_path, env)
    _run([sr, "report", "scored/artifact.json", "--markdown", "-", "-q"], tmp_path, env)
    kdense = corpora / "K-Dense-AI__claude-scientific-skills"
    skills_dir = kdense if kdense.is_dir() else corpora / "anthropics__skills"
    _run([sr, "overlap", str(skills_dir), "--top", "3", "--json"], tmp_path, env)
    _run([sr, "cluster", str(skills_dir), "--target-size", "20"], tmp_path, env)
    _run([sr, "doctor"], tmp_path, env)
    _run([sr, "config", "show"], tmp_path, env)
    assert _run([py, "-c", _FALLBACKS, str(ex), str(skills_dir)], tmp_path, env).stdout.strip() == (
        "fallbacks ok"
    )
    # a statistics command: McNemar's exact test and the intervals, scipy's
    _run([sr, "run", "--runtime", "retriever", "--out", "exr"], tmp_path, env)
    compared = _run([sr, "diff", "ex", "exr", "--vary", "runtime"], tmp_path, env).stdout
    assert "McNemar exact p = " in compared, compared
    # a runtime whose SDK is an extra: one line naming it, exit 2
    for runtime, extra in (("openai-compatible", "openai"),):
        keyed = {**env, "ANTHROPIC_API_KEY": "sk-ant-test", "OPENAI_API_KEY": "sk-test"}
        args = [sr, "run", "--runtime", runtime, "--model", "m", "--out", f"sdk-{runtime}"]
        sdk = _run(args, tmp_path, keyed, check=False)
        assert sdk.returncode == 2, sdk.stderr
        assert sdk.stderr.strip().splitlines()[-1].endswith(f"pip install 'skillreach[{extra}]'"), sdk.stderr
        assert "Traceback" not in sdk.stderr
    # the design card's runtime with no extra: a study through the anthropic runtime from the wheel
    from skillreach.example import EXAMPLE_SKILLS
    from tests.fakes.messages_api import MessagesAPI, ScriptResponder

    names = sorted(p.name for p in Path(EXAMPLE_SKILLS).iterdir() if (p / "SKILL.md").is_file())
    # a model that loads the skill a query names (the canary's queries name one), else the first
    with MessagesAPI(ScriptResponder({n: [n] for n in names}, default=[names[0]])) as api:
        keyed = {**env, "ANTHROPIC_API_KEY": "sk-ant-test", "ANTHROPIC_BASE_URL": api.base_url}
        _run([sr, "run", "--runtime", "anthropic", "--model", "claude-sonnet-4-5", "--out", "sdk-anthropic"],
             tmp_path, keyed)
        assert api.calls, "the anthropic runtime sent nothing"
    probed = (tmp_path / "sdk-anthropic" / "probes.jsonl").read_text(encoding="utf-8").splitlines()
    assert probed
    assert all(json.loads(line).get("error") is None for line in probed), probed[:2]
    doctor = json.loads(_run([sr, "doctor", "--json"], tmp_path, env).stdout)
    assert "pip install 'skillreach[openai]'" in json.dumps(doctor), doctor
    anthropic_status = next(r for r in doctor["runtimes"] if r["name"] == "anthropic")
    assert anthropic_status["detail"].startswith("anthropic installed"), anthropic_status  # no extra
    # PostgreSQL without its driver: one line naming the extra
    pg = {**env, "SKILLREACH_DATABASE_URL": "postgresql+psycopg://u:secret@127.0.0.1:1/x"}
    worker = _run([sr, "worker"], tmp_path, pg, check=False)
    assert worker.returncode == 2, worker.stderr
    assert "pip install 'skillreach[postgres]'" in worker.stderr
    assert "secret" not in worker.stderr
    study = _run([sr, "run", "--out", "pg"], tmp_path, pg, check=False)
    assert study.returncode == 2, study.stderr
    assert "pip install 'skillreach[postgres]'" in study.stderr
    assert len(study.stderr.strip().splitlines()) == 1


# -- serve from the installed wheel ----------------------------------------------------------------


@pytest.mark.integration
def test_serve_from_the_wheel_in_an_unrelated_folder(kit: dict[str, Any], tmp_path: Path) -> None:
    import signal
    import socket
    import time

    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in kit["env"].items() if k != "PREFECT_HOME"}  # the default: the working folder
    folder = tmp_path / "service"
    folder.mkdir()
    log = tmp_path / "serve.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen(["skillreach", "serve", "--port", str(port)], cwd=folder, env=env,
                                stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = hang.Deadline(420)
        while not deadline.expired():
            text = log.read_text(encoding="utf-8", errors="replace")
            if "serve: worker on pool" in text or proc.poll() is not None:
                break
            time.sleep(1)
        text = log.read_text(encoding="utf-8", errors="replace")
        assert "serve: worker on pool" in text, text
        api = f"http://127.0.0.1:{port}/api"
        names = {d["name"] for d in httpx.post(f"{api}/deployments/filter", json={}, timeout=30).json()}
        spec = yaml.safe_load((REPO / "prefect.yaml").read_text(encoding="utf-8"))
        assert names == {d["name"] for d in spec["deployments"]}
        found = httpx.post(f"{api}/deployments/filter", json={}, timeout=30).json()
        site = next((kit["venv"] / "lib").glob("python3*/site-packages"))
        for d in found:
            assert d["entrypoint"].startswith(str(site / "skillreach" / "flows")), d["entrypoint"]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
    state = folder / ".skillreach" / "prefect"
    assert (state / "prefect.yaml").is_file()
    assert (folder / ".skillreach" / "logs" / "server.log").is_file()  # the service log, in the folder
    site = next((kit["venv"] / "lib").glob("python3*/site-packages"))
    written = [p for p in site.rglob("*") if p.name in (".prefect", ".skillreach", "prefect.db")]
    assert not written, f"serve wrote into site-packages: {written}"


# -- pre-commit's own install path -----------------------------------------------------------------


def test_precommit_installs_the_hooks_itself_from_the_repository_at_a_commit(
    corpora: Path, tmp_path: Path
) -> None:
    """What a team's ``.pre-commit-config.yaml`` does: ``repo:`` this repository, ``rev:`` a commit. The
    real ``pre-commit`` clones it, builds its own virtualenv and pip-installs the package from the clone
    (``language: python``; the default dependencies from the package index), then runs the hooks — with
    no skillreach on PATH. The repository here is a git copy of this checkout's files, committed."""
    if not PRE_COMMIT.is_file():
        pytest.skip("pre-commit is not installed (it is in the test extra)")
    env = {
        k: v for k, v in os.environ.items()
        if not k.startswith(("SKILLREACH_", "VIRTUAL_ENV", "PYTHON", "GITHUB_", "PRE_COMMIT"))
    }
    env.update(
        PATH=os.pathsep.join(["/usr/local/bin", "/usr/bin", "/bin"]),
        PRE_COMMIT_HOME=str(tmp_path / "pre-commit-home"),
        GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com",
        GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com",
    )
    assert shutil.which("skillreach", path=env["PATH"]) is None, "skillreach must come from pre-commit's env"
    hooks_repo = tmp_path / "skillreach"
    shutil.copytree(REPO, hooks_repo, symlinks=True, ignore=shutil.ignore_patterns(
        ".venv*", ".git", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", ".skillreach", ".prefect",
        "runs", ".hypothesis",
    ))
    _run(["git", "init", "-q", "-b", "main", str(hooks_repo)], tmp_path, env)
    _run(["git", "add", "-A"], hooks_repo, env)
    _run(["git", "commit", "-qm", "skillreach"], hooks_repo, env)
    rev = _run(["git", "rev-parse", "HEAD"], hooks_repo, env).stdout.strip()

    repo = _repo(corpora, tmp_path / "repo", env)
    config = {"repos": [{"repo": str(hooks_repo), "rev": rev, "hooks": [
        {"id": "skillreach-lint"},
        {"id": "skillreach-listing-budget", "args": ["skills", "--budget", "100000"]},
    ]}]}
    (repo / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    _run(["git", "add", "-A"], repo, env)
    _run(["git", "commit", "-qm", "skills"], repo, env)
    pc = str(PRE_COMMIT)
    built = _run([pc, "install-hooks"], repo, env, check=False)
    said = built.stdout + built.stderr
    if built.returncode != 0 and re.search(r"(?i)connect|network|resolve|offline", said):
        pytest.skip("the package index cannot be reached: pre-commit cannot build its environment")
    assert built.returncode == 0, built.stdout + built.stderr
    envs = list((tmp_path / "pre-commit-home").glob("repo*/py_env-*/bin/skillreach"))
    assert envs, "pre-commit built no environment holding skillreach"
    version = _run([str(envs[0]), "--version"], repo, env).stdout
    assert version.startswith("skillreach "), version

    _run([pc, "install"], repo, env)
    ran = _run([pc, "run", "--all-files"], repo, env)
    assert re.search(r"skillreach lint \(changed SKILL\.md files\)\.+Passed", ran.stdout), ran.stdout
    assert re.search(r"skillreach listing budget \(whole catalog\)\.+Passed", ran.stdout), ran.stdout
    # an invalid name in a changed SKILL.md: the hook from pre-commit's own env stops the commit
    bad = repo / "skills" / "brand-guidelines" / "SKILL.md"
    bad.write_text(bad.read_text(encoding="utf-8").replace("name: brand-guidelines", "name: Brand Guide", 1),
                   encoding="utf-8")
    _run(["git", "add", "-A"], repo, env)
    refused = _run(["git", "commit", "-qm", "bad name"], repo, env, check=False)
    text = refused.stdout + refused.stderr
    assert refused.returncode != 0, text
    assert re.search(r"skillreach lint \(changed SKILL\.md files\)\.+Failed", text), text
    assert "brand-guidelines/SKILL.md" in text, text
