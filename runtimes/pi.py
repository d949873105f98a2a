"""``pi``: the pi coding agent (``@mariozechner/pi-coding-agent`` on the npm registry), run headless.

One probe is one process::

    pi -p --mode json --no-session --provider P --model M --tools read
       --no-skills --skill <dir>/<name> ... --no-extensions --no-prompt-templates --no-context-files
       --no-themes "<query>"

in a fresh folder: ``HOME``, ``PI_CODING_AGENT_DIR`` (pi's config dir) and the working folder are
temporary, ``--no-skills`` turns discovery off and each resident skill is passed with ``--skill`` from
a copy of its folder, so the catalog is exactly the catalog. pi lists the skills in its system prompt
(name, description, location of SKILL.md) and loads one by reading its file with the ``read`` tool:
**an activation is a read of a file inside a resident skill's folder**. Tools are limited to reading
(``read`` by default; ``grep,find,ls`` may be added with ``tools=``).

Events (``--mode json``, one JSON object a line, seen from pi 0.73): a ``session`` header, then
``agent_start``, ``turn_start``, ``message_start``/``message_update``/``message_end`` (assistant
messages carry ``model``, ``usage`` {input, output, cacheRead, cacheWrite, cost.total},
``stopReason``, ``errorMessage``), ``tool_execution_start`` {toolName, args} / ``tool_execution_end``,
``turn_end``, ``auto_retry_start``/``auto_retry_end``, ``agent_end``. Activations are taken from
``tool_execution_start`` as they arrive; when the tracker says stop (early exit or ``max_turns``) the
whole process group is ended at once (live early exit).

Endpoint: pi does not read ``ANTHROPIC_BASE_URL``. Its own configuration is ``models.json`` in its
config dir, where ``{"providers": {"anthropic": {"baseUrl": URL}}}`` reroutes a built-in provider
(keeping its models). The runtime writes that file per probe from ``base_url`` (option, else
``ANTHROPIC_BASE_URL`` for the anthropic provider, ``OPENAI_BASE_URL`` for openai); ``models_json``
copies a file of your own instead (custom providers such as Ollama or vLLM).

Retries, turns, cost: pi retries transient provider errors itself (``settings.json`` ``retry``, bounded
by ``max_retries``; its provider SDK honours ``retry-after``); a probe's turns are pi's model replies;
usage is summed over them and priced from the settings' price table (pi's own figure for unpriced
models). Tested with the real pi 0.73.1 from npm against the local Messages API stand-in, and in CI
with a stand-in executable printing the event format recorded from it.

Residency: pi reports its catalog only in RPC mode, so once per catalog the runtime starts pi in the
same isolated layout with ``--mode rpc``, asks ``get_commands`` and checks that its ``skill:*``
commands are exactly the resident skills; a mismatch fails the probes with the difference named.

The helpers at the end (executable lookup, isolated folders, skill layout, a process-group-aware
line reader) are shared with the goose and antigravity-cli runtimes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from runtimes.base import Outcome, Tracker
from skillreach.errors import ConfigError, InputError
from skillreach.models import Catalog, Query, Skill, ToolCall, Usage
from skillreach.settings import Price, Settings

__all__ = [
    "KEY_VARIABLES",
    "PiRuntime",
    "ProcessResult",
    "base_env",
    "find_executable",
    "lay_out_skills",
    "parse_pi_events",
    "report_skill",
    "run_json_lines",
    "skill_for_path",
    "tool_version",
    "usage_cost",
]

PI_INSTALL_HINT = "install it with `npm install -g @mariozechner/pi-coding-agent` or pass pi_path=/path/to/pi"

# Provider credentials passed through to agent processes (never logged, never written to disk).
KEY_VARIABLES = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_OAUTH_TOKEN",
    "OPENAI_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "GOOGLE_GENAI_USE_VERTEXAI",
    "GOOGLE_CLOUD_PROJECT",
    "GOOGLE_CLOUD_LOCATION",
    "GROQ_API_KEY",
    "MISTRAL_API_KEY",
    "OPENROUTER_API_KEY",
    "DEEPSEEK_API_KEY",
    "XAI_API_KEY",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_REGION",
    "AWS_PROFILE",
    "AZURE_OPENAI_API_KEY",
    "AZURE_OPENAI_BASE_URL",
)

_READ_TOOLS = {"read"}
_BASE_URL_ENV = {"anthropic": "ANTHROPIC_BASE_URL", "openai": "OPENAI_BASE_URL"}


class PiRuntime:
    """The pi CLI, one isolated process per probe."""

    name: ClassVar[str] = "pi"

    def __init__(
        self,
        *,
        model: str | None = None,
        settings: Settings | None = None,
        pi_path: str | None = None,
        provider: str = "anthropic",
        base_url: str | None = None,
        models_json: str | Path | None = None,
        tools: str = "read",
        thinking: str | None = None,
        timeout_s: float | None = None,
        env: dict[str, str] | None = None,
        check_residency: bool = True,
        max_retries: int = 6,
        **_ignored: Any,
    ) -> None:
        self.settings = settings or Settings()
        self.model = model or self.settings.model
        self.executable = find_executable(pi_path, "pi", "SKILLREACH_PI_PATH", PI_INSTALL_HINT)
        self.provider = provider
        env_var = _BASE_URL_ENV.get(provider)
        self.base_url = base_url or (os.environ.get(env_var) if env_var else None) or None
        self.models_json = Path(models_json) if models_json else None
        if self.models_json is not None and not self.models_json.is_file():
            raise ConfigError(f"{self.models_json}: models_json file not found")
        names = [t.strip() for t in tools.split(",") if t.strip()]
        writing = sorted(set(names) - {"read", "grep", "find", "ls"})
        if writing:
            raise ConfigError(f"pi tools must be read-only (read, grep, find, ls); got {', '.join(writing)}")
        self.tools = ",".join(names) or "read"
        self.thinking = thinking
        self.timeout_s = timeout_s if timeout_s is not None else self.settings.timeout_s
        self.extra_env = dict(env or {})
        self.check_residency = check_residency
        self.max_retries = max_retries
        self._checked: dict[str, str | None] = {}
        self._check_lock = asyncio.Lock()

    async def aclose(self) -> None:
        return None

    def _cost(self, state: PiStream) -> float | None:
        """The price table's cost (as for every runtime), else the cost pi computed itself."""
        priced = usage_cost(state.usage, self.settings.price_for(state.model or self.model))
        if priced is not None:
            return priced
        return state.cost if state.cost > 0 else None

    # ---------------------------------------------------------------------------------- layout
    def _write_config(self, agent_dir: Path) -> None:
        agent_dir.mkdir(parents=True, exist_ok=True)
        if self.models_json is not None:
            shutil.copyfile(self.models_json, agent_dir / "models.json")
        elif self.base_url:
            config = {"providers": {self.provider: {"baseUrl": self.base_url}}}
            (agent_dir / "models.json").write_text(json.dumps(config), encoding="utf-8")
        # No startup chatter; pi's own retries (429, 5xx, overloaded: exponential backoff, and the
        # provider SDK honours retry-after) are bounded by our max_retries.
        settings = {
            "quietStartup": True,
            "enableSkillCommands": True,
            "retry": {"enabled": self.max_retries > 0, "maxRetries": self.max_retries, "baseDelayMs": 1000},
        }
        (agent_dir / "settings.json").write_text(json.dumps(settings), encoding="utf-8")

    def _env(self, root: Path) -> dict[str, str]:
        env = base_env(home=root / "home", extra=self.extra_env)
        env["PI_CODING_AGENT_DIR"] = str(root / "agent")
        env["PI_CODING_AGENT_SESSION_DIR"] = str(root / "sessions")
        env["PI_OFFLINE"] = "1"
        env["PI_TELEMETRY"] = "0"
        return env

    def _args(self, skill_dirs: dict[str, Path]) -> list[str]:
        args = [self.executable, "--no-session", "--provider", self.provider]
        if self.model:
            args += ["--model", self.model]
        if self.thinking:
            args += ["--thinking", self.thinking]
        args += ["--tools", self.tools, "--no-skills"]
        for folder in skill_dirs.values():
            args += ["--skill", str(folder)]
        args += ["--no-extensions", "--no-prompt-templates", "--no-context-files", "--no-themes"]
        return args

    # ------------------------------------------------------------------------------- residency
    async def _residency_problem(self, catalog: Catalog) -> str | None:
        """None when pi's own skill list is exactly the catalog (checked once per catalog)."""
        if not self.check_residency:
            return None
        async with self._check_lock:
            if catalog.digest not in self._checked:
                self._checked[catalog.digest] = await self._check(catalog)
            return self._checked[catalog.digest]

    async def _check(self, catalog: Catalog) -> str | None:
        with tempfile.TemporaryDirectory(prefix="skillreach-pi-") as tmp:
            root = Path(tmp)
            skill_dirs = lay_out_skills(catalog, root / "skills")
            self._write_config(root / "agent")
            (root / "work").mkdir()
            cmd = [*self._args(skill_dirs), "--mode", "rpc"]
            request = json.dumps({"id": "residency", "type": "get_commands"}) + "\n"
            seen: list[str] = []

            def on_event(event: dict[str, Any]) -> bool:
                if event.get("id") == "residency" and event.get("type") == "response":
                    for c in (event.get("data") or {}).get("commands", []):
                        if c.get("source") == "skill" and str(c.get("name", "")).startswith("skill:"):
                            seen.append(str(c["name"])[len("skill:") :])
                    return False
                return True

            result = await run_json_lines(
                cmd,
                env=self._env(root),
                cwd=root / "work",
                on_event=on_event,
                timeout_s=min(self.timeout_s, 60.0),
                stdin=request,
            )
            if not result.stopped_early:
                return f"pi did not report its skills (--mode rpc get_commands): {result.describe()}"
            missing = sorted(set(catalog.names) - set(seen))
            extra = sorted(set(seen) - set(catalog.names))
            if missing or extra:
                return (
                    "pi's resident skills differ from the catalog: "
                    f"missing {missing or '[]'}, not in the catalog {extra or '[]'} "
                    "(a skill whose frontmatter pi rejects is left out; run `skillreach lint`)"
                )
            return None

    # ----------------------------------------------------------------------------------- probe
    async def select(self, query: Query, catalog: Catalog, tracker: Tracker) -> Outcome:
        problem = await self._residency_problem(catalog)
        if problem is not None:
            return Outcome.from_tracker(tracker, error=problem)
        with tempfile.TemporaryDirectory(prefix="skillreach-pi-") as tmp:
            root = Path(tmp)
            skill_dirs = lay_out_skills(catalog, root / "skills")
            self._write_config(root / "agent")
            work = root / "work"
            work.mkdir()
            state = PiStream(skill_dirs, work, tracker)
            cmd = [*self._args(skill_dirs), "-p", "--mode", "json", query.text]
            result = await run_json_lines(
                cmd, env=self._env(root), cwd=work, on_event=state.feed, timeout_s=self.timeout_s
            )
        error = state.error
        if error is None and not result.stopped_early and result.returncode != 0:
            error = f"pi exited with {result.describe()}"
        if error is None and result.timed_out:
            error = f"pi timed out after {self.timeout_s:g}s"
        return Outcome.from_tracker(
            tracker,
            turns=state.requests,
            error=error,
            usage=state.usage,
            cost_usd=self._cost(state),
            resolved_model=state.model,
            tool_calls=state.tool_calls,
            final_text=state.final_text,
        )


