"""Settings: one frozen pydantic-settings class, built by :func:`load_settings`.

Precedence, highest first: **CLI flag > config file (``--config``, TOML or YAML) > environment
(``SKILLREACH_*``) > default**. Unknown keys in a config file are refused (``extra="forbid"``) with the
file and the key named. Secrets (API keys) are never settings: the SDKs read them from their own
environment variables, and nothing here stores or prints them.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal, NamedTuple, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict, SettingsError

from skillreach._io.durations import parse_duration
from skillreach.errors import ConfigError
from skillreach.models import NonNegative

__all__ = [
    "AlertDeliveryConfig",
    "GateConfig",
    "LiveGateConfig",
    "Price",
    "SettingRow",
    "Settings",
    "load_settings",
    "parse_duration",
    "read_config_file",
    "setting_rows",
]


class Price(BaseModel):
    """USD per million tokens."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input: NonNegative
    output: NonNegative
    cache_write: NonNegative
    cache_read: NonNegative
    """Each a finite number ≥ 0 (a negative price would make a negative estimate)."""


DEFAULT_PRICES: dict[str, Price] = {
    # Public list prices, USD per million tokens (cache write = 1.25 × input, read = 0.1 × input).
    "claude-opus-4": Price(input=15.0, output=75.0, cache_write=18.75, cache_read=1.5),
    "claude-sonnet-4": Price(input=3.0, output=15.0, cache_write=3.75, cache_read=0.3),
    "claude-haiku-4": Price(input=1.0, output=5.0, cache_write=1.25, cache_read=0.1),
    "claude-3-5-haiku": Price(input=0.8, output=4.0, cache_write=1.0, cache_read=0.08),
}


class GateConfig(BaseModel):
    """Allowed change per metric (new − baseline): negative = may not fall more than |g|."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    activation: float = Field(default=-0.05, ge=-1, le=1, allow_inf_nan=False)
    """Activation may fall at most this much (each gate a finite number in [−1, 1])."""
    false_activation: float = Field(default=0.03, ge=-1, le=1, allow_inf_nan=False)
    """False activation may rise at most this much."""
    compliance: float = Field(default=-0.05, ge=-1, le=1, allow_inf_nan=False)
    """Compliance may fall at most this much."""
    task_quality: float = Field(default=-0.05, ge=-1, le=1, allow_inf_nan=False)
    """Task quality may fall at most this much."""


class LiveGateConfig(BaseModel):
    """The live gate: how far a skill's live activation share may fall, relative, over the recent window
    against the reference window just before it (``skillreach.live.dropped`` past it)."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    activation_share: float = Field(default=-0.25, ge=-1, le=0, allow_inf_nan=False)
    """Relative change of the activation share allowed (recent ÷ reference − 1): −0.25 lets it fall a
    quarter of its value, no more (a finite number in [−1, 0])."""
    recent: str = "14d"
    """The recent window, ending now (``7d``, ``14d``, ``2w``)."""
    reference: str = "28d"
    """The reference window, just before the recent one."""
    min_prompts: int = Field(default=50, ge=1)
    """Main-agent prompts each window needs before a share is judged (fewer: not judged)."""
    min_activations: int = Field(default=10, ge=1)
    """Activations of the skill the reference window needs (a skill seldom used is not gated)."""

    @field_validator("recent", "reference")
    @classmethod
    def _window_valid(cls, value: str) -> str:
        if parse_duration(value).total_seconds() <= 0:
            raise ValueError(f"{value!r} is an empty window; write e.g. 14d")
        return value


