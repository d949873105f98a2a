"""Query generation end to end against the local Messages API stand-in (no Prefect server: the flow's
composition :func:`flows.generate_queries.drive` runs the tasks' ``.fn``)."""

from __future__ import annotations

import itertools
import json
import re
import shutil
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from skillreach.cli import main
from skillreach.errors import ConfigError, InputError, ProbeFailed, TransientProbeError
from skillreach.flows.generate_queries import drive
from skillreach.models import QueryKind
from skillreach.queries import generation as gen
from skillreach.queries.checkpoint import checkpoint_path
from skillreach.queries.generation import GenerationParams, GenerationRequest, TargetResult
from skillreach.queries.sets import verify_query_set
from skillreach.tasks.generate import (
    GenerateOptions,
    GenerationOutcome,
    _is_transient,
    finish_generation,
    generate_target,
    plan_generation,
    prepare_generation,
)
from tests.fakes.messages_api import MessagesAPI, request_text
from tests.helpers.generation import SKILLS, leaked_phrases, write_skills

SNAPSHOT = "claude-sonnet-5-5-20261001"
ALIASES = {"claude-sonnet-5-5": SNAPSHOT, "claude-opus-5": "claude-opus-5-20260801"}
MARKERS = {  # a phrase only this skill's body has → the skill (to tell which target a request is for)
    "list_fields.py": "pdf-forms",
    "qpdf --empty": "pdf-merge",
    "openpyxl": "spreadsheet-report",
    "expression endpoint": "gene-atlas",
}
_BODY = re.compile(r'<skill_body id="([A-Z0-9-]+)">\n(.*?)\n</skill_body>', re.DOTALL)
_KIND = re.compile(r'^- "([a-z_]+)":', re.MULTILINE)


def target_of(body: dict[str, Any]) -> str:
    shown = dict(_BODY.findall(body["messages"][0]["content"]))
    return next(skill for marker, skill in MARKERS.items() if marker in shown["SKILL"])


def citation_from(text: str, nth: int) -> str:
    lines = [ln for ln in text.splitlines() if len(ln.split()) >= 6]
    return " ".join(lines[nth % len(lines)].split()[:6])


class Writer:
    """A responder that writes drafts the way a good model would: cited from the shown bodies.

    ``script[target]`` lists what each successive request for that target gets: ``"ok"``,
    ``"garbage"`` (prose, no JSON) or ``"bad-citation"`` (the first draft cites text not in the body).
    """

    def __init__(self, script: dict[str, list[str]] | None = None) -> None:
        self.script = {k: list(v) for k, v in (script or {}).items()}
        self.asked: Counter[str] = Counter()
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> str:
        target = target_of(body)
        with self._lock:
            self.asked[target] += 1
            steps = self.script.get(target, [])
            step = steps.pop(0) if steps else "ok"
        if step == "garbage":
            return "Sure! Here are some great queries:\n1. Fill my form\n2. Merge my files"
        prompt = body["messages"][0]["content"]
        shown = dict(_BODY.findall(prompt))
        per_kind = int(re.search(r"Write (\d+) requests? of each", prompt).group(1))  # type: ignore[union-attr]
        drafts = []
        for kind in _KIND.findall(prompt):
            for i in range(per_kind):
                label = "RIVAL-1" if kind == "neighbor_negative" else "SKILL"
                slug = re.sub(r"[\W_]", "", target)
                words = " ".join(f"{kind[:3]}{slug}{i}x{j}" for j in range(6))
                item = {
                    "kind": kind,
                    "text": f"Please help me with {words}",
                    "citation": citation_from(shown[label], i),
                }
                if kind == "neighbor_negative":
                    item["rival"] = label
                drafts.append(item)
        if step == "bad-citation":
            drafts[0]["citation"] = "a passage the body never contained at all"
        return json.dumps({"queries": drafts})


@pytest.fixture
def skills_dir(tmp_path: Path) -> Path:
    return write_skills(tmp_path / "skills")


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Any], MessagesAPI]]:
    servers: list[MessagesAPI] = []

    def start(responder: Any) -> MessagesAPI:
        server = MessagesAPI(responder, aliases=ALIASES)
        server.start()
        servers.append(server)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-secret-123")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        return server

    yield start
    for s in servers:
        s.stop()


def options(skills_dir: Path, out: Path, **kw: Any) -> GenerateOptions:
    params = GenerationParams(**{"per_skill": 2, **kw.pop("params", {})})
    return GenerateOptions(skills=(skills_dir,), out=out, params=params, max_retries=1, timeout_s=10, **kw)