def usage_cost(usage: Usage, price: Price | None) -> float | None:
    """USD for ``usage`` at ``price`` (per million tokens), None when the model is not priced."""
    if price is None:
        return None
    return (
        usage.input_tokens * price.input
        + usage.output_tokens * price.output
        + usage.cache_creation_input_tokens * price.cache_write
        + usage.cache_read_input_tokens * price.cache_read
    ) / 1_000_000


@dataclass
class PiStream:
    """Folds pi's JSON events into tracker calls, usage and the final text."""

    skill_dirs: dict[str, Path]
    cwd: Path
    tracker: Tracker
    usage: Usage = field(default_factory=Usage)
    cost: float = 0.0
    model: str | None = None
    final_text: str | None = None
    error: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    requests: int = 0
    """Model replies seen (assistant messages): the probe's turns, as the API runtimes count them."""

    def feed(self, event: dict[str, Any]) -> bool:
        """Take one event; return False when the probe must stop now."""
        kind = event.get("type")
        if kind == "message_end":
            self._message(event.get("message") or {})
        elif kind == "auto_retry_start":
            self.error = None  # pi retries a transient provider error itself; judge the retry
        elif kind == "auto_retry_end" and not event.get("success", True):
            self.error = f"pi: {event.get('finalError') or 'retries exhausted'}"
        elif kind == "tool_execution_start":
            name = str(event.get("toolName", ""))
            raw_args = event.get("args")
            args: dict[str, Any] = raw_args if isinstance(raw_args, dict) else {}
            skill = (
                skill_for_path(args.get("path"), self.skill_dirs, self.cwd) if name in _READ_TOOLS else None
            )
            if skill is None:
                self.tool_calls.append(ToolCall(tool=name, input=args))
                return True
            return report_skill(self.tracker, skill)
        return True

    def _message(self, message: dict[str, Any]) -> None:
        if message.get("role") != "assistant":
            return
        self.requests += 1
        usage = message.get("usage") or {}
        self.usage = self.usage + Usage(
            input_tokens=int(usage.get("input") or 0),
            output_tokens=int(usage.get("output") or 0),
            cache_creation_input_tokens=int(usage.get("cacheWrite") or 0),
            cache_read_input_tokens=int(usage.get("cacheRead") or 0),
        )
        self.cost += float((usage.get("cost") or {}).get("total") or 0.0)
        self.model = message.get("model") or self.model
        text = "".join(
            str(b.get("text", "")) for b in message.get("content") or [] if b.get("type") == "text"
        )
        if text:
            self.final_text = text
        if message.get("stopReason") in ("error", "aborted"):
            self.error = f"pi: {message.get('errorMessage') or message.get('stopReason')}"


