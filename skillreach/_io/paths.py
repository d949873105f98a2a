"""Paths the user names for output: checked before anything is written, one line when they cannot be.

- ``--out DIR/`` (a trailing slash) or an existing folder is a folder;
- missing parent folders are created silently only inside the working folder; elsewhere one missing
  level is created and said, and more (``/nonexistent/dir/r.html``) is refused, never created at the
  filesystem root;
- a parent that is a file, or a folder we cannot create (``/proc/…``), is one line naming the path and
  the option that gave it.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from skillreach.errors import InputError

__all__ = [
    "as_folder",
    "ensure_folder",
    "ensure_parent",
    "inside_working_folder",
    "means_folder",
    "refuse_special_file",
]

_log = logging.getLogger(__name__)


def means_folder(raw: str | os.PathLike[str]) -> bool:
    """``True`` when the user wrote the path as a folder (``out/``) or it is one."""
    text = os.fspath(raw)
    return text.endswith(("/", os.sep)) or Path(text).is_dir()


def as_folder(raw: str | os.PathLike[str], file_name: str) -> Path:
    """``raw/file_name`` when ``raw`` names a folder (:func:`means_folder`), else ``raw``."""
    return Path(raw) / file_name if means_folder(raw) else Path(raw)


def inside_working_folder(path: Path) -> bool:
    """Whether ``path`` lies under the current working folder (symlinks resolved)."""
    try:
        return path.resolve().is_relative_to(Path.cwd().resolve())
    except (OSError, RuntimeError):  # a vanished cwd, a symlink loop
        return False


def ensure_folder(folder: Path, *, flag: str, named: Path | None = None) -> Path:
    """Make sure ``folder`` exists as a folder, creating it (and its parents inside the working folder).

    Outside the working folder only one level is created (``folder`` itself, whose parent must exist),
    and said on stderr when it is the folder of a file the user named (``named``).
    """
    shown = named if named is not None else folder
    if folder.exists():
        if not folder.is_dir():
            raise InputError(f"{shown}: {folder} exists and is not a folder; change {flag}")
        return folder
    outside = not inside_working_folder(folder)
    if outside:
        parent = folder.parent
        if not parent.exists():
            what = folder if named is not None else parent
            raise InputError(f"{shown}: folder {what} does not exist; create it first or change {flag}")
        if not parent.is_dir():
            raise InputError(f"{shown}: {parent} is not a folder; change {flag}")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if outside and named is not None:
            _log.warning("created the folder %s for %s", folder, flag)
    except OSError as exc:
        raise InputError(
            f"{shown}: cannot create the folder {folder} ({exc.strerror or exc}); change {flag}"
        ) from exc
    return folder


def ensure_parent(path: Path, *, flag: str) -> Path:
    """Make sure a file can be written at ``path``: not a folder, its folder there (see
    :func:`ensure_folder`)."""
    if path.is_dir():
        raise InputError(f"{path}: is a folder; give {flag} a file name")
    ensure_folder(path.parent, flag=flag, named=path)
    return path


def refuse_special_file(path: Path, what: str) -> None:
    """Refuse a FIFO, socket or device where a file is read (opening a FIFO would wait forever)."""
    import stat

    try:
        mode = path.stat().st_mode
    except OSError:
        return  # missing or unreadable: the reader says so
    if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
        raise InputError(f"{path}: not a regular file (a FIFO, device or socket); pass the {what}")
