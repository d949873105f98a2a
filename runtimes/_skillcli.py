"""What the agent CLIs with a skill tool of their own share (``gemini-cli``, ``opencode``, ``copilot``).

One probe is one process of the real CLI in a fresh folder of its own (``<root>/work``, the working
folder, holding only ``.agents/skills/<name>/`` with exactly the catalog's skills, hard-linked from a
per-catalog template; ``<root>/home``, the probe's own ``HOME``), stdin closed, its whole process group
SIGKILLed at once when the tracker says stop or the timeout expires. Each runtime gives its
configuration files, environment, command line and the reader of its JSON events (a
:class:`SkillToolStream`: the skill tool's call is the activation, read from the CLI's own event).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import re
import shutil
import tempfile
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from skillreach.errors import ConfigError
from skillreach.models import Catalog, Query, Usage
from skillreach.runtimes._agentcli import (
    AgentStream,
    Removals,
    base_env,
    find_executable,
    run_json_lines,
    write_skill,
)
from skillreach.runtimes._relay import ModelRelay, Sequencer, Wire
from skillreach.runtimes._version import program_version
from skillreach.settings import Settings
from skillreach.skills.agent_listing import AgentListing, listing_for
from skillreach.study.contract import Outcome, RuntimeOptions, Tracker, cost_of, default_settings

__all__ = ["CliProbeLoop", "SkillCliOptions", "SkillCliRuntime", "SkillToolStream", "as_int"]

_FOLDER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
PASSED_ENV = ("HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "SSL_CERT_FILE", "LANG", "LC_ALL", "TZ")


class CatalogTemplates:
    """Per catalog, one folder ``skills/<name>/`` of its skills (built once, atomically, under ``root``)
    that every probe's ``.agents/skills`` is linked or copied from; shared by the agent CLIs that
    discover skills in ``.agents/skills`` (codex, gemini-cli, opencode, copilot)."""

    def __init__(self, root: Path) -> None:
        self._root = root
        self._built: dict[str, Path] = {}
        self._lock = threading.Lock()

    def get(self, catalog: Catalog) -> Path:
        key = hashlib.sha256(catalog.digest.encode()).hexdigest()[:16]
        with self._lock:
            tpl = self._built.get(key)
            if tpl is None:
                tpl = self._build(catalog, self._root / f"catalog-{key}")
                self._built[key] = tpl
        return tpl

    def _build(self, catalog: Catalog, dest: Path) -> Path:
        bad = [s.name for s in catalog.skills if not _FOLDER_NAME.fullmatch(s.name)]
        if bad:
            raise ConfigError(
                f"catalog {catalog.id!r}: skill names that cannot be folder names under .agents/skills: "
                f"{', '.join(map(repr, bad))}; rename them (letters, digits, '-', '_', '.')"
            )
        folders = {os.path.normpath(s.folder) for s in catalog.skills if s.folder}
        building = Path(tempfile.mkdtemp(prefix=f".{dest.name}-", dir=self._root))
        try:
            for skill in catalog.skills:
                target = building / "skills" / skill.name
                write_skill(skill, target, symlinks=False)
                if skill.folder:  # a catalog skill inside this one's folder is listed once, as itself
                    own = os.path.normpath(skill.folder)
                    for other in folders:
                        if other != own and other.startswith(own + os.sep):
                            shutil.rmtree(target / os.path.relpath(other, own), ignore_errors=True)
            os.rename(building, dest)
        except BaseException:
            shutil.rmtree(building, ignore_errors=True)
            raise
        return dest


@dataclass
class SkillToolStream(AgentStream):
    """A CLI's events folded: :meth:`skill` for each skill-tool load, :meth:`skill_failed` for a load
    that failed, :meth:`tool` for any other call. With a :class:`~runtimes._relay.Sequencer` (a probe
    through the relay) loads are credited in the model's order; without one, as they come."""

    names: frozenset[str] = frozenset()
    usage: Usage = field(default_factory=Usage)
    turns: int = 0
    outside: set[str] = field(default_factory=set)
    """Skills the agent loaded that are not in the catalog (built-in ones: reported, never scored)."""
    seq: Sequencer | None = None
    skill_tool: ClassVar[tuple[str, str]] = ("skill", "name")
    """The skill tool's name and the argument naming the skill, as the model calls it."""
    _halted: bool = False

    @property
    def stopped(self) -> bool:
        """The probe must stop (its target, or its last turn, was loaded)."""
        return self._halted or (self.seq is not None and self.seq.stopped)

    @classmethod
    def skill_of(cls, tool: str, args: dict[str, Any]) -> str | None:
        """The skill a model's call of ``tool`` with ``args`` loads (None for any other call)."""
        name, arg = cls.skill_tool
        value = args.get(arg) if tool == name else None
        return str(value) if isinstance(value, str) and value else None

    def credit(self, name: str) -> bool:
        """Report a load of ``name`` to the tracker; False when the probe must stop now."""
        return self.activate(name)

    def skill(self, name: str) -> bool:
        """The agent loaded ``name``; False when the probe must stop now."""
        if self.stopped:
            return False
        if name not in self.names:
            self.outside.add(name)
            return True
        if self.seq is not None:
            self.seq.loaded(name)
        elif not self.credit(name):
            self._halted = True
        return not self.stopped

    def skill_failed(self, name: str) -> None:
        """The agent could not load ``name`` (its error is the CLI's own to say)."""
        if self.seq is not None and name in self.names:
            self.seq.failed(name)

    def tool(self, name: str, args: Any) -> None:
        """Another tool call: recorded in compliance mode once the expected skill was loaded."""
        if self.tracker.options.compliance and self.tracker.expected_loaded:
            self.record(name, args if isinstance(args, dict) else {"arguments": args})

    def say(self, text: str, *, delta: bool = False) -> None:
        if not text:
            return
        if delta:
            self._text.append(text)
            self.final_text = "".join(self._text)
        else:
            self._text = [text]
            self.final_text = text

    def take(self, event: dict[str, Any]) -> bool:
        """One event of the CLI (:meth:`feed`); False when the probe must stop now."""
        go = self.feed(event)
        if self.seq is not None:
            self.seq.poke()
        return go and not self.stopped

    def feed(self, event: dict[str, Any]) -> bool:  # pragma: no cover - each CLI's own
        raise NotImplementedError


