"""Opening the store from a task: ``SKILLREACH_DATABASE_URL`` when set, else SQLite under the study's home.

The URL is read here, from the environment, and never passed as a flow parameter (it may hold a
password, and flow parameters are stored by Prefect).
"""

from __future__ import annotations

from skillreach.settings import load_settings
from skillreach.store import Store, open_store
from skillreach.study import StudyConfig

__all__ = ["store_for"]


def store_for(config: StudyConfig) -> Store:
    return open_store(load_settings(home=config.home))
