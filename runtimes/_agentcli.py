"""What every runtime that drives an agent CLI as a child process shares (pi, goose, antigravity-cli,
claude-code, codex; the antigravity-sdk runtime uses the skill layout and activation parts).

- **Finding the program**: :func:`find_executable` (explicit path, else an environment variable, else
  ``PATH``) and :func:`tool_version`.
- **Isolation**: :func:`base_env` (a private ``HOME`` and XDG folders, ``PATH``, locale and the provider
  keys — nothing else of the caller's environment) and :func:`lay_out_skills`, which copies exactly the
  resident skills into one folder, one sub-folder per skill named after it.
- **Activations**: :func:`skill_for_path` (which resident skill a file-reading call touches) and
  :class:`AgentStream`, the base of every event-stream reader: it reports activations to the tracker
  (compliance mode: the probe goes on after the target, later skill reads are not routing decisions),
  records other tool calls and keeps the final answer.
- **The process**: :func:`run_json_lines` starts the program under a supervisor (:mod:`runtimes._reaper`,
  a child subreaper: a process the CLI starts in a session of its own is still ended), hands each JSON
  line of its stdout to a callback as it arrives, and ends the whole tree (SIGTERM, then SIGKILL) when
  the callback says stop, a stop event is set or the timeout expires; :func:`run_command` runs a short
  helper command (``goose skills list``) the same way; :func:`run_error` turns an ended process into the
  probe's error text.
- **Residency**: :class:`ResidencyCache` runs a runtime's residency check once per catalog, however many
  probes ask at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import Any

from skillreach.errors import ConfigError, InputError
from skillreach.models import Catalog, Skill, ToolCall
from skillreach.study.contract import Tracker, compliance_answer

__all__ = [
    "KEY_VARIABLES",
    "AgentStream",
    "ProcessResult",
    "Removals",
    "ResidencyCache",
    "base_env",
    "end_group",
    "find_executable",
    "lay_out_skills",
    "render_skill_md",
    "report_skill",
    "run_command",
    "run_error",
    "run_json_lines",
    "skill_for_path",
    "supervised",
    "tool_version",
    "tree",
    "write_skill",
]

log = logging.getLogger("skillreach.runtimes.agentcli")

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

LINE_LIMIT = 64 * 1024 * 1024
"""The longest stdout line read (a stream-json event can carry a whole file)."""
STDERR_KEPT = 256_000
"""How much of a program's stderr is kept (its end: that is where the reason for a failure is)."""


# ============================================================================ program and environment


def find_executable(explicit: str | None, name: str, env_var: str, hint: str) -> str:
    """The program to run: the explicit path (an option, else the setting ``env_var`` sets), else
    ``name`` on PATH. The environment is the settings' to read, never a runtime's."""
    candidate = explicit or name
    found = shutil.which(candidate)
    if found is None:
        raise ConfigError(
            f"{name} program not found: {candidate!r} is not an executable on PATH; {hint} (or set {env_var})"
        )
    return found