def as_int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


class CliProbeLoop:
    """What every agent CLI runtime with per-probe folders shares (codex and the skill-tool CLIs): a
    probe waits for a slot, gets a fresh folder under the runtime's root (``_workdir``), runs
    (``_run``), and its folder is removed unless ``keep_workdirs``; the key is scrubbed from errors."""

    executable: str
    model: str | None
    keep_workdirs: bool
    packages: ClassVar[tuple[str, ...]] = ()
    """The npm packages the CLI ships in (its version is read from their ``package.json``)."""
    version_line: ClassVar[str] = "{version}"
    """How the CLI's ``--version`` says its version (``codex-cli {version}``)."""
    _sem: asyncio.Semaphore
    _root: Path
    _key: str | None

    def _workdir(self, catalog: Catalog) -> Path:  # pragma: no cover - each runtime's own
        raise NotImplementedError

    async def _run(
        self, query: Query, catalog: Catalog, tracker: Tracker, root: Path
    ) -> Outcome:  # pragma: no cover - each runtime's own
        raise NotImplementedError

    base_url: str
    relay: bool = True
    reports_usage: ClassVar[bool] = True

    def _scrub(self, text: str) -> str:
        return text.replace(self._key, "***") if self._key else text

    @contextlib.asynccontextmanager
    async def _metered(
        self, seq: Sequencer, wire: Wire, timeout_s: float
    ) -> AsyncIterator[ModelRelay | None]:
        """The probe's relay to the model (:mod:`runtimes._relay`), its turns asked of ``seq``; None when
        the runtime runs without one (``relay = false``)."""
        if not self.relay:
            yield None
            return
        async with ModelRelay(self.base_url, wire, admit=seq.admit, timeout_s=timeout_s) as relay:
            seq.relay = relay
            yield relay

    def _figures(
        self, relay: ModelRelay | None, usage: Usage, turns: int, stopped: bool
    ) -> tuple[Usage, int, bool]:
        """(usage, turns, whether the cost is unknown) of a probe: what the relay saw served, else what
        the CLI said — which, for a probe ended before the CLI said it (or a CLI that never says it),
        leaves the cost unknown, never 0."""
        if relay is not None:
            return relay.usage(), relay.turns(), relay.unknown()
        return usage, turns, stopped or not self.reports_usage

    async def select(self, query: Query, catalog: Catalog, tracker: Tracker) -> Outcome:
        async with self._sem:
            root = await asyncio.to_thread(self._workdir, catalog)
            try:
                return await self._run(query, catalog, tracker, root)
            finally:
                if not self.keep_workdirs:  # off the probe's path; aclose waits for it
                    self.__dict__.setdefault("_removals", Removals()).add(root)

    async def resolve_model(self, model: str | None = None) -> str | None:
        return model or self.model

    async def version(self) -> str | None:
        """The CLI's version line, from its npm package's ``package.json`` when it has one
        (:func:`~runtimes._version.program_version`), else its ``--version``."""
        return await program_version(self.executable, packages=self.packages, line=self.version_line)

    async def aclose(self) -> None:
        removals = self.__dict__.get("_removals")
        if removals is not None:
            await removals.wait()
        await asyncio.to_thread(shutil.rmtree, self._root, True)