class AlertDeliveryConfig(BaseModel):
    """How an alert reaches its webhooks: stored *pending* first, *delivered* on a 2xx, retried with a
    backoff that doubles from ``first_retry`` to ``longest_retry``, *failed* after ``tries``."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    tries: int = Field(default=12, ge=1, le=100)
    """Posts of one alert to one webhook before it is marked failed (1–100)."""
    first_retry: str = "30s"
    """The wait before the second try; each later wait doubles (``30s``, ``1m``)."""
    longest_retry: str = "1h"
    """The longest wait between two tries (with the defaults, 12 tries span about 5 hours)."""
    failing_after: str = "15m"
    """A webhook that has taken nothing for this long is said once on every other webhook, and in the
    service log."""
    timeout_s: float = Field(default=10.0, gt=0, le=300, allow_inf_nan=False)
    """The whole exchange with a webhook (resolving, connecting, sending, the answer's status) ends
    after this many seconds, however slowly the other side answers (0–300)."""

    @field_validator("first_retry", "longest_retry", "failing_after")
    @classmethod
    def _wait_valid(cls, value: str) -> str:
        if not timedelta(seconds=1) <= parse_duration(value) <= timedelta(days=7):
            raise ValueError(f"{value!r} is not a wait between 1s and 7d; write e.g. 30s, 15m, 1h")
        return value

    def waits(self) -> tuple[timedelta, timedelta, timedelta]:
        """``(first_retry, longest_retry, failing_after)`` as timedeltas."""
        return (parse_duration(self.first_retry), parse_duration(self.longest_retry),
                parse_duration(self.failing_after))


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="SKILLREACH_", frozen=True, extra="forbid", use_attribute_docstrings=True
    )

    home: Path = Path(".skillreach")
    """Where the SQLite store, checkpoints and run folders live."""
    database_url: str | None = None
    """SQLAlchemy URL; default ``sqlite:///<home>/skillreach.db``. PostgreSQL: ``postgresql+psycopg://…``."""
    database_statement_timeout_s: float = Field(default=300.0, gt=0, allow_inf_nan=False)
    """PostgreSQL: a statement the server has not finished in this many seconds is cancelled (a read
    waiting on another connection's lock ends in one line naming this setting)."""

    runtime: str = "keyword"
    """The agent runtime that probes (``skillreach doctor`` lists them); ``keyword`` is offline."""
    model: str | None = None
    """The model the runtime asks (a provider's model id); ``None``: the runtime's own default."""
    attempts: int = Field(default=1, ge=1)
    """Probes per query (repeated attempts measure consistency)."""
    max_turns: int = Field(default=3, ge=1)
    """Turns an agent may take in one probe before it is stopped."""
    early_exit: bool = True
    """Stop a probe as soon as the agent loads a skill (routing studies need no more)."""
    concurrency: int = Field(default=8, ge=1)
    """Probes in flight at once."""
    batch_size: int = Field(default=100, ge=1)
    """Probes per batch (the unit of work a worker takes)."""
    requests_per_minute: int | None = None
    """Provider request limit shared by the study's probes; ``None``: no limit of ours."""
    input_tokens_per_minute: int | None = None
    """Provider input-token limit shared by the study's probes; ``None``: no limit of ours."""
    max_retries: int = Field(default=6, ge=0)
    """Retries of a probe's request after a transient provider error."""
    timeout_s: float = Field(default=120.0, gt=0)
    """Seconds one request may take."""
    canary_timeout_s: float = Field(default=60.0, gt=0)
    """The most a canary request waits (the ``timeout_s`` when shorter): a broken set-up is found in
    seconds; raise it for a slow local model."""
    routing_max_tokens: int = Field(default=256, ge=1)
    """The reply budget of a routing probe's requests (API runtimes; the canary's too): a tool call fits,
    a prose answer stops early. Compliance mode keeps its larger budget."""
    max_cost_usd: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    """Stop a study cleanly once its recorded spend reaches this many USD (``--max-cost``; a finite
    number above 0: NaN or infinity would never be reached)."""
    max_probes: int = Field(default=1_000_000, ge=1)
    """Ceiling on a study's planned probes (queries × attempts): above it ``run`` refuses before
    building anything (``--max-probes``, ``SKILLREACH_MAX_PROBES``)."""

    catalog: str = "full"
    """Which skills the agent sees: ``full``, ``singleton`` (the target alone) or ``neighborhood``."""
    skill_precedence: Literal["first", "last"] = "first"
    """Which root wins when two roots hold a skill of the same name (the others are reported)."""
    neighborhood_k: int = 10
    """A neighbourhood catalog's nearest lexical rivals of the target."""
    neighborhood_size: int = 20
    """A neighbourhood catalog's size (the target, its rivals, seeded random filler)."""
    seed: int = 0
    """Seed of every random choice (filler skills, query order, resampling)."""
    listing_budget_chars: int = Field(default=15000, ge=1)
    """Warn when the catalog listing (names + descriptions) exceeds this many characters."""

    prices: dict[str, Price] = Field(default_factory=lambda: dict(DEFAULT_PRICES))
    """USD per million tokens by model-id prefix (``input``, ``output``, ``cache_write``,
    ``cache_read``); the longest matching prefix prices a model. A table given (``[prices."m"]``) adds
    to the list prices of the Claude models, or replaces one of them, never the whole table."""
    gates: GateConfig = Field(default_factory=GateConfig)
    """Allowed change per metric of a gate (new − baseline); see ``gates.*``."""
    live_gates: LiveGateConfig = Field(default_factory=LiveGateConfig)
    """The live gate on production usage (``skillreach usage --gate``, the ``ingest`` deployment); see
    ``live_gates.*``."""

    alert_webhooks: list[str] = Field(default_factory=list)
    """Slack-compatible webhook URLs (``SKILLREACH_ALERT_WEBHOOKS`` as a JSON list). Never logged.
    Checked when read (:func:`skillreach._io.urls.check_webhook`): http or https, a host, a valid port,
    no link-local or metadata address."""

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_a_number(cls, value: Any, info: Any) -> Any:
        """``attempts = true`` is refused (pydantic would read it as 1 and run one attempt)."""
        if isinstance(value, bool) and info.field_name in _NUMBER_FIELDS:
            raise ValueError(f"{str(value).lower()} is not a number; write a number")
        return value

    @field_validator("prices")
    @classmethod
    def _prices_added(cls, prices: dict[str, Price]) -> dict[str, Price]:
        """``[prices."m"]`` adds to the default table (Claude Code's probes keep their prices)."""
        return {**DEFAULT_PRICES, **prices}

    @field_validator("alert_webhooks")
    @classmethod
    def _webhooks_valid(cls, urls: list[str]) -> list[str]:
        from skillreach._io.urls import check_webhook, url_label

        for i, url in enumerate(urls, start=1):
            problem = check_webhook(url)
            if problem is not None:
                raise ValueError(
                    f"webhook {i} of {len(urls)} ({url_label(url)}): {problem}; fix "
                    "SKILLREACH_ALERT_WEBHOOKS or alert_webhooks in the config file"
                )
        return [u.strip() for u in urls]

    alert_repeat_after: str = "24h"
    """The same alert (kind, skill, metric, cause) is sent at most once per this long (``30m``, ``24h``,
    ``7d``; ``SKILLREACH_ALERT_REPEAT_AFTER``); repeats within it are stored, not sent."""

    alert_delivery: AlertDeliveryConfig = Field(default_factory=AlertDeliveryConfig)
    """Retries of an alert a webhook did not take, and the deadline of each post; see
    ``alert_delivery.*``."""

    @field_validator("alert_repeat_after")
    @classmethod
    def _duration_valid(cls, value: str) -> str:
        parse_duration(value)
        return value

    claude_path: str = "claude"
    """The ``claude`` program of the claude-code runtime."""
    pi_path: str = "pi"
    """The ``pi`` program of the pi runtime."""
    goose_path: str = "goose"
    """The ``goose`` program of the goose runtime."""
    agy_path: str = "agy"
    """The ``agy`` program of the antigravity runtime (the agent CLIs' programs are read here, once,
    never by a runtime)."""
    baselines_dir: str = "baselines"
    """Where baseline records live in the skills' git repository (relative to its top)."""
    baselines_branch: str = "skillreach/baselines"
    """The branch the service commits re-recorded baselines to (nobody's working tree is touched)."""
    judge_model: str | None = None
    """The rubric judge of compliance studies (a Messages API model); offline runtimes default to the
    offline fake judge, a live study with rubrics and no judge stops before spending."""
    generator_model: str | None = None
    """The Messages API model the service generates queries with for a skill added without any (the
    grown set is sealed as a new corpus version); ``None``: such a skill is reported, not generated for."""

    ui_url: str | None = None
    """Where people open the dashboard (``skillreach ui``, or the one ``skillreach serve`` starts), e.g.
    ``http://skillreach.internal:8420``: ``skillreach status`` and every alert link to it; ``None``: no
    link."""

    live_sources: str = ""
    """What ``skillreach ingest`` reads when given no PATH: transcript folders
    (``~/.claude/projects``) and OpenTelemetry file exports, separated by ``os.pathsep`` (``:`` on
    Linux and macOS; ``SKILLREACH_LIVE_SOURCES``); a list in the config file."""

    @field_validator("live_sources", mode="before")
    @classmethod
    def _sources_joined(cls, value: Any) -> Any:
        if isinstance(value, list | tuple):
            return os.pathsep.join(str(v) for v in value)
        return value

    def live_source_paths(self) -> list[Path]:
        """``live_sources`` as paths (``~`` expanded), in order."""
        return [Path(p).expanduser() for p in self.live_sources.split(os.pathsep) if p.strip()]

    def resolved_database_url(self) -> str:
        return self.database_url or f"sqlite:///{(self.home / 'skillreach.db').as_posix()}"

    def price_for(self, model: str | None) -> Price | None:
        """Longest configured prefix of the model id (``claude-sonnet-4-5-2025…`` → ``claude-sonnet-4``)."""
        if not model:
            return None
        best = max((k for k in self.prices if model.startswith(k)), key=len, default=None)
        return self.prices[best] if best else None


MAX_CONFIG_BYTES = 1 * 2**20
"""A config file larger than this is refused before it is parsed."""
MAX_CONFIG_NODES = 20_000
"""YAML nodes a config file may hold (aliases are refused, see :mod:`skillreach._io.yaml`)."""

_FLAG_NAMES = {"max_cost": "max_cost_usd", "budget": "listing_budget_chars", "precedence": "skill_precedence"}
"""Keys people write after the CLI flag, and the setting they mean."""


class SettingRow(NamedTuple):
    """One setting as ``docs/configuration.md`` and ``skillreach config show`` list it."""

    key: str
    """``gates.activation`` for a key inside a table."""
    type: str
    default: Any
    env: str
    description: str


def _type_name(annotation: Any) -> str:
    text = getattr(annotation, "__name__", None) if not get_args(annotation) else None
    if text is None:
        text = str(annotation).replace("typing.", "").replace("pathlib.", "")
        text = text.replace("skillreach.settings.", "")
    return {"Literal['first', 'last']": "'first' | 'last'"}.get(text, text)


def setting_rows() -> list[SettingRow]:
    """Every setting in declaration order (a table's keys after the table), from the model itself."""
    rows: list[SettingRow] = []
    defaults = Settings.model_construct()
    for name, info in Settings.model_fields.items():
        env = f"SKILLREACH_{name.upper()}"
        default = getattr(defaults, name)
        rows.append(SettingRow(name, _type_name(info.annotation), default, env, info.description or ""))
        if isinstance(default, BaseModel) and not isinstance(default, Price):
            for sub, sub_info in type(default).model_fields.items():
                rows.append(
                    SettingRow(
                        f"{name}.{sub}",
                        _type_name(sub_info.annotation),
                        getattr(default, sub),
                        f"{env} (JSON: {{\"{sub}\": …}})",
                        sub_info.description or "",
                    )
                )
    return rows


def _suggest(key: str) -> str:
    """``; did you mean max_cost_usd?`` for a misspelt or flag-named key, then the valid keys."""
    import difflib

    valid = f"; valid keys: {', '.join(Settings.model_fields)}"
    if key in _FLAG_NAMES:
        return f"; the setting is {_FLAG_NAMES[key]} (the flag is --{key.replace('_', '-')}){valid}"
    close = difflib.get_close_matches(key, list(Settings.model_fields), n=1, cutoff=0.7)
    return (f"; did you mean {close[0]}?" if close else "; check its spelling") + valid


def read_config_file(path: Path) -> dict[str, Any]:
    from skillreach._io.json import JsonProblem, decode_utf8
    from skillreach._io.toml import load_toml
    from skillreach._io.yaml import YamlProblem, load_limited

    try:
        if not path.is_file():
            what = (
                "is a folder"
                if path.is_dir()
                else "no such file"
                if not path.exists()
                else "not a regular file"
            )
            raise ConfigError(
                f"{path}: cannot read config file ({what}); pass a TOML or YAML file to --config"
            )
        size = path.stat().st_size
        if size > MAX_CONFIG_BYTES:
            raise ConfigError(
                f"{path}: {size:,} bytes, more than a config file may hold (1 MiB); check --config"
            )
        text = decode_utf8(path.read_bytes(), source=str(path))
    except JsonProblem as exc:
        raise ConfigError(str(exc)) from exc
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config file ({exc.strerror}); check --config") from exc
    if "\0" in text:
        line = text.count("\n", 0, text.index("\0")) + 1
        raise ConfigError(f"{path}:{line}: a NUL byte (\\0) is not allowed in a config file; remove it")
    try:
        if path.suffix == ".toml":
            data = load_toml(text, source=str(path), max_bytes=MAX_CONFIG_BYTES)
        else:
            data, _ = load_limited(text, max_bytes=MAX_CONFIG_BYTES, max_nodes=MAX_CONFIG_NODES)
    except JsonProblem as exc:
        raise ConfigError(str(exc)) from exc
    except YamlProblem as exc:
        raise ConfigError(f"{path}:{exc.line}: invalid YAML ({exc.what}); fix the syntax") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the config file must hold a mapping of settings")
    return data.get("skillreach", data) if isinstance(data.get("skillreach"), dict) else data


def load_settings(config: Path | None = None, **overrides: Any) -> Settings:
    """Build the settings: ``overrides`` (CLI flags, ``None`` = not given) > file > environment > default."""
    file_values = read_config_file(config) if config is not None else {}
    flags = {k: v for k, v in overrides.items() if v is not None}
    try:
        # init kwargs beat the environment in pydantic-settings; merge file first, then flags.
        settings = Settings(**{**file_values, **flags})
    except SettingsError as exc:  # an environment value that is not valid JSON for a list/dict field
        field = str(exc).split('"')[1] if '"' in str(exc) else "a setting"
        env = f"SKILLREACH_{field.upper()}"
        raise ConfigError(
            f"environment variable {env}: not valid JSON for {field!r} (a list is written '[\"https://…\"]')"
        ) from exc
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "settings"
        top = str(err["loc"][0]) if err["loc"] else ""
        if config is not None and top in file_values:
            where = f"{config}: "
        elif top and top not in {**flags, **file_values} and f"SKILLREACH_{top.upper()}" in os.environ:
            where = f"environment variable SKILLREACH_{top.upper()}: "  # neither a flag nor the file
        else:
            where = ""
        hint = (
            f"unknown setting{_suggest(field)}"
            if err["type"] == "extra_forbidden"
            else err["msg"]
        )
        raise ConfigError(f"{where}{field}: {hint}") from exc
    # the store's statement timeout reaches every PostgreSQL connection of this process and of the
    # processes it starts (workers) through its variable, whichever of flag, file or variable set it
    timeout = settings.database_statement_timeout_s
    env = "SKILLREACH_DATABASE_STATEMENT_TIMEOUT_S"
    if timeout != Settings.model_fields["database_statement_timeout_s"].default or env in os.environ:
        os.environ[env] = repr(timeout)
    from skillreach._io.redact import register_secret, register_url_password

    # the secret settings are masked wherever they would appear (a log line, an error, a record)
    register_url_password(settings.database_url)
    register_secret(*settings.alert_webhooks)
    return settings


_NUMBER_FIELDS = frozenset(
    name
    for name, f in Settings.model_fields.items()
    if f.annotation is not None
    and any(t in (int, float) for t in (f.annotation, *getattr(f.annotation, "__args__", ())))
)
"""The settings that hold a number: ``true`` or ``false`` there is refused."""