async def run(opts: GenerateOptions, generate: Any = None) -> GenerationOutcome:
    return await drive(
        opts,
        prepare=prepare_generation.fn,
        generate=generate or generate_target.fn,
        finish=finish_generation.fn,
    )


# -------------------------------------------------------------------------------------------- tests


async def test_generates_a_sealed_set_with_provenance(skills_dir: Path, tmp_path: Path, api: Any) -> None:
    writer = Writer()
    server = api(writer)
    out = tmp_path / "gen.json"
    outcome = await run(options(skills_dir, out))

    qs = verify_query_set(out)  # the digest holds
    prov = qs.provenance.model_dump()
    assert prov["origin"] == "generated"
    assert prov["generator_model"] == SNAPSHOT == outcome.generator_model
    assert prov["requested_model"] == "claude-sonnet-5-5"
    assert prov["template_digest"] == gen.template_digest()
    assert prov["catalog_digest"].startswith("sha256:")
    assert prov["temperature"] is None
    assert prov["created_at"]
    assert prov["tool_version"]
    assert prov["kind_counts"] == {k: sum(q.kind.value == k for q in qs.queries) for k in prov["kind_counts"]}
    assert qs.catalog_id == "full"
    # 4 targets × (implicit 2 + contextual 2 + out_of_scope 2) + neighbour negatives where a rival exists
    assert writer.asked == {"pdf-forms": 1, "pdf-merge": 1, "spreadsheet-report": 1, "gene-atlas": 1}
    assert prov["kind_counts"]["implicit"] == 8
    assert prov["kind_counts"]["out_of_scope"] == 8
    nn = [q for q in qs.queries if q.kind is QueryKind.neighbor_negative]
    assert nn
    assert all(q.expected_skill != q.id.split("-nn-")[0].removeprefix("gen-") for q in nn)
    assert {q.expected_skill for q in nn if q.id.startswith("gen-pdf-forms-")} == {"pdf-merge"}
    assert all(q.expected_skill is None for q in qs.queries if q.kind is QueryKind.out_of_scope)
    assert outcome.report.dropped == {}
    assert outcome.report.requests == 4
    # masking: no description (nor its phrases) and no shown name reached any request
    assert len(server.requests) == 4
    for body in server.requests:
        text = request_text(body)
        for skill in SKILLS:
            assert leaked_phrases(text, skill.description) == [], skill.name
        target = target_of(body)
        assert not gen.name_pattern(target).search(text)
        assert body["model"] == "claude-sonnet-5-5"
        assert "temperature" not in body
    # the report and the checkpoint sit next to the output; the key is in neither
    report = json.loads(outcome.report_path.read_text())
    assert report["kind_counts"] == prov["kind_counts"]
    lines = checkpoint_path(out).read_text().splitlines()
    assert len(lines) == 5
    assert json.loads(lines[0])["catalog_digest"] == prov["catalog_digest"]
    for path in (out, outcome.report_path, checkpoint_path(out)):
        assert "sk-test-secret" not in path.read_text()


async def test_invalid_json_is_asked_again_once_then_recorded_as_failure(
    skills_dir: Path, tmp_path: Path, api: Any
) -> None:
    writer = Writer({"pdf-merge": ["garbage"], "gene-atlas": ["garbage", "garbage"]})
    server = api(writer)
    out = tmp_path / "gen.json"
    outcome = await run(options(skills_dir, out, params={"kinds": (QueryKind.implicit,)}))
    assert writer.asked == {"pdf-forms": 1, "pdf-merge": 2, "spreadsheet-report": 1, "gene-atlas": 2}
    status = {t.target: t for t in outcome.report.targets}
    assert status["pdf-merge"].status == "generated"
    assert status["pdf-merge"].requests == 2
    assert status["gene-atlas"].status == "failed"
    assert "no valid JSON in 2 replies" in (status["gene-atlas"].error or "")
    assert outcome.queries == 6  # three targets × 2 implicit
    assert "gene-atlas" in verify_query_set(out).provenance.model_dump()["failed_targets"]
    # the failed target is not checkpointed: the next run asks for it alone
    before = len(server.requests)
    again = await run(options(skills_dir, out, params={"kinds": (QueryKind.implicit,)}))
    assert len(server.requests) - before == 1
    assert writer.asked["gene-atlas"] == 3
    assert again.queries == 8
    assert again.report.failures == {}
    assert {t.target: t.status for t in again.report.targets}["pdf-forms"] == "resumed"