def tool_version(
    executable: str, args: tuple[str, ...] = ("--version",), timeout_s: float = 20.0
) -> str | None:
    """The first line a program prints for ``--version`` (None when it cannot be run or does not answer
    within ``timeout_s``: then its whole process group is killed, so nothing it started lives on)."""
    try:
        proc = subprocess.Popen(
            [executable, *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=base_env(home=Path(tempfile.gettempdir())),
            start_new_session=True,
        )
    except OSError:
        return None
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return None
    text = (out or err or "").strip()
    return text.splitlines()[0] if text else None


def base_env(
    *, home: Path, extra: dict[str, str] | None = None, passed: tuple[str, ...] = ()
) -> dict[str, str]:
    """A minimal environment for an agent process: PATH, locale, a private HOME and the provider keys
    (plus the caller's ``passed`` variables, when set: a CLI's own endpoint, proxy or certificate)."""
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
    for key in (*KEY_VARIABLES, *passed):
        if os.environ.get(key):
            env[key] = os.environ[key]
    env.update(extra or {})
    return env


# ==================================================================================== skill layout


def render_skill_md(skill: Skill) -> str:
    """A SKILL.md for a skill known only from its fields (no folder on disk)."""
    import yaml

    front = dict(skill.frontmatter) or {}
    front["name"] = skill.name
    front["description"] = skill.description
    head = yaml.safe_dump(front, sort_keys=False, allow_unicode=True, width=10_000).strip()
    return f"---\n{head}\n---\n\n{skill.body}\n"


def write_skill(skill: Skill, dest: Path, *, symlinks: bool = True) -> None:
    """Copy a skill's whole folder to ``dest`` (without ``.git``/``__pycache__``), or write its SKILL.md
    when it has no folder. ``symlinks=False`` copies what links point to (an agent that may write
    must not reach the originals through a link)."""
    source = Path(skill.folder) if skill.folder else None
    if source is not None and (source / "SKILL.md").is_file():
        shutil.copytree(source, dest, symlinks=symlinks, ignore=shutil.ignore_patterns(".git", "__pycache__"))
    else:
        dest.mkdir(parents=True)
        (dest / "SKILL.md").write_text(render_skill_md(skill), encoding="utf-8")


def lay_out_skills(catalog: Catalog, dest: Path) -> dict[str, Path]:
    """Copy every resident skill to ``dest/<name>/``; return name → folder."""
    dest.mkdir(parents=True, exist_ok=True)
    out: dict[str, Path] = {}
    for skill in catalog.skills:
        if not skill.name or skill.name in (".", "..") or any(c in skill.name for c in "/\\\0"):
            raise InputError(
                f"skill name {skill.name!r} cannot be a folder name; agents load skills from folders "
                "named after them (fix the SKILL.md `name`)"
            )
        write_skill(skill, dest / skill.name)
        out[skill.name] = dest / skill.name
    return out


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


# ===================================================================================== activations


def report_skill(tracker: Tracker, skill: str) -> bool:
    """Report a skill activation; True when the agent may go on.

    In compliance mode (``ProbeOptions.compliance``) the probe goes on after the expected skill is
    loaded, and later skill reads are no longer routing decisions: nothing more is recorded.
    """
    if tracker.options.compliance and tracker.expected_loaded:
        return True
    go = tracker.invoke(skill)
    return go or (tracker.options.compliance and tracker.expected_loaded)


@dataclass
class AgentStream:
    """The state every agent-stream reader keeps: activations, other tool calls, the final answer.

    Subclasses fold their CLI's events with :meth:`activate` (a skill was loaded), :meth:`record` (any
    other tool call) and :meth:`say` (assistant text); :meth:`answer` is the probe's ``final_text``.
    """

    skill_dirs: dict[str, Path]
    cwd: Path
    tracker: Tracker
    _: KW_ONLY
    model: str | None = None
    final_text: str | None = None
    error: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    _text: list[str] = field(default_factory=list)

    def activate(self, skill: str) -> bool:
        """Report a loaded skill; False when the probe must stop now.

        When compliance mode begins (the expected skill has just loaded), the text so far is dropped:
        the final answer is what the agent says after it read its instructions.
        """
        loaded = self.tracker.expected_loaded
        go = report_skill(self.tracker, skill)
        if self.tracker.options.compliance and self.tracker.expected_loaded and not loaded:
            self.final_text = None
            self._text = []
        return go

    def record(self, tool: str, args: dict[str, Any]) -> bool:
        self.tool_calls.append(ToolCall(tool=tool, input=args))
        return True

    def path_skill(self, args: dict[str, Any], keys: tuple[str, ...]) -> str | None:
        """The resident skill the first of ``keys`` in ``args`` that names a path inside one points at."""
        for key in keys:
            if key in args:
                found = skill_for_path(args.get(key), self.skill_dirs, self.cwd)
                if found is not None:
                    return found
        return None

    def answer(self) -> str | None:
        """The probe's ``final_text`` (``""`` in compliance mode when the agent ended with no text)."""
        return compliance_answer(self.tracker, self.final_text)


# ========================================================================================= process


@dataclass
class ProcessResult:
    returncode: int | None
    stderr: str
    stopped_early: bool
    """The event callback said stop and the group was ended."""
    timed_out: bool
    lines: int
    killed: bool = False
    """The group was ended by us while the program still ran (stop, timeout, or it would not exit)."""

    def describe(self) -> str:
        tail = " ".join(self.stderr.strip().splitlines()[-3:])[:400]
        status = "a timeout" if self.timed_out else f"exit code {self.returncode}"
        return f"{status}{': ' + tail if tail else ''}"


def run_error(program: str, error: str | None, result: ProcessResult, timeout_s: float) -> str | None:
    """The probe's error: the stream's own, else a failed exit, else a timeout; None when all went well."""
    if error is None and not result.stopped_early and result.returncode != 0:
        error = f"{program} exited with {result.describe()}"
    if error is None and result.timed_out:
        error = f"{program} timed out after {timeout_s:g}s"
    return error


REAPER = Path(__file__).with_name("_reaper.py")
"""The supervisor each agent CLI runs under on Linux (:mod:`runtimes._reaper`): a child subreaper, so
nothing the CLI starts outlives the probe, even in a session of its own."""
SUPERVISED = sys.platform.startswith("linux") and REAPER.is_file()


def supervised(cmd: list[str], grace_s: float) -> list[str]:
    """``cmd`` under the supervisor (Linux), which ends the CLI's whole tree, whatever session each
    process moved to: when the CLI exits, or on SIGTERM (after ``grace_s`` of SIGTERM to the tree)."""
    if not SUPERVISED:
        return cmd
    return [sys.executable, "-I", "-S", str(REAPER), "--grace", f"{max(grace_s, 0.0):g}", "--", *cmd]


def tree(root: int) -> list[int]:
    """Pids of every process below ``root``, from the parent links in ``/proc`` (Linux); the walk goes
    through ended processes (see :func:`runtimes._reaper.descendants`)."""
    children: dict[int, list[int]] = {}
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                tail = Path(f"/proc/{name}/stat").read_bytes().rsplit(b")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if len(tail) > 1:
                children.setdefault(int(tail[1]), []).append(int(name))
    found: list[int] = []
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


async def end_group(proc: asyncio.subprocess.Process, grace_s: float = 2.0) -> None:
    """End the program and everything it started.

    Under the supervisor: SIGTERM to it alone; it SIGTERMs the whole tree, SIGKILLs what is left after
    ``grace_s`` and exits. If it has not exited shortly after, every process of the tree (walked in
    ``/proc``) and of the group is SIGKILLed. Without it: SIGTERM to the process group, then SIGKILL
    to the group after ``grace_s`` — even when the leader obeyed, a child that ignores SIGTERM must not
    go on paying for tokens.
    """
    if SUPERVISED:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(proc.pid, signal.SIGTERM)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(proc.wait(), grace_s + 3.0)
        if proc.returncode is None:  # the supervisor did not answer: end the tree from here
            for pid in [proc.pid, *tree(proc.pid)]:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
    else:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGTERM)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(proc.wait(), grace_s)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(proc.wait(), 5.0)


async def _keep_tail(stream: asyncio.StreamReader, chunks: deque[bytes]) -> None:
    size = 0
    while chunk := await stream.read(65536):
        chunks.append(chunk)
        size += len(chunk)
        while size > STDERR_KEPT and len(chunks) > 1:
            size -= len(chunks.popleft())


async def run_json_lines(
    cmd: list[str],
    *,
    env: dict[str, str],
    cwd: Path,
    on_event: Callable[[dict[str, Any]], bool],
    timeout_s: float,
    stdin: str | None = None,
    kill_grace_s: float = 2.0,
    on_start: Callable[[int], object] | None = None,
    stop: asyncio.Event | None = None,
) -> ProcessResult:
    """Run ``cmd`` under the supervisor (:func:`supervised`), in its own session, handing each JSON line
    of stdout to ``on_event``.

    When ``on_event`` returns False, or ``stop`` is set, the program and everything it started are
    ended at once (:func:`end_group`): the agent stops paying for tokens. ``timeout_s`` bounds the whole
    run (reading and the exit after the stream ends); at the timeout the tree is ended too. When the
    program exits on its own, anything it left behind is killed. Lines that are not JSON objects are
    skipped.
    """
    proc = await asyncio.create_subprocess_exec(
        *supervised(cmd, kill_grace_s),
        cwd=str(cwd),
        env=env,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
        limit=LINE_LIMIT,
    )
    if on_start is not None:
        on_start(proc.pid)
    assert proc.stdout is not None
    assert proc.stderr is not None
    stderr_chunks: deque[bytes] = deque()
    stderr_task = asyncio.create_task(_keep_tail(proc.stderr, stderr_chunks))
    stopped = timed_out = killed = False
    lines = 0

    async def read_events(stdout: asyncio.StreamReader) -> None:
        nonlocal stopped, lines
        while raw := await _next_line(stdout, stop):
            lines += 1
            text = raw.decode("utf-8", "replace").strip()
            if not text:
                continue
            try:
                event = json.loads(text)
            except ValueError:
                log.debug("%s printed a non-JSON line: %.200s", Path(cmd[0]).name, text)
                continue
            if isinstance(event, dict) and not on_event(event):
                stopped = True
                return
        if stop is not None and stop.is_set():
            stopped = True

    try:
        async with asyncio.timeout(timeout_s):
            if stdin is not None and proc.stdin is not None:
                proc.stdin.write(stdin.encode())
                with contextlib.suppress(ConnectionError):
                    await proc.stdin.drain()
            await read_events(proc.stdout)
            if not stopped:
                if proc.stdin is not None:
                    proc.stdin.close()
                await proc.wait()  # the stream ended: let the program exit on its own
    except TimeoutError:
        timed_out = True
    finally:
        if proc.returncode is None:
            killed = True
            await end_group(proc, kill_grace_s)
        else:  # the leader is gone; end anything it left in its group
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stderr_task, timeout=5)
        if not stderr_task.done():
            stderr_task.cancel()
    stderr = b"".join(stderr_chunks).decode("utf-8", "replace")
    return ProcessResult(proc.returncode, stderr, stopped, timed_out, lines, killed)