def parse_pi_events(lines: list[str], skill_dirs: dict[str, Path], cwd: Path, tracker: Tracker) -> PiStream:
    """Fold recorded event lines (for tests and replays) as a live probe would."""
    state = PiStream(skill_dirs, cwd, tracker)
    for raw in lines:
        line = raw.strip()
        if not line:
            continue
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and not state.feed(event):
            break
    return state


# ============================================================ helpers shared by the CLI runtimes


def report_skill(tracker: Tracker, skill: str) -> bool:
    """Report a skill activation; True when the agent may go on.

    In compliance mode (``ProbeOptions.compliance``) the probe goes on after the expected skill is
    loaded, and later skill reads are no longer routing decisions: nothing more is recorded.
    """
    if tracker.options.compliance and tracker.expected_loaded:
        return True
    go = tracker.invoke(skill)
    return go or (tracker.options.compliance and tracker.expected_loaded)


def find_executable(explicit: str | None, name: str, env_var: str, hint: str) -> str:
    """The program to run: the explicit path, else ``$env_var``, else ``name`` on PATH."""
    candidate = explicit or os.environ.get(env_var) or name
    found = shutil.which(candidate)
    if found is None:
        where = (
            f"{candidate!r} (from {env_var})" if not explicit and os.environ.get(env_var) else repr(candidate)
        )
        raise ConfigError(f"{name} program not found: {where} is not an executable on PATH; {hint}")
    return found