async def test_citation_not_in_the_body_is_dropped_and_counted(
    skills_dir: Path, tmp_path: Path, api: Any
) -> None:
    api(Writer({"spreadsheet-report": ["bad-citation"]}))
    outcome = await run(options(skills_dir, tmp_path / "gen.json", params={"kinds": (QueryKind.implicit,)}))
    assert outcome.report.dropped == {"citation_not_found": 1}
    ids = {q.id for q in verify_query_set(tmp_path / "gen.json").queries}
    assert "gen-spreadsheet-report-imp-01" not in ids
    assert "gen-spreadsheet-report-imp-02" in ids


async def test_resume_after_interruption_repeats_no_finished_target(
    skills_dir: Path, tmp_path: Path, api: Any
) -> None:
    writer = Writer()
    server = api(writer)
    out = tmp_path / "gen.json"
    opts = options(skills_dir, out, concurrency=1)

    class Interrupted(Exception):
        pass

    calls = itertools.count()

    async def dies_on_third(request: GenerationRequest, o: GenerateOptions, cp: Path) -> TargetResult:
        if next(calls) == 2:
            raise Interrupted  # the process is killed while the third target is in flight
        return await generate_target.fn(request, o, cp)

    with pytest.raises(Interrupted):
        await run(opts, dies_on_third)
    assert not out.exists()
    finished = dict(writer.asked)
    assert sum(finished.values()) == 2 == len(checkpoint_path(out).read_text().splitlines()) - 1

    outcome = await run(opts)
    assert len(server.requests) == 4  # 2 before the interruption + the 2 that were left
    assert all(writer.asked[t] == 1 for t in MARKERS.values())
    assert {t.target for t in outcome.report.targets if t.status == "resumed"} == set(finished)
    assert outcome.report.requests == 2
    assert len(verify_query_set(out).queries) == outcome.queries > 0


