"""One service per folder, and what it says about itself.

``skillreach serve`` holds an OS file lock (``fcntl.flock``) on ``.skillreach/serve.lock`` of its working
folder (and on ``serve.lock`` in ``PREFECT_HOME`` when that lies elsewhere) for as long as it runs. The
kernel drops the lock with its holder, however it ends: a second ``serve`` in the folder is refused in one
line naming the running one (its pid and URL), and a lock a killed ``serve`` left is simply free — the next
one takes it over (and ends what the dead one left running: its server and worker).

Beside the lock, ``.skillreach/service.json`` describes the service: its folder, pid, Prefect URL, work
pool, the configuration its flow runs read (the study configuration file, the skills repository, the
baselines folder and branch, the store — its URL with any password masked, never the secret itself), and
the restarts of its server and worker. ``status``, ``baseline status``, ``alerts`` and ``gc`` read it to
describe the service from wherever they run (:func:`find_service`).

File I/O and a lock; no Prefect, no network.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from skillreach.errors import InputError

__all__ = [
    "DESCRIPTOR",
    "LOCK",
    "MAX_DESCRIPTOR_BYTES",
    "MAX_RESTARTS_KEPT",
    "SERVICE_ENV",
    "ServiceInfo",
    "ServiceLock",
    "ServiceRunning",
    "find_service",
    "is_running",
    "mask_url",
    "read_service",
    "state_dir",
    "write_service",
]

LOCK = "serve.lock"
DESCRIPTOR = "service.json"
SERVICE_ENV = "SKILLREACH_SERVICE"
"""A service's folder: which service ``status``, ``baseline status``, ``alerts`` and ``gc`` describe."""
MAX_DESCRIPTOR_BYTES = 256 * 1024
"""A ``service.json`` larger than this is not read (it is ours, but it sits in a folder anyone can write)."""
MAX_RESTARTS_KEPT = 50
"""The latest restarts a descriptor keeps (``restart_count`` counts them all)."""


def state_dir(folder: Path) -> Path:
    """``.skillreach`` of a service's working folder: its lock and its descriptor."""
    return folder / ".skillreach"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def mask_url(url: str) -> tuple[str, bool]:
    """``(url with its password masked, whether it had one)``; a URL that does not parse is masked whole
    after its scheme."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):
        scheme = url.split(":", 1)[0] if ":" in url else "?"
        return f"{scheme}:***", True
    has = parsed.password is not None
    return parsed.render_as_string(hide_password=True), has


@dataclass(frozen=True)
class ServiceInfo:
    """What ``.skillreach/service.json`` says about a service (no secret: the store's password masked)."""

    folder: str
    pid: int
    api: str
    pool: str
    started_at: str
    prefect_home: str = ""
    config_file: str | None = None
    """``$SKILLREACH_STUDY_CONFIG`` as the service read it (absolute), or ``None``: the bundled example."""
    skills: tuple[str, ...] = ()
    queries: str | None = None
    repository: str | None = None
    """The git top of the skills' repository (where the baselines are), or ``None`` outside git."""
    baselines_dir: str = "baselines"
    baselines_branch: str = "skillreach/baselines"
    home: str = ""
    """The store's home (the SQLite store is ``home/skillreach.db``), absolute."""
    store: str = ""
    """The store's URL, password masked."""
    store_secret: bool = False
    """The store's URL has a password: a reader needs ``SKILLREACH_DATABASE_URL`` to open it."""
    ready_at: str | None = None
    server_pid: int | None = None
    """The Prefect server this serve started (``None``: it used one already running)."""
    worker_pid: int | None = None
    restarts: tuple[dict[str, Any], ...] = ()
    restart_count: int = 0
    schema: int = 1
    running: bool = field(default=False, compare=False)
    """Set when read: whether the folder's lock is held now (not stored)."""

    @property
    def ui(self) -> str:
        return self.api.rstrip("/").removesuffix("/api")

    def line(self) -> str:
        """One line: which service this is, and whether it runs."""
        state = (f"running (pid {self.pid}, {self.ui})" if self.running
                 else f"not running (pid {self.pid} ended; it served {self.ui})")
        return f"service in {self.folder}: {state}"

    def with_restart(self, what: str, *, old_pid: int | None, code: int | None, pid: int | None,
                     at: str | None = None) -> ServiceInfo:
        entry = {"what": what, "at": at or _now(), "old_pid": old_pid, "code": code, "pid": pid}
        kept = (*self.restarts, entry)[-MAX_RESTARTS_KEPT:]
        return replace(self, restarts=kept, restart_count=self.restart_count + 1)

    def to_json(self) -> str:
        data = asdict(self)
        data.pop("running", None)
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def _from_mapping(data: Mapping[str, Any], where: Path) -> ServiceInfo:
    try:
        return ServiceInfo(
            folder=str(data["folder"]), pid=int(data["pid"]), api=str(data["api"]), pool=str(data["pool"]),
            started_at=str(data["started_at"]), prefect_home=str(data.get("prefect_home") or ""),
            config_file=_opt(data.get("config_file")),
            skills=tuple(str(s) for s in data.get("skills") or ()),
            queries=_opt(data.get("queries")), repository=_opt(data.get("repository")),
            baselines_dir=str(data.get("baselines_dir") or "baselines"),
            baselines_branch=str(data.get("baselines_branch") or "skillreach/baselines"),
            home=str(data.get("home") or ""), store=str(data.get("store") or ""),
            store_secret=bool(data.get("store_secret")), ready_at=_opt(data.get("ready_at")),
            server_pid=_pid(data.get("server_pid")), worker_pid=_pid(data.get("worker_pid")),
            restarts=tuple(dict(r) for r in data.get("restarts") or () if isinstance(r, Mapping)),
            restart_count=int(data.get("restart_count") or 0),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{where}: not a service description ({type(exc).__name__}: {exc}); "
                         "start `skillreach serve` in that folder again to rewrite it") from exc


def _pid(value: Any) -> int | None:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _opt(value: Any) -> str | None:
    return None if value is None else str(value)


def write_service(info: ServiceInfo) -> Path:
    """Write the descriptor atomically (a temporary name, then a rename) into the service's folder."""
    folder = state_dir(Path(info.folder))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / DESCRIPTOR
    tmp = folder / f".{DESCRIPTOR}.{os.getpid()}.tmp"
    tmp.write_text(info.to_json(), encoding="utf-8")
    os.replace(tmp, path)
    return path


def read_service(folder: Path) -> ServiceInfo | None:
    """The descriptor of the service of ``folder`` (``running`` filled in), or ``None`` when no service
    ever ran there. A descriptor that is not one is an :class:`~skillreach.errors.InputError`."""
    path = state_dir(folder) / DESCRIPTOR
    try:
        with path.open("rb") as fh:
            raw = fh.read(MAX_DESCRIPTOR_BYTES + 1)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror or exc}); check its permissions") from exc
    if len(raw) > MAX_DESCRIPTOR_BYTES:
        raise InputError(f"{path}: larger than {MAX_DESCRIPTOR_BYTES} bytes, not a service description; "
                         "remove it and start `skillreach serve` again")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{path}: not valid JSON ({exc}); remove it and start `skillreach serve` "
                         "again") from exc
    if not isinstance(data, dict):
        raise InputError(f"{path}: not a service description; remove it and start `skillreach serve` again")
    info = _from_mapping(data, path)
    return replace(info, running=is_running(folder))


