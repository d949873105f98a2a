"""One yardstick for every bench: the stdlib ``json`` module decoding probe lines, in the same process.

The machine these figures come from is shared (2 cores, other work on them), so seconds mean little;
each bench reports its time as a ratio to a reference run in the same process. Where the goal is
in seconds (BM25, the HTML report, the demo), :func:`quiet_seconds` converts: the issue measured the
reference at :data:`QUIET_US_PER_LINE` µs per line (1,000,000 lines in 6.5 s), so a figure's seconds
are scaled by (that) / (the reference now). The same line a probe log holds is decoded, so the scale
moves with the machine's speed for this kind of work.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable

QUIET_US_PER_LINE = 6.5
"""stdlib ``json.loads`` of one probe line (about 300 bytes) on the machine the goals were set on."""

_LINE = json.dumps(
    {
        "query_id": "q-012345",
        "attempt": 3,
        "invoked": ["skill-017", "skill-042"],
        "error": None,
        "turns": 2,
        "early_exit": True,
        "runtime": "fake",
        "model": "fake-1",
        "resolved_model": "fake-1",
        "usage": {
            "input_tokens": 1234,
            "output_tokens": 40,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 1000,
        },
        "cost_usd": 0.0004,
        "duration_ms": 350,
    },
    separators=(",", ":"),
).encode()


def reference_us_per_line(lines: int = 50_000, repeat: int = 3, clock: Callable[[], float] = time.perf_counter
                          ) -> float:
    """µs for the stdlib json module to decode one probe line now (best of ``repeat``), by ``clock``
    (wall by default; ``time.process_time`` for CPU)."""
    data = [_LINE] * lines
    best = float("inf")
    for _ in range(repeat):
        t0 = clock()
        for line in data:
            json.loads(line)
        best = min(best, clock() - t0)
    return best / lines * 1e6


def quiet_seconds(seconds: float, reference_us: float) -> float:
    """``seconds`` measured now, as seconds on the machine the goals were set on."""
    return seconds * QUIET_US_PER_LINE / reference_us


def load() -> str:
    if not hasattr(os, "getloadavg"):
        return ""
    return f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"


def verdict(what: str, value: float, goal: float, unit: str = "") -> str:
    """The one line every bench ends with per goal: ``GOAL what: value (goal ≤ goal): met|NOT met``."""
    return f"GOAL {what}: {value:.2f}{unit} (goal ≤ {goal:g}{unit}): {'met' if value <= goal else 'NOT met'}"