async def test_changed_catalog_or_template_refuses_the_checkpoint(
    skills_dir: Path, tmp_path: Path, api: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    templates = tmp_path / "templates"
    templates.mkdir()
    for f in gen.TEMPLATE_DIR.glob("generate*.j2"):
        shutil.copy(f, templates / f.name)
    monkeypatch.setattr(gen, "TEMPLATE_DIR", templates)
    api(Writer())
    out = tmp_path / "gen.json"
    opts = options(skills_dir, out, params={"kinds": (QueryKind.implicit,)})
    await run(opts)

    skill_md = skills_dir / "gene-atlas" / "SKILL.md"
    original = skill_md.read_text()
    skill_md.write_text(original + "\nAlso report the stage range.\n")
    with pytest.raises(InputError, match=r"the skills \(catalog digest sha256:\w+ → sha256:\w+\) changed"):
        plan_generation(opts)
    skill_md.write_text(original)
    plan_generation(opts)  # same inputs again: accepted

    user = templates / "generate_user.j2"
    user.write_text(user.read_text() + "\nBe concise.\n")
    with pytest.raises(
        InputError, match=r"the prompt templates .* changed since; delete it or pass --restart"
    ):
        plan_generation(opts)
    plan = plan_generation(opts.model_copy(update={"restart": True}))
    assert plan.finished == {}
    assert "Be concise." in plan.requests[0].prompt


async def test_transient_errors_are_retried_and_failures_do_not_crash(
    skills_dir: Path, tmp_path: Path, api: Any
) -> None:
    writer = Writer()
    server = api(writer)
    server.inject(429, times=1, retry_after=0)
    out = tmp_path / "gen.json"
    opts = options(
        skills_dir, out, params={"kinds": (QueryKind.implicit,)}, targets=("pdf-forms", "pdf-merge")
    )
    outcome = await run(opts.model_copy(update={"concurrency": 1}))  # the SDK retried the 429
    assert outcome.report.failures == {}
    assert outcome.queries == 4

    request = plan_generation(opts.model_copy(update={"restart": True})).requests[0]
    server.inject("drop", times=2)
    with pytest.raises(TransientProbeError):  # max_retries=1: two dropped connections exhaust it
        await generate_target.fn(request, opts, checkpoint_path(out))
    from prefect.states import Failed

    assert _is_transient(None, None, Failed(data=TransientProbeError("x")))
    assert not _is_transient(None, None, Failed(data=ProbeFailed("x")))

    server.inject(400, message="prompt is too long")
    # one at a time, so the refused request is the first target's (in parallel the order is a race)
    outcome = await run(opts.model_copy(update={"concurrency": 1}))  # a refused request fails its target only
    assert "prompt is too long" in outcome.report.failures[request.target]


async def test_refused_key_and_unknown_model_stop_everything(
    skills_dir: Path, tmp_path: Path, api: Any
) -> None:
    server = api(Writer())
    server.inject(401, message="invalid x-api-key")
    opts = options(skills_dir, tmp_path / "gen.json", concurrency=1)
    with pytest.raises(ConfigError, match="refused the credentials") as err:
        await run(opts)
    assert "sk-test" not in str(err.value)
    with pytest.raises(ConfigError, match="--model not-a-model-9: the Messages API does not know it"):
        await run(opts.model_copy(update={"params": GenerationParams(model="not-a-model-9")}))


async def test_temperature_is_sent_only_when_given(skills_dir: Path, tmp_path: Path, api: Any) -> None:
    server = api(Writer())
    opts = options(
        skills_dir,
        tmp_path / "gen.json",
        targets=("pdf-forms",),
        params={"temperature": 0.3, "kinds": (QueryKind.implicit,)},
    )
    outcome = await run(opts)
    assert server.requests[-1]["temperature"] == 0.3
    assert verify_query_set(outcome.out).provenance.model_dump()["temperature"] == 0.3
    server.inject(400, message="`temperature` is deprecated for this model.")
    with pytest.raises(ConfigError, match="--temperature: the Messages API refused it"):
        await run(opts.model_copy(update={"restart": True}))


# ---------------------------------------------------------------------------------------------- CLI


def test_cli_without_key_says_so_in_one_line(
    skills_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    code = main(["queries", "generate", "--skills", str(skills_dir), "--out", str(tmp_path / "q.json")])
    err = capsys.readouterr().err
    assert code == 2
    assert err == (
        "skillreach: error: ANTHROPIC_API_KEY is not set; export it (and ANTHROPIC_BASE_URL for a proxy "
        "or gateway) to generate queries\n"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--kinds", "implicit,sideways"],
            "--kinds: unknown kind 'sideways'; choose from implicit, contextual",
        ),
        (["--targets", "nope"], "--targets: no skill named 'nope'"),
        (["--out", "q.yaml"], "a sealed query set is JSON"),
    ],
)
def test_cli_refuses_bad_options_before_any_request(
    skills_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    message: str,
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    monkeypatch.chdir(tmp_path)
    base = ["queries", "generate", "--skills", str(skills_dir)]
    if "--out" not in args:
        base += ["--out", "q.json"]
    code = main(base + args)
    err = capsys.readouterr().err
    assert code == 2
    assert message in err
    assert err.count("\n") == 1


async def test_cli_refuses_a_stale_checkpoint(
    skills_dir: Path, tmp_path: Path, api: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    api(Writer())
    out = tmp_path / "q.json"
    await run(options(skills_dir, out, params={"kinds": (QueryKind.implicit,)}, targets=("gene-atlas",)))
    argv = ["queries", "generate", "--skills", str(skills_dir), "--out", str(out), "--kinds", "implicit"]
    code = main([*argv, "--per-skill", "3"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1
    assert "--per-skill (2 → 3) changed since; delete it or pass --restart to generate afresh" in err


def test_cli_runs_the_flow_and_prints_a_summary(
    skills_dir: Path,
    tmp_path: Path,
    api: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The command end to end, with the flow's composition run on the tasks' ``.fn`` (no server)."""
    import skillreach.flows.generate_queries as flow_module

    def no_server(options: GenerateOptions, on_plan: Any = None, on_target: Any = None) -> Any:
        return drive(
            options,
            prepare=prepare_generation.fn,
            generate=generate_target.fn,
            finish=finish_generation.fn,
            on_plan=on_plan,
            on_target=on_target,
        )

    monkeypatch.setattr(flow_module, "generate_queries", no_server)
    api(Writer({"gene-atlas": ["garbage", "garbage"]}))
    (skills_dir / "broken").mkdir()
    (skills_dir / "broken" / "SKILL.md").write_text("no frontmatter here\n")
    out = tmp_path / "q.json"
    argv = ["queries", "generate", "--skills", str(skills_dir), "--out", str(out), "--kinds", "implicit"]
    assert main([*argv, "--per-skill", "1"]) == 0
    captured = capsys.readouterr()
    assert "generated 3 queries (implicit 3) → " in captured.out
    assert f"report {out}.report.json" in captured.out
    assert re.search(r"tokens: [1-9]\d* in, [1-9]\d* out", captured.out)
    assert "broken/SKILL.md" in captured.err  # the bad SKILL.md is reported, not fatal
    assert "failed gene-atlas: no valid JSON in 2 replies" in captured.err
    assert "1 target(s) failed (gene-atlas); run the same command again" in captured.err
    assert main([*argv, "--per-skill", "1"]) == 0  # the retry asks for gene-atlas alone
    captured = capsys.readouterr()
    assert "generated 4 queries (implicit 4)" in captured.out
    assert "1 request(s) this run, 3 target(s) resumed" in captured.out
    assert main(["queries", "verify", str(out)]) == 0
