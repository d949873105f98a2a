"""The layering holds: the domain package imports neither Prefect, network clients, nor the mapped
orchestration packages (flows, tasks, runtimes, deployments); the wheel installs them under the
``skillreach`` namespace only."""

from __future__ import annotations

import ast
import pkgutil
import subprocess
import sys
import tomllib
from pathlib import Path

import skillreach

FORBIDDEN = ("prefect", "anthropic", "openai", "httpx", "aiohttp")
ORCHESTRATION = ("skillreach.runtimes", "skillreach.tasks", "skillreach.flows", "skillreach.deployments")
REPO = Path(__file__).resolve().parents[1]


def domain_modules() -> list[str]:
    return [
        m.name
        for m in pkgutil.walk_packages(skillreach.__path__, "skillreach.")
        if not m.name.startswith(("skillreach.cli", "skillreach.store.migrations", *ORCHESTRATION))
    ]


def test_domain_modules_import_no_orchestrator_network_client_or_runtime() -> None:
    modules = domain_modules()
    assert {"skillreach.scoring.scorer", "skillreach.study.runner", "skillreach.study.config"} <= set(modules)
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        f"top = {{n.split('.')[0] for n in sys.modules}} & set({FORBIDDEN!r})\n"
        f"ours = {{n for n in sys.modules if n.startswith({ORCHESTRATION!r})}}\n"
        "print(' '.join(sorted(top | ours)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"domain modules pulled in: {out.stdout.strip()}"


def test_the_wheel_installs_no_generic_top_level_package() -> None:
    """flows/, tasks/, runtimes/ and deployments/ are mapped under skillreach; nothing else is top level."""
    tool = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    tops = {p.split(".")[0] for p in tool["packages"]}
    assert tops == {"skillreach"}
    mapping = tool["package-dir"]
    assert {k: v for k, v in mapping.items() if k in ORCHESTRATION} == {
        "skillreach.runtimes": "runtimes", "skillreach.tasks": "tasks", "skillreach.flows": "flows",
        "skillreach.deployments": "deployments",
    }
    for folder in mapping.values():
        assert (REPO / folder / "__init__.py").is_file()


def test_the_wheel_lists_every_package_of_the_checkout() -> None:
    """``packages`` is an explicit list: a wing left out of it is missing from the wheel (an installed
    ``skillreach ingest`` or a worker's ``ingest`` flow run would fail to import it)."""
    tool = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    found = {
        ".".join(p.parent.relative_to(REPO).parts)
        for p in (REPO / "skillreach").rglob("__init__.py")
        if "versions" not in p.parts and "__pycache__" not in p.parts
    }
    assert found - set(tool["packages"]) == set()


def test_no_task_reads_the_settings_from_the_environment() -> None:
    """Tasks take the study's resolved configuration; only where a study enters are settings loaded."""
    offenders = [p.name for p in (REPO / "tasks").glob("*.py") if "load_settings" in p.read_text("utf-8")]
    assert offenders == []


HEAVY = ("prefect", "pydantic", "pydantic_settings", "scipy", "numpy", "asyncio", "jinja2", "yaml", "rich")