class SkillCliOptions(RuntimeOptions):
    """The ``runtime_options`` every agent CLI with a skill tool takes; each adds its program's path
    (``<cli>_path``) and says what its ``base_url`` and ``env_key`` are."""

    base_url: str | None = None
    env_key: str = "OPENAI_API_KEY"
    concurrency: int | None = None
    timeout_s: float | None = None
    """Seconds a probe may take (default: the ``timeout_s`` setting)."""
    extra_args: list[str] | None = None
    extra_env: dict[str, str] | None = None
    keep_workdirs: bool = False
    relay: bool = True
    """Run the CLI through the probe's relay to ``base_url`` (:mod:`runtimes._relay`): tokens, turns and
    cost as served, skills in the model's order, no request after the target. False: the CLI talks to
    ``base_url`` itself, and a probe ended before the CLI reports its usage records the cost unknown."""


class SkillCliRuntime(CliProbeLoop):
    """The probe loop of an agent CLI with a skill tool; subclasses give the CLI's specifics."""

    name: ClassVar[str] = ""
    program: ClassVar[str] = ""
    """The executable's name on PATH."""
    Stream: ClassVar[type[SkillToolStream]]
    """The reader of the CLI's JSON events."""
    install_hint: ClassVar[str] = ""
    default_model: ClassVar[str | None] = None
    """The model when the study names none (a CLI's own default may cost extra requests)."""
    paid: ClassVar[bool] = True
    cached_listing: ClassVar[bool] = False
    batch_mode: ClassVar[bool] = False
    request_tokens: ClassVar[int | None] = None
    """Tokens the CLI's own system prompt and tool definitions add to every request (its first request
    as captured in ``../shared/design/agent-clis/``, bytes / 4, the two-skill listing taken off)."""
    reports_usage: ClassVar[bool] = True
    """False when the CLI's output carries no token counts: without the relay a probe then records no
    cost (unknown)."""
    wire: ClassVar[Wire] = "chat"
    """The API the CLI speaks (what the relay reads)."""
    wants_all_probes: bool = False

    def __init__(
        self,
        model: str | None = None,
        *,
        settings: Settings | None = None,
        path: str | None = None,
        path_option: str = "path",
        base_url: str | None = None,
        default_base_url: str = "",
        env_key: str = "",
        api_key: str | None = None,
        concurrency: int | None = None,
        timeout_s: float | None = None,
        extra_args: list[str] | None = None,
        extra_env: dict[str, str] | None = None,
        keep_workdirs: bool = False,
        relay: bool = True,
    ) -> None:
        self.settings = settings or default_settings()
        self.model = model or self.settings.model or self.default_model
        self.executable = find_executable(
            path, self.program, f"runtime_options.{path_option}", self.install_hint
        )
        self.base_url = (base_url or default_base_url).rstrip("/")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", env_key):
            raise ConfigError(f"runtime_options.env_key {env_key!r} is not an environment variable name")
        self.env_key = env_key
        self._key = api_key or os.environ.get(env_key)
        if not self._key:
            raise ConfigError(
                f"the {self.name} runtime runs {self.program} with an isolated home, so a stored login is "
                f"not seen: set {env_key} (or runtime_options.env_key to the variable that holds the key)"
            )
        self.timeout_s = timeout_s if timeout_s is not None else self.settings.timeout_s
        self._sem = asyncio.Semaphore(concurrency or self.settings.concurrency)
        self.extra_args = list(extra_args or [])
        self.extra_env = dict(extra_env or {})
        self.keep_workdirs = keep_workdirs
        self.relay = relay
        if relay and not re.match(r"https?://[^/\s]+", self.base_url):
            raise ConfigError(
                f"runtime_options.base_url {self.base_url!r} is not an http(s) URL (the {self.name} "
                "runtime relays each probe's requests to it)"
            )
        self.pids: list[int] = []
        """Process ids of every CLI process started (tests check they are gone)."""
        self.outside: set[str] = set()
        self._root = Path(tempfile.mkdtemp(prefix=f"skillreach-{self.name}-"))
        self._templates = CatalogTemplates(self._root)

    # ------------------------------------------------------------------------- the CLI's own
    def write_config(self, root: Path, model: str | None, base_url: str) -> None:
        """The probe's configuration files under ``root`` (``root/home`` exists); ``base_url`` is the
        endpoint the CLI must call (the probe's relay)."""

    def env(self, root: Path, model: str | None, base_url: str) -> dict[str, str]:
        env = base_env(home=root / "home", passed=PASSED_ENV)
        if base_url != self.base_url:  # the relay on 127.0.0.1: never through the caller's proxy
            env["NO_PROXY"] = env["no_proxy"] = ",".join(
                filter(
                    None, ("127.0.0.1,localhost", os.environ.get("NO_PROXY") or os.environ.get("no_proxy"))
                )
            )
        env.update(self.extra_env)
        return env

    def command(self, query: Query, model: str | None, root: Path) -> list[str]:
        raise NotImplementedError

    def stream(self, catalog: Catalog, work: Path, tracker: Tracker) -> SkillToolStream:
        """The reader of one probe's events (:attr:`Stream`), the catalog's skills in ``work``."""
        skills = work / ".agents" / "skills"
        return self.Stream(
            {n: skills / n for n in catalog.names}, work, tracker, names=frozenset(catalog.names)
        )

    def wire_api(self) -> Wire:
        """The API the CLI speaks to its endpoint (what the relay reads)."""
        return self.wire

    def listing(self, catalog: Catalog) -> AgentListing:
        """The catalog as the CLI lists it (in full: none of these CLIs budgets its listing)."""
        return listing_for(self.name, catalog.skills)

    # ----------------------------------------------------------------------------- folders
    def _template(self, catalog: Catalog) -> Path:
        return self._templates.get(catalog)

    def _workdir(self, catalog: Catalog) -> Path:
        tpl = self._template(catalog)
        root = Path(tempfile.mkdtemp(prefix="probe-", dir=self._root))
        dest = root / "work" / ".agents" / "skills"
        try:
            shutil.copytree(tpl / "skills", dest, copy_function=os.link)
        except OSError:
            shutil.rmtree(dest, ignore_errors=True)
            shutil.copytree(tpl / "skills", dest)
        (root / "home").mkdir()
        return root

    # ------------------------------------------------------------------------------- probe
    async def _run(self, query: Query, catalog: Catalog, tracker: Tracker, root: Path) -> Outcome:
        work = root / "work"
        state = self.stream(catalog, work, tracker)
        names = frozenset(catalog.names)
        skill_of = state.skill_of

        def catalog_skill(tool: str, args: dict[str, Any]) -> str | None:
            found = skill_of(tool, args)
            return found if found in names else None

        seq = Sequencer(state.credit, catalog_skill)
        state.seq = seq
        model = tracker.options.model or self.model
        timeout = min(self.timeout_s, tracker.options.timeout_s)  # the runtime's and the study's limits
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        async with self._metered(seq, self.wire_api(), timeout) as relay:
            endpoint = relay.base_url if relay is not None else self.base_url
            await asyncio.to_thread(self.write_config, root, model, endpoint)
            env = self.env(root, model, endpoint)
            env[self.env_key] = self._key or ""
            result = await run_json_lines(
                self.command(query, model, root),
                env=env,
                cwd=work,
                on_event=state.take,
                timeout_s=timeout,
                kill_grace_s=0.0,
                on_start=self.pids.append,
                stop=seq.ending,
            )
            seq.finish()
            if relay is not None:
                await relay.settle(max(deadline - loop.time(), 1.0))
            usage, turns, unknown = self._figures(relay, state.usage, state.turns, state.stopped)
        self.outside |= state.outside
        error = state.error
        if result.timed_out:
            error = f"{self.program} did not finish within {timeout:g}s"
        elif error is None and not state.stopped and result.returncode != 0:
            error = f"{self.program} exited with {result.describe()}"
        return Outcome.from_tracker(
            tracker,
            turns=turns,
            error=self._scrub(error) if error else None,
            usage=usage,
            cost_usd=None if unknown else cost_of(usage, self.settings.price_for(model)),
            resolved_model=model,
            tool_calls=state.tool_calls,
            final_text=state.answer(),
        )