def is_running(folder: Path) -> bool:
    """Whether a ``serve`` holds the folder's lock now (the kernel's word, not a pid guess)."""
    path = state_dir(folder) / LOCK
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


class ServiceRunning(InputError):
    """A ``serve`` already holds the lock; the message names it (pid and URL)."""


class ServiceLock:
    """The folder's ``serve.lock`` (and ``PREFECT_HOME``'s, when elsewhere), held while ``serve`` runs.

    ``acquire`` raises :class:`ServiceRunning` when another process holds one of them; ``previous`` is the
    descriptor a dead ``serve`` left (a lock taken over), if any."""

    def __init__(self, folder: Path, prefect_home: Path | None = None) -> None:
        self.folder = folder
        paths = [state_dir(folder) / LOCK]
        if prefect_home is not None:
            home = prefect_home.resolve()
            if not home.is_relative_to(state_dir(folder).resolve()):
                paths.append(home / LOCK)
        self.paths = paths
        self._fds: list[int] = []
        self.previous: ServiceInfo | None = None

    def acquire(self, wait_s: float = 1.0) -> ServiceLock:
        for path in self.paths:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
            deadline = time.monotonic() + wait_s  # a reader's brief shared lock is no service
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() < deadline:
                        time.sleep(0.1)
                        continue
                    os.close(fd)
                    self.release()
                    raise ServiceRunning(self._held_line(path)) from None
            self._fds.append(fd)
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
                os.write(fd, f"{os.getpid()}\n".encode())
        with contextlib.suppress(InputError):
            self.previous = read_service(self.folder)
        return self

    def _held_line(self, path: Path) -> str:
        holder = ""
        with contextlib.suppress(OSError, ValueError):
            holder = path.read_text(encoding="utf-8").strip().splitlines()[0]
        info = None
        with contextlib.suppress(InputError):
            info = read_service(self.folder)
        if info is not None and (not holder or holder == str(info.pid)):
            who = f"pid {info.pid}, {info.ui}, in {info.folder}"
        else:
            who = f"pid {holder or '?'}"
        where = "this folder" if path.parent == state_dir(self.folder) else f"PREFECT_HOME {path.parent}"
        pid = holder or (str(info.pid) if info is not None else "?")
        return (f"a skillreach service already runs for {where} ({who}); stop it first (Ctrl-C in its "
                f"terminal, or kill {pid}), or serve from another folder")

    def release(self) -> None:
        for fd in self._fds:
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
        self._fds = []

    def __enter__(self) -> ServiceLock:
        return self.acquire()

    def __exit__(self, *_exc: object) -> None:
        self.release()


def _ancestors(start: Path) -> Iterator[Path]:
    here = start.resolve()
    yield here
    yield from here.parents


def find_service(start: Path, given: str | None = None) -> ServiceInfo | None:
    """The service a command run in ``start`` describes: the folder ``given`` (``--service`` or
    ``$SKILLREACH_SERVICE``; an error when no service ever ran there), else the nearest of ``start`` and
    its parents where one ran; ``None`` when there is none."""
    if given:
        folder = Path(given).expanduser()
        info = read_service(folder)
        if info is None:
            raise InputError(f"{given}: no skillreach service has run in this folder (no "
                             f".skillreach/{DESCRIPTOR}); pass the folder `skillreach serve` runs in")
        return info
    for folder in _ancestors(start):
        if (state_dir(folder) / DESCRIPTOR).is_file():
            return read_service(folder)
    return None