def test_the_cli_starts_without_heavy_modules() -> None:
    """``skillreach --help`` and every command's start pay only for typer: each command imports what
    it needs when it runs (``python -X importtime -c 'import skillreach.cli'`` shows the rest)."""
    code = (
        "import sys, skillreach.cli\n"
        f"print(' '.join(sorted({{n.split('.')[0] for n in sys.modules}} & set({HEAVY!r}))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"importing the CLI pulled in: {out.stdout.strip()}"


# ------------------------------------------------------------------------------------------- the wings
#
# The product's files, read from their own imports (every ``import``, at the top, inside a function or
# under ``TYPE_CHECKING``): each wing of ``skillreach/`` serves one stage of the pipeline, and a file may
# import only from its own wing or from the wings below it. The ground floor (``models``, ``errors``,
# ``settings``, ``_gc``, ``_io``, ``example``) imports no wing.

WINGS: tuple[tuple[str, int], ...] = (
    ("skillreach._io", 0),
    ("skillreach.example", 0),
    ("skillreach.skills", 1),
    ("skillreach.queries", 2),
    ("skillreach.study", 3),
    ("skillreach.scoring", 4),
    ("skillreach.baselines", 5),
    ("skillreach.author", 6),
    ("skillreach.service", 6),
    ("skillreach.store", 6),
    ("skillreach.live", 6),
    ("skillreach.reports", 7),
    ("skillreach.ui", 8),
    ("skillreach.runtimes", 8),
    ("skillreach.tasks", 9),
    ("skillreach.flows", 10),
    ("skillreach.deployments", 11),
    ("skillreach.cli", 12),
)
"""(package, floor): a file may import from its own floor and the floors below, never above."""
MAPPED = {
    "flows": "skillreach.flows",
    "tasks": "skillreach.tasks",
    "runtimes": "skillreach.runtimes",
    "deployments": "skillreach.deployments",
}
MAX_TOP_MODULES = 10
MAX_LINES = 1_000


def _product_files() -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, is a package's ``__init__``), for every product file."""
    files: dict[str, tuple[Path, bool]] = {}
    for folder in ("skillreach", *MAPPED):
        for path in (REPO / folder).rglob("*.py"):
            if "versions" in path.relative_to(REPO).parts:  # numbered migrations: frozen once landed
                continue
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            if parts[0] in MAPPED:
                parts = [*MAPPED[parts[0]].split("."), *parts[1:]]
            is_pkg = parts[-1] == "__init__"
            files[".".join(parts[:-1] if is_pkg else parts)] = (path, is_pkg)
    return files


def _import_graph() -> tuple[dict[str, tuple[Path, bool]], dict[tuple[str, str], int]]:
    """The product's files and their import arrows (importer, imported) -> line of the first import."""
    files = _product_files()
    arrows: dict[tuple[str, str], int] = {}
    for name, (path, is_pkg) in files.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = name.split(".") if is_pkg else name.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    module = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    module = node.module or ""
                targets = [
                    f"{module}.{a.name}" if f"{module}.{a.name}" in files else module for a in node.names
                ]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            for imported in targets:
                target = imported
                while target and target not in files:  # `import skillreach.x.y` names a file or its package
                    target = target.rpartition(".")[0]
                if target and target != name:
                    arrows.setdefault((name, target), node.lineno)
    return files, arrows


def _floor(module: str) -> int:
    for package, floor in WINGS:
        if module == package or module.startswith(package + "."):
            return floor
    return 0  # the ground floor: skillreach's own modules


def test_the_graph_reads_every_product_file() -> None:
    files, arrows = _import_graph()
    assert {"skillreach.models", "skillreach.scoring", "skillreach.cli", "skillreach.tasks"} <= set(files)
    assert ("skillreach.settings", "skillreach._io.yaml") in arrows  # a top-level import
    assert ("skillreach.cli.run_cmds", "skillreach.flows.study") in arrows  # one inside a function


def test_no_import_circle_between_product_files() -> None:
    import networkx as nx

    _, arrows = _import_graph()
    graph = nx.DiGraph(list(arrows))
    circles = [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    assert circles == [], "files that import each other (move what both need into a lower file): " + (
        "; ".join(" ↔ ".join(c) for c in circles)
    )


def test_no_arrow_climbs_to_a_higher_wing() -> None:
    files, arrows = _import_graph()
    up = [
        f"{files[a][0].relative_to(REPO)}:{line} imports {b}"
        for (a, b), line in sorted(arrows.items())
        if _floor(b) > _floor(a)
    ]
    assert up == [], "imports from a wing above (see WINGS): " + "; ".join(up)


def test_private_modules_stay_inside_their_package() -> None:
    """``pkg._mod`` (or anything below ``pkg._sub``) is imported only by files of ``pkg``; what others need
    is exported from ``pkg``'s ``__init__`` or lives in a public module."""
    files, arrows = _import_graph()
    outside = []
    for (a, b), line in sorted(arrows.items()):
        parts = b.split(".")
        private = next((i for i, p in enumerate(parts) if p.startswith("_") and not p.startswith("__")), None)
        if private is None:
            continue
        owner = ".".join(parts[:private])
        if not (a == owner or a.startswith(owner + ".")):
            outside.append(f"{files[a][0].relative_to(REPO)}:{line} imports {b}")
    assert outside == [], "private modules imported from outside their package: " + "; ".join(outside)


def test_the_core_package_holds_few_modules_beside_its_wings() -> None:
    top = sorted(p.name for p in (REPO / "skillreach").glob("*.py"))
    assert len(top) <= MAX_TOP_MODULES, top


def test_no_product_file_is_over_a_thousand_lines() -> None:
    files, _ = _import_graph()
    big = {
        str(path.relative_to(REPO)): n
        for path, _ in files.values()
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert big == {}, f"split these by job: {big}"


def test_every_wing_says_what_it_does() -> None:
    for package, _ in WINGS:
        init = REPO / package.replace("skillreach.", "skillreach/", 1).replace(".", "/") / "__init__.py"
        if not init.is_file():
            short = package.split(".")[1]
            init = REPO / short / "__init__.py"
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
        assert doc is not None, f"{init.relative_to(REPO)}: a few lines on what the wing does"
        assert len(doc) > 40, f"{init.relative_to(REPO)}: a few lines on what the wing does"

