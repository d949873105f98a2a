"""The one resolved configuration of a study: :class:`StudyConfig`.

Resolved **once**, where a study enters (a CLI command, or a flow's ``resolve_config`` task), with the
precedence **CLI flag > config file > environment (``SKILLREACH_*``) > default** (see
:mod:`skillreach.settings`), and then handed down: tasks, the runner, the runtimes, the gates and the
store all read it and never the environment again.

It carries every setting, the non-secret ones as plain fields. The two secrets a study may need — the
database URL (it may hold a password) and the alert webhooks (their paths are tokens) — are
:class:`~pydantic.SecretStr` fields excluded from every dump: they never reach a flow parameter stored
by Prefect, ``study.json``, a report, a log line or the database.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr, ValidationError, field_validator

from skillreach.errors import ConfigError
from skillreach.models import Frozen
from skillreach.settings import (
    DEFAULT_PRICES,
    AlertDeliveryConfig,
    GateConfig,
    LiveGateConfig,
    Price,
    Settings,
    load_settings,
    read_config_file,
)

__all__ = ["STUDY_ONLY_KEYS", "CatalogStrategy", "StudyConfig", "redact"]

CatalogStrategy = Literal["full", "singleton", "neighborhood"]

_SECRET_KEY = re.compile(r"(key|token|secret|password|passwd|auth|credential|cookie)", re.IGNORECASE)

STUDY_ONLY_KEYS = frozenset(
    {"skills", "queries", "out", "target", "compliance", "runtime_options", "record_baselines", "gate",
     "max_cost", "keep_errors", "drift", "reason", "grown_from", "queries_origin", "follow_outside"}
)
"""The keys of a config file (or CLI flags) that belong to the study, not to :class:`Settings`."""

_SECRETS = ("database_url", "alert_webhooks")
_RENAMED = {"max_cost_usd": "max_cost"}
"""Settings whose study field has another name (the flag and the config key are ``max_cost``)."""


def _flag(field: str) -> str:
    """The command-line flag of a setting (``max_cost`` → ``--max-cost``)."""
    return "--" + field.replace("_", "-")


class StudyConfig(Frozen):
    """What one study runs, with every setting resolved. Empty ``skills`` and no ``queries`` mean the
    bundled offline example. Build it with :meth:`build`."""

    # what is measured
    skills: tuple[Path, ...] = ()
    queries: Path | None = None
    runtime: str = "keyword"
    model: str | None = None
    catalog: CatalogStrategy = "full"
    target: str | None = None
    skill_precedence: Literal["first", "last"] = "first"
    follow_outside: bool = False
    """Follow symbolic links under ``skills`` whose target lies outside them (``--follow-outside``; a
    sweep's link farm sets it); by default such a link is named and skipped."""
    neighborhood_k: int = Field(default=10, ge=1)
    neighborhood_size: int = Field(default=20, ge=1)
    seed: int = 0
    runtime_options: dict[str, Any] = Field(default_factory=dict)
    # how it is probed
    attempts: int = Field(default=1, ge=1)
    max_turns: int = Field(default=3, ge=1)
    early_exit: bool = True
    compliance: bool = False
    concurrency: int = Field(default=8, ge=1)
    batch_size: int = Field(default=100, ge=1)
    requests_per_minute: int | None = Field(default=None, ge=1)
    input_tokens_per_minute: int | None = Field(default=None, ge=1)
    max_retries: int = Field(default=6, ge=0)
    timeout_s: float = Field(default=120.0, gt=0)
    routing_max_tokens: int = Field(default=256, ge=1)
    canary_timeout_s: float = Field(default=60.0, gt=0)
    claude_path: str = "claude"
    pi_path: str = "pi"
    goose_path: str = "goose"
    agy_path: str = "agy"
    max_probes: int = Field(default=1_000_000, ge=1)
    """The most probes a study may plan; above it the command refuses (or asks) before building it."""
    keep_errors: bool = False
    """Keep errored probes on resume instead of probing those pairs again."""
    exclusive_out: bool = False
    """Refuse an ``out`` folder holding probes of another configuration (``skillreach run`` sets it,
    unless ``--force``; studies that reuse a working folder — ``check``, ``optimize`` — leave it off)."""
    # what it costs, how it is judged and gated
    max_cost: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    prices: dict[str, Price] = Field(default_factory=lambda: dict(DEFAULT_PRICES))
    judge_model: str | None = None
    """The rubric judge; ``None``: the offline fake judge for offline runtimes (see grading)."""
    generator_model: str | None = None
    """Generates queries for a skill added without any (the service's re-baselining); see Settings."""
    gates: GateConfig = Field(default_factory=GateConfig)
    live_gates: LiveGateConfig = Field(default_factory=LiveGateConfig)
    listing_budget_chars: int = Field(default=15000, ge=1)
    # where it goes
    out: Path | None = None
    home: Path = Path(".skillreach")
    record_baselines: bool = False
    """Record every queried skill's baseline from this study, gated first (``rebaseline_all``)."""
    gate: bool = True
    """Compare with the stored baselines and alert on a breach."""
    drift: bool = False
    """The model snapshot changed: compare across it as a drift report instead of a gate."""
    reason: str = ""
    """Why a re-baselining runs (the event), for the commit message."""
    grown_from: Path | None = None
    """The query set ``queries`` was grown from (generated queries for a newly added skill): the gate
    compares every skill on the parent set's cases, pinned to the parent's digest."""
    queries_origin: Path | None = None
    """The working tree's query set that ``queries`` stands in for (a grown version of it on the service
    branch): where a grown set is committed."""
    baselines_dir: str = "baselines"
    baselines_branch: str = "skillreach/baselines"
    alert_repeat_after: str = "24h"
    """The same alert is sent at most once per this long (see Settings)."""
    alert_delivery: AlertDeliveryConfig = Field(default_factory=AlertDeliveryConfig)
    """Retries and the deadline of an alert's posts (see Settings)."""
    live_sources: str = ""
    """What the service's ingest reads (see Settings; ``skillreach ingest`` with no PATH)."""
    ui_url: str | None = None
    """The dashboard's address: alerts link to it (see Settings)."""
    database_statement_timeout_s: float = Field(default=300.0, gt=0, allow_inf_nan=False)
    """PostgreSQL: a store statement not finished in this many seconds is cancelled (see Settings)."""
    # secrets: used where they are needed, never dumped
    database_url: SecretStr | None = Field(default=None, exclude=True, repr=False)
    alert_webhooks: tuple[SecretStr, ...] = Field(default=(), exclude=True, repr=False)

    @field_validator("prices")
    @classmethod
    def _prices_added(cls, prices: dict[str, Price]) -> dict[str, Price]:
        """A study's prices add to the default table, as the settings' do (never replace it)."""
        return {**DEFAULT_PRICES, **prices}

    @field_validator("runtime_options")
    @classmethod
    def _no_secrets(cls, v: dict[str, Any]) -> dict[str, Any]:
        bad = [k for k in v if _SECRET_KEY.search(k)]
        if bad:
            raise ValueError(
                f"runtime option {bad[0]!r} looks like a secret; set it in the runtime's environment "
                "variable instead (flow parameters are stored)"
            )
        return v

    @property
    def is_example(self) -> bool:
        return not self.skills and self.queries is None

    # -- building ----------------------------------------------------------------------------------

    @classmethod
    def build(cls, config_file: Path | None = None, **flags: Any) -> StudyConfig:
        """Flags (``None`` = not given) > config file > environment (``SKILLREACH_*``) > defaults.

        The config file may hold the study keys (:data:`STUDY_ONLY_KEYS`) beside any
        :class:`~skillreach.settings.Settings` key; an unknown key is refused with the file named.
        Paths in a config file are relative to the file.
        """
        file_values = read_config_file(config_file) if config_file is not None else {}
        given = {k: v for k, v in flags.items() if v is not None and v != ()}
        study_values = {k: v for k, v in {**file_values, **given}.items() if k in STUDY_ONLY_KEYS}
        settings_values = {k: v for k, v in file_values.items() if k not in STUDY_ONLY_KEYS}
        settings_flags = {k: v for k, v in given.items() if k not in STUDY_ONLY_KEYS}
        try:
            settings = load_settings(None, **{**settings_values, **settings_flags})
        except ConfigError as exc:
            top = exc.message.split(":", 1)[0].split(".", 1)[0]
            if top in settings_flags:  # a command-line flag's value: name the flag to fix
                raise ConfigError(f"{_flag(top)} {settings_flags[top]!r}: {exc.message}") from exc
            from_file = config_file is not None and not exc.message.startswith("environment")
            raise ConfigError(f"{config_file}: {exc.message}" if from_file else exc.message) from exc
        if isinstance(study_values.get("skills"), str | Path):
            study_values["skills"] = [study_values["skills"]]
        base = config_file.parent if config_file is not None else None
        for key in ("skills", "queries", "out"):
            if key in study_values and key not in given and base is not None:
                val = study_values[key]
                study_values[key] = [base / Path(p) for p in val] if key == "skills" else base / Path(val)
        try:
            return cls(**{**cls.from_settings(settings), **study_values})
        except ValidationError as exc:
            err = exc.errors()[0]
            field = ".".join(str(p) for p in err["loc"]) or "config"
            top = str(err["loc"][0]) if err["loc"] else ""
            if top in given:
                where = f"{_flag(top)} {given[top]!r}: "
            else:
                where = f"{config_file}: " if config_file is not None and top in file_values else ""
            raise ConfigError(f"{where}{field}: {err['msg']}") from exc

    @classmethod
    def from_settings(cls, settings: Settings) -> dict[str, Any]:
        """Every setting as the study field of the same name (one place: no setting is dropped)."""
        values: dict[str, Any] = {}
        for name in Settings.model_fields:
            field = _RENAMED.get(name, name)
            if field not in cls.model_fields:
                continue
            values[field] = getattr(settings, name)
        if settings.database_url:
            values["database_url"] = SecretStr(settings.database_url)
        values["alert_webhooks"] = tuple(SecretStr(u) for u in settings.alert_webhooks)
        return values

    def with_secrets_from(self, other: StudyConfig) -> StudyConfig:
        """This configuration with ``other``'s secrets (a configuration that came back from JSON)."""
        return self.model_copy(update={k: getattr(other, k) for k in _SECRETS})

    # -- using ---------------------------------------------------------------------------------------

    def settings(self) -> Settings:
        """The resolved settings as a :class:`Settings` object (for code that takes one: runtimes, the
        store). Built without reading the environment again."""
        values = {name: getattr(self, _RENAMED.get(name, name)) for name in Settings.model_fields
                  if _RENAMED.get(name, name) in type(self).model_fields and name not in _SECRETS}
        return Settings.model_construct(
            **values,
            database_url=self.database_url.get_secret_value() if self.database_url else None,
            alert_webhooks=[u.get_secret_value() for u in self.alert_webhooks],
        )

    def price_for(self, model: str | None) -> Price | None:
        return self.settings().price_for(model)

    def webhook_urls(self) -> list[str]:
        """The alert webhooks (secret: hand them to the HTTP client only)."""
        return [u.get_secret_value() for u in self.alert_webhooks]

    def public_dict(self) -> dict[str, Any]:
        """The configuration as JSON-able data for ``study.json``, the store and reports: secrets left
        out, secret-looking values redacted."""
        data = self.model_dump(mode="json")
        data["database_url"] = "***" if self.database_url else None
        data["alert_webhooks"] = len(self.alert_webhooks)
        return redact(data)


def redact(value: Any) -> Any:
    """Secret-looking keys blanked, passwords in URLs, query tokens, webhook paths and the configured
    keys' values masked: the one pass of :mod:`skillreach._io.redact`."""
    from skillreach._io.redact import redact as _redact

    return _redact(value)
