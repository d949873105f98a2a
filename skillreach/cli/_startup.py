"""The garbage collector paused while ``skillreach run`` starts up.

Loading the modules a study needs (Prefect, pydantic models, SQLAlchemy, numpy: about 1,500 modules)
allocates millions of objects and almost no garbage, yet every 700 allocations start a collection that
walks the young objects, and now and then all of them. :meth:`StartupGC.paused` stops collections for
the command; :meth:`StartupGC.resume` turns them back on as soon as the study starts (``run_study``),
with the objects made so far frozen (``gc.freeze``), so that the study's collections never walk the
loaded modules; both are undone when the command returns. A warm ``make demo``: 4.95 s of CPU against
5.23 s without (five interleaved pairs on a loaded machine, ``bench/demo_time.py``'s case).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["StartupGC", "startup_gc"]


class StartupGC:
    def __init__(self) -> None:
        self.held = False
        self.frozen = False

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
            if self.frozen:
                self.frozen = False
                gc.unfreeze()

    def resume(self) -> None:
        """Collections on again (only when :meth:`paused` turned them off), the objects made so far
        frozen unless the caller froze some itself."""
        if self.held:
            self.held = False
            if gc.get_freeze_count() == 0:
                gc.freeze()
                self.frozen = True
            gc.enable()


startup_gc = StartupGC()
