"""The garbage collector paused while ``skillreach run`` starts up.

Loading the modules a study needs (Prefect, pydantic models, SQLAlchemy, numpy: about 1,500 modules)
allocates millions of objects and almost no garbage, yet every 700 allocations start a collection that
walks the young objects, and the older generations again and again: about a tenth of a warm
``make demo``'s CPU (``bench/demo_time.py``). :meth:`StartupGC.paused` stops collections for the
command; :meth:`StartupGC.resume` turns them back on as soon as the study starts (``run_study``), so a
long study collects as usual — and in any case when the command returns.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["StartupGC", "startup_gc"]


class StartupGC:
    def __init__(self) -> None:
        self.held = False

    @contextmanager
    def paused(self) -> Iterator[None]:
        """No collections inside, unless nested or the caller turned collection off itself."""
        if self.held or not gc.isenabled():
            yield
            return
        gc.disable()
        self.held = True
        try:
            yield
        finally:
            self.resume()

    def resume(self) -> None:
        """Collections on again (only when :meth:`paused` turned them off)."""
        if self.held:
            self.held = False
            gc.enable()


startup_gc = StartupGC()
