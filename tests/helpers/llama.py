"""llama.cpp's ``llama-server`` (built by ``.ci/llama.sh`` into ``SKILLREACH_LLAMA_CACHE``) serving Gemma 3
270M, and a small study run through the real ``skillreach run`` command against it."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from tests.helpers import hang

__all__ = [
    "ALIAS",
    "CACHE",
    "LlamaServer",
    "missing",
    "run_study",
    "write_study",
]

CACHE = Path(os.environ.get("SKILLREACH_LLAMA_CACHE") or Path.home() / ".cache" / "skillreach" / "llama.cpp")
SERVER = CACHE / "bin" / "llama-server"
MODEL = CACHE / "gemma-3-270m-q4_k_m.gguf"
TOOLS_TEMPLATE = Path(__file__).resolve().parents[2] / ".ci" / "gemma3-tools.jinja"
"""The chat template with tool support, read from the work tree (never a stale copy in the cache)."""
ALIAS = "gemma-3-270m"
SKILLREACH = Path(sys.executable).parent / "skillreach"


def missing() -> str | None:
    """Why the real server cannot run here (``None`` when it can)."""
    for path, what in (
        (SERVER, "llama-server"),
        (MODEL, "the Gemma 3 270M model"),
        (TOOLS_TEMPLATE, "the tools template"),
    ):
        if not path.exists():
            return f"{what} is not installed at {path} (run .ci/llama.sh)"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class LlamaServer:
    """``llama-server --jinja -c 16384 --parallel 2 -t 1 --temp 0`` on a free port; ``tools=True`` gives it
    a chat template with tool support (``--chat-template-file``), ``tools=False`` keeps the model's own
    (Gemma 3's has none: the tools never reach the model).

    One thread: on two cores shared with other work, two ggml threads spin at every barrier for the one
    that was descheduled (measured at a load average of 8-10: 0.9-1.5 generated tokens/s with ``-t 2``,
    8-18 with ``-t 1``). ``--temp 0``: greedy decoding when a request names no temperature (the
    anthropic runtime has no such option), so a test's outcome does not hang on a sample."""

    def __init__(self, log: Path, *, tools: bool = True, extra: tuple[str, ...] = ()) -> None:
        self.log = log
        self.tools = tools
        self.extra = extra
        self.port = _free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_s = 0.0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> LlamaServer:
        cmd = [
            str(SERVER),
            "-m",
            str(MODEL),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--jinja",
            "-c",
            "16384",
            "--parallel",
            "2",
            "--alias",
            ALIAS,
            "-t",
            "1",
            "--temp",
            "0",
            *(["--chat-template-file", str(TOOLS_TEMPLATE)] if self.tools else []),
            *self.extra,
        ]
        env = {
            **os.environ,
            "LD_LIBRARY_PATH": f"{SERVER.parent}{os.pathsep}{os.environ.get('LD_LIBRARY_PATH', '')}",
        }
        started = time.monotonic()
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
        # judged by its progress, not a wall limit (tests.helpers.hang): loading burns CPU however busy
        # the machine is; a server that neither answers nor works for 60 s, or burns 240 s of CPU, is hung
        cpu, moved = -1.0, started
        while True:
            now = time.monotonic()
            seen = hang.tree_cpu_s(self.proc.pid)
            if seen != cpu:
                cpu, moved = seen, now
            if cpu > 240 or now - moved > 60 or now - started > 240 * hang.WALL_FACTOR:
                break
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama-server exited with {self.proc.returncode}: {self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=2) as resp:
                    if resp.status == 200:
                        self.started_s = time.monotonic() - started
                        return self
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.25)
        self.__exit__()
        raise RuntimeError(
            f"llama-server did not answer /health ({cpu:.0f} s CPU, {time.monotonic() - started:.0f} s wall, "
            f"idle for {time.monotonic() - moved:.0f} s): {self.log_tail()}"
        )

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def log_tail(self, n: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


SKILLS = {
    "pdf-forms": "Fill in, merge and split PDF forms and documents.",
    "git-rollback": "Roll back a bad git deploy to the previous release tag.",
}


def write_study(
    root: Path, queries: list[dict[str, Any]], settings: str = "", runtime_options: str = ""
) -> None:
    """Two skills, ``queries`` and a ``study.toml`` (settings, then ``[runtime_options]``) under ``root``."""
    for name, description in SKILLS.items():
        folder = root / "skills" / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: {description}\n---\nSteps for {name}.\n", encoding="utf-8"
        )
    (root / "queries.json").write_text(
        json.dumps({"catalog_id": "local", "queries": queries}), encoding="utf-8"
    )
    text = settings + (f"\n[runtime_options]\n{runtime_options}\n" if runtime_options else "")
    (root / "study.toml").write_text(text, encoding="utf-8")


def run_study(
    root: Path, runtime: str, env: dict[str, str], *args: str, timeout: float = 900
) -> hang.Outcome:
    """``skillreach run`` (the installed command, in a process of its own) on the study under ``root``;
    ``timeout``: the CPU seconds, and the seconds without progress, after which it is judged hung
    (:mod:`tests.helpers.hang`: the model server is not its child, so its work is not the study's CPU)."""
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PREFECT_API", "SKILLREACH_", "ANTHROPIC_", "OPENAI_"))
    }
    base.update(COLUMNS="200", **env)
    cmd = [
        str(SKILLREACH),
        "run",
        "--config",
        "study.toml",
        "--skills",
        "skills",
        "--queries",
        "queries.json",
        "--runtime",
        runtime,
        "--model",
        ALIAS,
        "--out",
        "out",
        *args,
    ]
    return hang.finish(cmd, limit_s=timeout, cwd=root, env=base)
