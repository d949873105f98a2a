"""One runtime contract (issue 13): options as one pydantic model per runtime (a misspelt option is a
ConfigError naming the valid ones, for every runtime), capabilities as class attributes, retries and
timeouts from the settings passed in (never from the environment), and the runtime's version recorded
on every probe."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest

from skillreach.cli import main
from skillreach.errors import ConfigError
from skillreach.models import Query, QueryKind
from skillreach.runtimes import REGISTRY, get_runtime, runtime_class
from skillreach.settings import Settings
from skillreach.study.contract import ProbeOptions, RuntimeOptions
from skillreach.study.runner import ListSink, run_probes
from tests.fakes.kit import folder_catalog

FAKES = Path(__file__).parent / "fakes"


def _sdk_missing(name: str) -> bool:
    if name != "antigravity-sdk":
        return False
    try:
        import google.antigravity  # noqa: F401
    except ImportError:
        return True
    return False


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_a_misspelt_option_is_refused_by_every_runtime(name: str) -> None:
    if _sdk_missing(name):
        pytest.skip("google-antigravity is not installed")
    valid = sorted(runtime_class(name).Options.model_fields)  # type: ignore[attr-defined]
    with pytest.raises(ConfigError) as info:
        get_runtime(name, no_such_option=1)
    message = info.value.message
    assert message.startswith("runtime_options.no_such_option: ")
    assert f"the {name} runtime has no option 'no_such_option'" in message
    assert message.endswith(f"valid options: {', '.join(valid) or 'none'}")
    if valid:  # a near miss is named
        wrong = valid[0][:-1] + ("x" if valid[0][-1] != "x" else "y")
        with pytest.raises(ConfigError, match=f"did you mean '{valid[0]}'"):
            get_runtime(name, **{wrong: 1})


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_options_model_capabilities_and_constructor_agree(name: str) -> None:
    if _sdk_missing(name):
        pytest.skip("google-antigravity is not installed")
    cls = runtime_class(name)
    assert issubclass(cls.Options, RuntimeOptions)  # type: ignore[attr-defined]
    for capability in ("paid", "cached_listing", "batch_mode", "wants_all_probes"):
        assert isinstance(getattr(cls, capability), bool), capability
    params = inspect.signature(cls).parameters
    assert not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())  # nothing swallowed
    assert "settings" in params
    assert "model" in params
    for field, info in cls.Options.model_fields.items():  # type: ignore[attr-defined]
        assert field in params, f"{name}: option {field} is not a constructor argument"
        default = params[field].default
        assert info.default == default or (info.default == () and default == ()), (field, default)
    assert inspect.iscoroutinefunction(cls.version)


def test_capabilities_say_what_the_name_sets_said() -> None:
    paid = {n for n in REGISTRY if not _sdk_missing(n) and runtime_class(n).paid}
    cached = {n for n in REGISTRY if not _sdk_missing(n) and runtime_class(n).cached_listing}
    batch = {n for n in REGISTRY if not _sdk_missing(n) and runtime_class(n).batch_mode}
    assert paid == {
        "anthropic",
        "openai-compatible",
        "claude-code",
        "codex",
        "gemini-cli",
        "opencode",
        "copilot",
    }
    assert cached == {"anthropic", "claude-code"}
    assert batch == {"anthropic"}


def test_a_wrong_type_is_refused_with_the_option_named() -> None:
    with pytest.raises(ConfigError, match=r"runtime_options\.k: .*integer.*\(the retriever runtime\)"):
        get_runtime("retriever", k="many")


def test_a_misspelt_option_through_skillreach_run_is_one_line(
    world: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    (world["root"] / "study.toml").write_text(
        f'runtime = "fake"\n[runtime_options]\nscrpt = "{world["good"]}"\n', encoding="utf-8"
    )
    argv = ["run", "--config", "study.toml", "--skills", "skills", "--queries", "queries.json"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "study.toml: runtime_options.scrpt: the fake runtime has no option 'scrpt'; " in err
    assert "did you mean 'script'? valid options: latency_s, script" in err
    assert not Path("runs").exists()


# ------------------------------------------------------------------ retries and timeouts from settings


def test_retries_and_timeouts_come_from_the_settings_not_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from skillreach.runtimes.claude_code import ClaudeCodeRuntime
    from skillreach.runtimes.pi import PiRuntime

    monkeypatch.setenv("SKILLREACH_MAX_RETRIES", "9")
    monkeypatch.setenv("SKILLREACH_TIMEOUT_S", "9")
    pi = str(FAKES / "pi_stub" / "pi")
    assert PiRuntime(pi_path=pi).max_retries == 6  # the defaults: the environment is the task's to read
    configured = PiRuntime(pi_path=pi, settings=Settings.model_construct(max_retries=2, timeout_s=5.0))
    assert (configured.max_retries, configured.timeout_s) == (2, 5.0)
    assert PiRuntime(pi_path=pi, max_retries=0).max_retries == 0  # an explicit option wins
    claude = ClaudeCodeRuntime(
        claude_path=str(FAKES / "claude_stub" / "claude"),
        settings=Settings.model_construct(timeout_s=4.0),
        api_key="sk-test",
    )
    assert claude.timeout_s == 4.0


async def test_claude_code_honours_the_configured_timeout(tmp_path: Path) -> None:
    from skillreach.runtimes.claude_code import ClaudeCodeRuntime

    catalog = folder_catalog(tmp_path)
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"*": {"steps": ["pdf", "secrets"], "sleep_after_skill": {"pdf": 30}}}))
    rt = ClaudeCodeRuntime(
        claude_path=str(FAKES / "claude_stub" / "claude"),
        settings=Settings.model_construct(timeout_s=1.0),
        extra_env={"CLAUDE_STUB_SCRIPT": str(script), "ANTHROPIC_API_KEY": "sk-test"},
    )
    query = Query(id="q1", text="anything", expected_skill="rollback", kind=QueryKind.implicit)
    sink = ListSink()
    await run_probes(
        rt, catalog, [(query, 1)], options=ProbeOptions(), sink=sink, concurrency=1, fingerprint="t"
    )
    await rt.aclose()
    assert sink.records[0].error == "claude did not finish within 1s"


# ------------------------------------------------------------------------------------- versions


async def test_every_probe_records_the_runtime_version(tmp_path: Path) -> None:
    from skillreach.runtimes.claude_code import ClaudeCodeRuntime
    from skillreach.runtimes.goose import GooseRuntime
    from skillreach.runtimes.pi import PiRuntime

    catalog = folder_catalog(tmp_path)
    query = Query(id="q1", text="nothing to do", expected_skill=None, kind=QueryKind.out_of_scope)
    runtimes = {
        ClaudeCodeRuntime(
            claude_path=str(FAKES / "claude_stub" / "claude"), api_key="sk-test"
        ): "2.1.328-stub (Claude Code)",
        PiRuntime(pi_path=str(FAKES / "pi_stub" / "pi"), check_residency=False): None,
        GooseRuntime(goose_path=str(FAKES / "goose_stub" / "goose"), check_residency=False): None,
        get_runtime("keyword"): None,
    }
    seen = {}
    for rt, expected in runtimes.items():
        sink = ListSink()
        await run_probes(
            rt,
            catalog,
            [(query, 1), (query, 2)],
            options=ProbeOptions(),
            sink=sink,
            concurrency=2,
            fingerprint="t",
        )
        await rt.aclose()
        versions = {r.runtime_version for r in sink.records}
        assert len(versions) == 1
        version = versions.pop()
        assert version, rt.name
        if expected is not None:
            assert version == expected
        seen[rt.name] = version
    assert seen["pi"].startswith("0.")  # the stand-in prints the version it imitates
    assert seen["goose"].startswith("goose ")
    from skillreach import __version__

    assert seen["keyword"] == f"skillreach {__version__}"


async def test_sdk_runtimes_say_their_package_version() -> None:
    from importlib.metadata import version

    from skillreach.runtimes.anthropic import AnthropicRuntime
    from skillreach.runtimes.openai_compat import OpenAICompatRuntime

    anthropic_rt = AnthropicRuntime(api_key="sk-test", base_url="http://127.0.0.1:9")
    assert await anthropic_rt.version() == f"anthropic {version('anthropic')}"
    await anthropic_rt.aclose()
    openai_rt = OpenAICompatRuntime(model="m", base_url="http://127.0.0.1:9", api_key="k")
    assert await openai_rt.version() == f"openai {version('openai')}"
