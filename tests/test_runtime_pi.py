"""The ``pi`` runtime: a stand-in executable printing the recorded event format (CI), the recorded real
stream, and the REAL pi CLI against the local Messages API stand-in (``realcli``, skipped without pi)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from skillreach.errors import ConfigError
from skillreach.models import Catalog, Skill, Usage
from skillreach.runtimes import get_runtime
from skillreach.runtimes._agentcli import skill_for_path
from skillreach.runtimes.pi import PiRuntime, parse_pi_events
from skillreach.settings import DEFAULT_PRICES, load_settings
from skillreach.study.contract import ProbeOptions, Tracker, cost_of
from tests.fakes.kit import assert_ended_live, folder_catalog, probe, stub_knobs
from tests.fakes.kit import query as q
from tests.helpers.clis import PI_CACHE, real_pi

FAKES = Path(__file__).parent / "fakes"
STUB = FAKES / "pi_stub" / "pi"


def make_catalog(tmp_path: Path) -> Catalog:
    skills = [
        ("pdf", "Fill and merge PDF forms."),
        ("rollback", "Roll back a bad deploy."),
        ("secrets", "Rotate leaked credentials."),
    ]
    body = lambda name: f"# {name}\n\n{name.upper()} BODY\n"  # noqa: E731
    return folder_catalog(tmp_path, skills, body=body, references=True, with_path=True)


@pytest.fixture
def stub(tmp_path: Path) -> dict[str, Any]:
    return stub_knobs(tmp_path, "PI", make_catalog(tmp_path))


def runtime(stub: dict[str, Any] | None = None, **kw: Any) -> PiRuntime:
    """pi's stand-in executable prints events and calls no model: without the relay, its figures are
    its events' (the relay is the real pi's, below)."""
    kw.setdefault("model", "claude-sonnet-4-5")
    kw.setdefault("relay", False)
    if stub is not None:
        kw["env"] = {**stub["env"], **kw.get("env", {})}
    return PiRuntime(pi_path=str(STUB), **kw)


async def test_live_early_exit_ends_the_process(stub: dict[str, Any]) -> None:
    stub["plan"]({"undo the deploy": ["secrets", "rollback", "pdf", "secrets"]})
    rt = runtime(stub, env={"PI_STUB_DELAY": "0.4"})
    out, _ = await probe(rt, stub["catalog"], q("please undo the deploy", "rollback"))
    assert out.error is None
    assert out.invoked == ["secrets", "rollback"]
    assert out.early_exit is True
    assert_ended_live(stub["log"])


async def test_isolation_flags_config_and_env(stub: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    stub["plan"]({"x": ["pdf"]})
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secret-value")
    monkeypatch.setenv("SOME_PRIVATE_TOKEN", "do-not-pass")
    rt = runtime(stub, base_url="http://127.0.0.1:9/anthropic", max_retries=2)
    out, _ = await probe(rt, stub["catalog"], q("x", "pdf"))
    assert out.invoked == ["pdf"]
    argv = json.loads((stub["log"] / "argv.json").read_text())
    for flag in (
        "-p",
        "--no-session",
        "--no-skills",
        "--no-extensions",
        "--no-context-files",
        "--no-prompt-templates",
    ):
        assert flag in argv
    assert argv[argv.index("--mode") + 1] == "json"
    assert argv[argv.index("--tools") + 1] == "read"
    assert argv[argv.index("--provider") + 1] == "anthropic"
    skill_args = [argv[i + 1] for i, a in enumerate(argv) if a == "--skill"]
    assert sorted(Path(s).name for s in skill_args) == ["pdf", "rollback", "secrets"]
    assert all("skillreach-pi-" in s for s in skill_args)  # copies in the probe's own folder
    assert argv[-1] == "x"
    env = json.loads((stub["log"] / "env.json").read_text())
    assert "skillreach-pi-" in env["HOME"]
    assert env["PI_CODING_AGENT_DIR"].startswith(str(Path(env["HOME"]).parent))
    assert "ANTHROPIC_API_KEY" in env["names"]
    assert "SOME_PRIVATE_TOKEN" not in env["names"]
    models = json.loads((stub["log"] / "models.json").read_text())
    assert models == {"providers": {"anthropic": {"baseUrl": "http://127.0.0.1:9/anthropic"}}}
    settings = json.loads((stub["log"] / "settings.json").read_text())
    assert settings["retry"]["maxRetries"] == 2
    assert not Path(env["HOME"]).exists()  # the probe's folder is gone afterwards


async def test_base_url_from_anthropic_env(stub: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    stub["plan"]({})
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:7/x")
    out, _ = await probe(runtime(stub), stub["catalog"], q("hello", None))
    assert out.invoked == []
    assert out.final_text == "Done."
    models = json.loads((stub["log"] / "models.json").read_text())
    assert models["providers"]["anthropic"]["baseUrl"] == "http://127.0.0.1:7/x"


async def test_max_turns_without_early_exit_and_usage(stub: dict[str, Any]) -> None:
    stub["plan"]({"x": ["pdf", "secrets", "rollback"]})
    out, tracker = await probe(runtime(stub), stub["catalog"], q("x", "pdf"), max_turns=2, early_exit=False)
    assert out.invoked == ["pdf", "secrets"]
    assert tracker.exhausted
    assert not out.early_exit
    assert out.usage.input_tokens == 700 + 800
    assert out.usage.output_tokens == 80
    assert out.cost_usd == pytest.approx((1500 * 3.0 + 80 * 15.0) / 1e6)  # the price table's sonnet-4 row
    assert out.turns == 2  # model replies, as the API runtimes count them
    assert out.resolved_model == "claude-sonnet-4-5"


async def test_reads_inside_a_skill_folder_count_other_reads_do_not(stub: dict[str, Any]) -> None:
    stub["plan"](
        {
            "x": [
                {"read": "/etc/hostname"},
                {"tool": "ls", "args": {"path": "../skills"}},
                {"read": "../skills/secrets/references/notes.md"},
            ]
        }
    )
    out, _ = await probe(runtime(stub, tools="read,ls"), stub["catalog"], q("x", "pdf"))
    assert out.invoked == ["secrets"]
    assert [c.tool for c in out.tool_calls] == ["read", "ls"]


async def test_provider_error_is_recorded(stub: dict[str, Any]) -> None:
    stub["plan"]({"x": [{"error": "529 overloaded_error: Overloaded"}]})
    out, _ = await probe(runtime(stub), stub["catalog"], q("x", "pdf"))
    assert out.error is not None
    assert "Overloaded" in out.error


async def test_residency_mismatch_fails_the_probe(stub: dict[str, Any]) -> None:
    stub["plan"]({"x": ["pdf"]})
    out, _ = await probe(runtime(stub, env={"PI_STUB_HIDE": "rollback"}), stub["catalog"], q("x", "pdf"))
    assert out.error is not None
    assert "missing ['rollback']" in out.error
    assert out.invoked == []


def test_configuration_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SKILLREACH_PI_PATH", raising=False)
    with pytest.raises(ConfigError, match="read-only"):
        runtime(tools="read,bash")
    with pytest.raises(ConfigError, match="pi program not found"):
        PiRuntime(pi_path=str(tmp_path / "nope"))
    with pytest.raises(ConfigError, match="models_json"):
        runtime(models_json=tmp_path / "missing.json")
    monkeypatch.setenv("SKILLREACH_PI_PATH", str(STUB))  # a setting: read by the settings, not the runtime
    assert get_runtime("pi", model="m", settings=load_settings()).executable == str(STUB)  # type: ignore[attr-defined]
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ConfigError, match="pi program not found"):
        get_runtime("pi", model="m")


def test_skill_for_path(tmp_path: Path) -> None:
    dirs = {"pdf": tmp_path / "skills" / "pdf", "pdf-extra": tmp_path / "skills" / "pdf-extra"}
    cwd = tmp_path / "work"
    assert skill_for_path(str(dirs["pdf"] / "SKILL.md"), dirs, cwd) == "pdf"
    assert skill_for_path("../skills/pdf-extra/x/y.md", dirs, cwd) == "pdf-extra"
    assert skill_for_path("../skills/pdf/../../etc/passwd", dirs, cwd) is None
    assert skill_for_path(str(tmp_path / "skills" / "pdfx" / "SKILL.md"), dirs, cwd) is None
    assert skill_for_path(None, dirs, cwd) is None


def test_recorded_real_stream_is_understood() -> None:
    lines = (FAKES / "pi_recorded.jsonl").read_text().splitlines()
    dirs = {"pdf": Path("/RECORDED/skills/pdf"), "rollback": Path("/RECORDED/skills/rollback")}
    tracker = Tracker(expected="pdf", max_turns=3)
    state = parse_pi_events(lines, dirs, Path("/RECORDED"), tracker)
    assert tracker.invoked == ["rollback"]
    assert state.usage.input_tokens == 748 + 851
    assert state.usage.output_tokens == 42 + 8
    assert state.final_text == "done"
    assert state.error is None
    # with rollback as the target the stream is cut right at the read
    tracker2 = Tracker(expected="rollback", max_turns=3)
    state2 = parse_pi_events(lines, dirs, Path("/RECORDED"), tracker2)
    assert tracker2.early_exit
    assert state2.usage.input_tokens == 748  # nothing after the read is taken
    assert state2.final_text == "reading"


# ----------------------------------------------------------------------------- the real pi CLI


_real_pi = real_pi


@pytest.mark.realcli
async def test_real_pi_against_the_messages_api_stand_in(tmp_path: Path) -> None:
    pi = _real_pi()
    if pi is None:
        pytest.skip(
            "the real pi CLI is not installed (npm install @mariozechner/pi-coding-agent in "
            f"{PI_CACHE}, or set SKILLREACH_TEST_PI)"
        )
    from tests.fakes.messages_api import MessagesAPI, Reply, text_reply, tool_call, turn_of

    catalog = make_catalog(tmp_path)
    order = ["secrets", "rollback", "pdf"]

    def responder(body: dict[str, Any]) -> Any:
        system = json.dumps(body.get("system"))
        turn = turn_of(body)
        if turn < len(order):
            m = re.search(rf"<location>([^<]*/{order[turn]}/SKILL\.md)</location>", system)
            assert m, "pi listed every resident skill with its location"
            return Reply([tool_call("read", {"path": m.group(1)})])
        return text_reply("done")

    with MessagesAPI(responder) as api:
        rt = PiRuntime(
            pi_path=pi, model="claude-sonnet-4-5", base_url=api.base_url, env={"ANTHROPIC_API_KEY": "test"}
        )
        assert rt.relayed == ("messages", api.base_url)
        out, _ = await probe(rt, catalog, q("please undo the deploy", "rollback"))
        n_early = len(api.requests)
        served_early = list(api.served)
        out2, _ = await probe(
            rt, catalog, q("please undo the deploy", "rollback"), early_exit=False, max_turns=5
        )
        served_full = list(api.served)[len(served_early) :]
        await rt.aclose()
    assert out.error is None, out.error
    assert out.invoked == ["secrets", "rollback"]
    assert out.early_exit
    # through the relay, pi's request after the target's read is held: never forwarded, never paid
    assert n_early == 2
    assert out.turns == 2
    assert out.usage == sum((u for _, u in served_early), Usage())
    assert out.cost_usd == pytest.approx(cost_of(out.usage, DEFAULT_PRICES["claude-sonnet-4"]))
    assert out2.invoked == ["secrets", "rollback", "pdf"]
    assert out2.final_text == "done"
    assert len(served_full) == 4
    assert out2.turns == 4
    assert out2.usage == sum((u for _, u in served_full), Usage())
    assert out2.resolved_model is not None
    first = api.requests[0]
    assert [t["name"] for t in first["tools"]] == ["read"]
    text = json.dumps(first)
    for skill in catalog.skills:
        assert f"<name>{skill.name}</name>" in text
        assert skill.body.strip() not in text  # progressive disclosure: no body before a read
    assert out.usage.input_tokens > 0


async def test_compliance_mode_goes_on_after_the_target(stub: dict[str, Any]) -> None:
    stub["plan"]({"x": ["pdf", "secrets", {"tool": "ls", "args": {"path": "."}}]})
    query = q("x", "pdf")
    tracker = Tracker.for_query(query, ProbeOptions(max_turns=1, early_exit=False, compliance=True))
    out = await runtime(stub, tools="read,ls").select(query, stub["catalog"], tracker)
    assert out.error is None
    assert out.invoked == ["pdf"]  # later skill reads are not routing decisions any more
    assert [c.tool for c in out.tool_calls] == ["ls"]
    assert (stub["log"] / "finished").exists()  # the agent was left to finish


def test_built_with_study_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    from skillreach.settings import Settings

    monkeypatch.setenv("SKILLREACH_PI_PATH", str(STUB))
    rt = get_runtime("pi", settings=Settings(model="claude-haiku-4-5", timeout_s=33))
    assert isinstance(rt, PiRuntime)
    assert rt.model == "claude-haiku-4-5"
    assert rt.timeout_s == 33


def test_pi_retry_events_and_unsafe_names(tmp_path: Path) -> None:
    from skillreach.errors import InputError
    from skillreach.runtimes._agentcli import lay_out_skills
    from skillreach.runtimes.pi import PiStream

    state = PiStream({}, tmp_path, Tracker("x", max_turns=3))
    state.feed(
        {
            "type": "message_end",
            "message": {"role": "assistant", "stopReason": "error", "errorMessage": "529 overloaded"},
        }
    )
    assert state.error is not None
    state.feed(
        {"type": "auto_retry_start", "attempt": 1, "maxAttempts": 3, "delayMs": 10, "errorMessage": "x"}
    )
    assert state.error is None
    state.feed({"type": "auto_retry_end", "success": False, "attempt": 3, "finalError": "still overloaded"})
    assert state.error == "pi: still overloaded"
    bad = Catalog(id="b", skills=(Skill(name="../escape", description="d", body="b"),))
    with pytest.raises(InputError, match="cannot be a folder name"):
        lay_out_skills(bad, tmp_path / "skills")


async def test_the_relay_is_what_pi_is_pointed_at(stub: dict[str, Any], tmp_path: Path) -> None:
    """With the relay (the default), pi's ``models.json`` names the probe's relay on 127.0.0.1 (the
    endpoint's path kept); a ``models_json`` of your own is rewritten the same way when the relay can
    read its provider's API, and left as it is when it cannot."""
    stub["plan"]({"x": ["pdf"]})
    rt = runtime(stub, base_url="http://127.0.0.1:9/anthropic", relay=True, check_residency=False)
    assert rt.relayed == ("messages", "http://127.0.0.1:9/anthropic")
    out, _ = await probe(rt, stub["catalog"], q("x", "pdf"))
    assert out.invoked == ["pdf"]
    # the stand-in executable reached no model through the relay: the figures are its own events'
    assert out.turns == 1
    assert out.usage.input_tokens > 0
    url = json.loads((stub["log"] / "models.json").read_text())["providers"]["anthropic"]["baseUrl"]
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/anthropic", url)
    assert not url.startswith("http://127.0.0.1:9/")
    env = json.loads((stub["log"] / "env.json").read_text())
    assert "NO_PROXY" in env["names"]

    own = tmp_path / "models.json"
    local = {"baseUrl": "http://127.0.0.1:8/v1", "api": "openai-completions", "apiKey": "K", "models": []}
    own.write_text(json.dumps({"providers": {"local": local}}))
    rt = runtime(stub, provider="local", models_json=own, relay=True, check_residency=False)
    assert rt.relayed == ("chat", "http://127.0.0.1:8/v1")
    await probe(rt, stub["catalog"], q("x", "pdf"))
    written = json.loads((stub["log"] / "models.json").read_text())["providers"]["local"]
    assert written["baseUrl"] != local["baseUrl"]
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/v1", written["baseUrl"])
    assert {k: v for k, v in written.items() if k != "baseUrl"} == {
        k: v for k, v in local.items() if k != "baseUrl"
    }
    own.write_text(json.dumps({"providers": {"local": {**local, "api": "bedrock-converse-stream"}}}))
    assert runtime(stub, provider="local", models_json=own, relay=True).relayed is None
    mixed = {**local, "models": [{"id": "a"}, {"id": "b", "api": "openai-responses"}]}
    own.write_text(json.dumps({"providers": {"local": mixed}}))
    assert runtime(stub, provider="local", models_json=own, relay=True).relayed is None  # one wire a relay
    own.write_text("[1, 2")
    with pytest.raises(ConfigError, match="models_json is not a JSON file"):
        runtime(stub, provider="local", models_json=own)
    with pytest.raises(ConfigError, match="models_json file not found"):
        runtime(stub, provider="local", models_json=tmp_path)  # a folder is never opened


@pytest.mark.realcli
async def test_real_pi_through_the_relay_on_chat_completions(tmp_path: Path) -> None:
    """The real pi with a ``models_json`` provider of ``api: openai-completions``: the relay reads Chat
    Completions; two skill reads in one response are credited in the model's order, and the request
    after the target (the second) never reaches the server."""
    pi = _real_pi()
    if pi is None:
        pytest.skip("the real pi CLI is not installed (see test_real_pi_against_the_messages_api_stand_in)")
    from tests.fakes.openai_chat import OpenAIChat, completion, tool_call

    catalog = make_catalog(tmp_path)

    def responder(body: dict[str, Any]) -> dict[str, Any]:
        text = json.dumps(body["messages"])
        if any(m.get("role") == "tool" for m in body["messages"]):
            return completion(model="fake-model", text="done")
        paths = [re.search(rf"<location>([^<]*/{s}/SKILL\.md)</location>", text) for s in ("pdf", "secrets")]
        assert all(paths), "pi listed every resident skill with its location"
        calls = [tool_call("read", {"path": m.group(1)}) for m in paths if m]
        return completion(model="fake-model", tool_calls=calls, prompt_tokens=900, completion_tokens=40)

    with OpenAIChat(responder=responder) as api:
        models = tmp_path / "models.json"
        provider = {"baseUrl": api.base_url, "api": "openai-completions", "apiKey": "LOCAL_KEY",
                    "compat": {"supportsDeveloperRole": False}, "models": [{"id": "fake-model"}]}  # fmt: skip
        models.write_text(json.dumps({"providers": {"local": provider}}))
        rt = PiRuntime(
            pi_path=pi,
            provider="local",
            model="fake-model",
            models_json=models,
            env={"LOCAL_KEY": "k"},
            check_residency=False,
        )
        assert rt.relayed == ("chat", api.base_url)
        out, _ = await probe(rt, catalog, q("fill the form", "secrets"))
        await rt.aclose()
    assert out.error is None, out.error
    assert out.invoked == ["pdf", "secrets"]  # the model's order
    assert out.early_exit
    assert len(api.requests) == 1  # the request after the target was held
    assert out.turns == 1
    assert out.usage == api.served_usage() == Usage(input_tokens=900, output_tokens=40)
