"""One shallow hierarchy of errors.

Every error the user can cause is a :class:`SkillreachError` whose message is one line that names the
file, line or field and says what to do. The CLI prints that line and exits with ``exit_code``; it
never shows a traceback for these. Vendor exceptions are translated at the runtime boundary
(``raise ProbeFailed(...) from exc``).
"""

from __future__ import annotations

from skillreach._io.redact import redact_text

__all__ = [
    "BudgetExceeded",
    "ConfigError",
    "GateFailed",
    "HarnessBlind",
    "InputError",
    "JudgeReplyError",
    "LintFailed",
    "MalformedReply",
    "NoFrontmatterError",
    "NotFoundError",
    "ProbeFailed",
    "RefusedError",
    "SkillParseError",
    "SkillreachError",
    "StudyLocked",
    "TamperedError",
    "TransientProbeError",
]


class SkillreachError(Exception):
    """Base of every error the project raises on purpose."""

    exit_code: int = 2

    def __init__(self, message: str) -> None:
        # masked once, here: the text travels into CLI lines, logs, Prefect's failed-state messages
        # and pickled results, and none of those may carry a secret
        self.message = redact_text(message)
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message


class InputError(SkillreachError):
    """Bad input: a file, a field or an option the user gave (exit 2)."""


class ConfigError(InputError):
    """A configuration file, setting or environment variable is wrong (exit 2)."""


class NotFoundError(InputError):
    """A file, skill, runtime or record that was named does not exist (exit 2)."""


class SkillParseError(InputError):
    """A SKILL.md that cannot be parsed; ``str()`` is ``path:line: what is wrong``."""

    def __init__(self, path: str, line: int, what: str) -> None:
        super().__init__(f"{path}:{line}: {what}")
        self.path = path
        self.line = line
        self.what = what


class TamperedError(InputError):
    """A sealed query set or an artifact whose digest does not match its content (exit 2)."""


class StudyLocked(SkillreachError):
    """Another process is running the same study (it holds the study's lock); exit 2."""


class RefusedError(SkillreachError):
    """A comparison that would not be legitimate (pins differ); exit 3."""

    exit_code = 3


class HarnessBlind(SkillreachError):
    """The canary queries showed no activation: the harness cannot see activations."""

    exit_code = 1


class BudgetExceeded(SkillreachError):
    """The ``--max-cost`` cap was reached; results so far are kept."""

    exit_code = 1


class ProbeFailed(SkillreachError):
    """A probe failed for good (non-retryable, or retries exhausted). Recorded as the probe's error."""

    exit_code = 1


class TransientProbeError(ProbeFailed):
    """A failure worth retrying (429, 529, 5xx, timeout, dropped connection)."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class LintFailed(SkillreachError):
    """Lint found errors (exit 1). Raised by the CLI after the report was printed."""

    exit_code = 1


class GateFailed(SkillreachError):
    """A gate failed: a breach, or an inconclusive result under ``--strict`` (exit 1)."""

    exit_code = 1


class MalformedReply(ValueError):
    """The model's reply held no JSON list of drafts."""


class JudgeReplyError(ProbeFailed):
    """The judge's reply held no grade in [0, 1]."""


class NoFrontmatterError(SkillParseError):
    """A ``SKILL.md`` with no frontmatter at all (e.g. a nested phase document): not a skill."""