def tool_version(
    executable: str, args: tuple[str, ...] = ("--version",), timeout_s: float = 20.0
) -> str | None:
    """The first line a program prints for ``--version`` (None when it cannot be run)."""
    try:
        proc = subprocess.run(
            [executable, *args],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
            env=base_env(home=Path(tempfile.gettempdir())),
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (proc.stdout or proc.stderr or "").strip()
    return text.splitlines()[0] if text else None


def base_env(*, home: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """A minimal environment for an agent process: PATH, locale, a private HOME and the provider keys."""
    home.mkdir(parents=True, exist_ok=True)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "TMPDIR": os.environ.get("TMPDIR", tempfile.gettempdir()),
        "LANG": os.environ.get("LANG", "C.UTF-8"),
        "TERM": "dumb",
        "NO_COLOR": "1",
        "CI": "1",
    }
    for key in KEY_VARIABLES:
        if os.environ.get(key):
            env[key] = os.environ[key]
    env.update(extra or {})
    return env


def lay_out_skills(catalog: Catalog, dest: Path) -> dict[str, Path]:
    """Copy every resident skill to ``dest/<name>/`` (its whole folder when known); return name → folder."""
    dest.mkdir(parents=True, exist_ok=True)
    out: dict[str, Path] = {}
    for skill in catalog.skills:
        if not skill.name or skill.name in (".", "..") or any(c in skill.name for c in "/\\\0"):
            raise InputError(
                f"skill name {skill.name!r} cannot be a folder name; agents load skills from folders "
                "named after them (fix the SKILL.md `name`)"
            )
        target = dest / skill.name
        source = Path(skill.folder) if skill.folder else None
        if source is not None and (source / "SKILL.md").is_file():
            shutil.copytree(source, target, symlinks=True, ignore=shutil.ignore_patterns(".git"))
        else:
            target.mkdir(parents=True)
            (target / "SKILL.md").write_text(render_skill_md(skill), encoding="utf-8")
        out[skill.name] = target
    return out


def render_skill_md(skill: Skill) -> str:
    import yaml

    front = dict(skill.frontmatter) or {}
    front["name"] = skill.name
    front["description"] = skill.description
    head = yaml.safe_dump(front, sort_keys=False, allow_unicode=True, width=10_000).strip()
    return f"---\n{head}\n---\n\n{skill.body}\n"


def skill_for_path(path: Any, skill_dirs: dict[str, Path], cwd: Path) -> str | None:
    """The resident skill whose folder holds ``path`` (relative paths are taken from ``cwd``)."""
    if not isinstance(path, str) or not path.strip():
        return None
    p = Path(os.path.expanduser(path.strip().removeprefix("@")))
    if not p.is_absolute():
        p = cwd / p
    resolved = Path(os.path.normpath(p))
    for name, folder in skill_dirs.items():
        base = Path(os.path.normpath(folder))
        if resolved == base or base in resolved.parents:
            return name
    return None


@dataclass
class ProcessResult:
    returncode: int | None
    stderr: str
    stopped_early: bool
    timed_out: bool
    lines: int

    def describe(self) -> str:
        tail = " ".join(self.stderr.strip().splitlines()[-3:])[:400]
        status = "a timeout" if self.timed_out else f"exit code {self.returncode}"
        return f"{status}{': ' + tail if tail else ''}"


async def run_json_lines(
    cmd: list[str],
    *,
    env: dict[str, str],
    cwd: Path,
    on_event: Callable[[dict[str, Any]], bool],
    timeout_s: float,
    stdin: str | None = None,
) -> ProcessResult:
    """Run ``cmd`` in its own process group, handing each JSON line of stdout to ``on_event``.

    When ``on_event`` returns False the whole group is ended at once (SIGTERM, then SIGKILL after 2 s):
    the agent and anything it started stop paying for tokens. Non-JSON lines are ignored.
    """
    proc = await asyncio.create_subprocess_exec(
        *cmd,
        cwd=str(cwd),
        env=env,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
        limit=64 * 1024 * 1024,
    )
    assert proc.stdout is not None
    assert proc.stderr is not None
    stderr_chunks: list[bytes] = []

    async def drain_stderr() -> None:
        assert proc.stderr is not None
        size = 0
        while chunk := await proc.stderr.read(65536):
            if size < 256_000:
                stderr_chunks.append(chunk)
                size += len(chunk)

    stderr_task = asyncio.create_task(drain_stderr())
    if stdin is not None and proc.stdin is not None:
        proc.stdin.write(stdin.encode())
        with contextlib.suppress(ConnectionError):
            await proc.stdin.drain()
    stopped = False
    timed_out = False
    lines = 0

    async def read_events() -> None:
        nonlocal stopped, lines
        assert proc.stdout is not None
        while raw := await proc.stdout.readline():
            lines += 1
            text = raw.decode("utf-8", "replace").strip()
            if not text.startswith("{"):
                continue
            try:
                event = json.loads(text)
            except ValueError:
                continue
            if isinstance(event, dict) and not on_event(event):
                stopped = True
                return

    try:
        await asyncio.wait_for(read_events(), timeout=timeout_s)
    except TimeoutError:
        timed_out = True
    finally:
        if stopped or timed_out:
            await _end_group(proc)
        else:
            if proc.stdin is not None:
                proc.stdin.close()
            try:
                await asyncio.wait_for(proc.wait(), timeout=10)
            except TimeoutError:
                await _end_group(proc)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stderr_task, timeout=5)
        if not stderr_task.done():
            stderr_task.cancel()
    stderr = b"".join(stderr_chunks).decode("utf-8", "replace")
    return ProcessResult(proc.returncode, stderr, stopped, timed_out, lines)


async def _end_group(proc: asyncio.subprocess.Process) -> None:
    """SIGTERM the process group, SIGKILL it if it has not gone after 2 s."""
    for sig, grace in ((signal.SIGTERM, 2.0), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            await asyncio.wait_for(proc.wait(), timeout=grace)
            return
        except TimeoutError:
            continue