async def _next_line(stdout: asyncio.StreamReader, stop: asyncio.Event | None) -> bytes:
    """The next line of ``stdout``; ``b""`` at its end or once ``stop`` is set."""
    if stop is None:
        return await stdout.readline()
    if stop.is_set():
        return b""
    reading = asyncio.ensure_future(stdout.readline())
    waiting = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({reading, waiting}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiting.cancel()
    if reading.done():
        return reading.result()
    reading.cancel()  # a line half read is dropped: the program is being ended
    return b""


async def run_command(
    cmd: list[str], *, env: dict[str, str], cwd: Path, timeout_s: float
) -> tuple[int | None, str] | None:
    """Run a short helper command under the supervisor: (exit code, stdout), None at the timeout."""
    proc = await asyncio.create_subprocess_exec(
        *supervised(cmd, 0.5),
        cwd=str(cwd),
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout=timeout_s)
    except TimeoutError:
        await end_group(proc, 0.5)
        return None
    return proc.returncode, out.decode("utf-8", "replace")


# ======================================================================================= residency


class ResidencyCache:
    """A runtime's residency check, run once per catalog (by digest) however many probes ask at once.

    ``check`` answers None when the agent's own skill list is exactly the catalog, else the problem
    (every probe of that catalog then fails with it).
    """

    def __init__(self, check: Callable[[Catalog], Awaitable[str | None]], *, enabled: bool = True) -> None:
        self._check = check
        self.enabled = enabled
        self._results: dict[str, str | None] = {}
        self._lock = asyncio.Lock()
        self.checks = 0
        """Checks run (one per catalog, however many probes ask at once)."""

    async def problem(self, catalog: Catalog) -> str | None:
        if not self.enabled:
            return None
        async with self._lock:
            if catalog.digest not in self._results:
                self.checks += 1
                self._results[catalog.digest] = await self._check(catalog)
            return self._results[catalog.digest]


class Removals:
    """Finished probes' folders, removed off the probes' path: a slot and its record do not wait for the
    ``rmtree`` (on a loaded machine each hop to a worker thread costs tens of milliseconds);
    :meth:`wait` (a runtime's ``aclose``) waits for every removal."""

    def __init__(self) -> None:
        self._pending: set[asyncio.Task[None]] = set()

    def add(self, folder: Path) -> None:
        task = asyncio.ensure_future(asyncio.to_thread(shutil.rmtree, folder, True))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def wait(self) -> None:
        if self._pending:
            await asyncio.gather(*list(self._pending), return_exceptions=True)
