"""The LLM rubric judge over the Messages API (official ``anthropic`` SDK, imported lazily).

Key and endpoint come from ``ANTHROPIC_API_KEY`` / ``ANTHROPIC_BASE_URL`` as the SDK reads them (or a
``client`` passed in). One request per graded answer: the prompt of ``skillreach/templates/judge.j2``
as the user message, no tools (the SDK of this project takes no ``temperature``). Transient failures
(429, 529, 5xx, timeouts, dropped connections) are retried by the SDK (``max_retries``, honouring
``retry-after``); what still fails becomes :class:`~skillreach.errors.ProbeFailed` (the probe stays
ungraded). Keys never reach messages.
"""

from __future__ import annotations

from typing import Any, ClassVar

from skillreach.errors import ProbeFailed, TransientProbeError
from skillreach.judge import JudgeRequest, JudgeResult, parse_grade
from skillreach.models import Usage

__all__ = ["DEFAULT_JUDGE_MODEL", "AnthropicJudge"]

DEFAULT_JUDGE_MODEL = "claude-haiku-4-5"

SYSTEM = "You are a strict, fair grader. You answer with one JSON object only."


class AnthropicJudge:
    name: ClassVar[str] = "anthropic"

    def __init__(
        self,
        model: str = DEFAULT_JUDGE_MODEL,
        *,
        client: Any = None,
        max_tokens: int = 300,
        max_retries: int = 6,
        timeout_s: float = 120.0,
    ) -> None:
        self.model = model
        self.max_tokens = max_tokens
        self._client = client
        self._own_client = client is None
        self._max_retries = max_retries
        self._timeout_s = timeout_s

    def _get_client(self) -> Any:
        if self._client is None:
            import anthropic

            self._client = anthropic.AsyncAnthropic(max_retries=self._max_retries, timeout=self._timeout_s)
        return self._client

    async def grade(self, request: JudgeRequest) -> JudgeResult:
        import anthropic

        client = self._get_client()
        try:
            message = await client.messages.create(
                model=self.model,
                max_tokens=self.max_tokens,
                system=SYSTEM,
                messages=[{"role": "user", "content": request.prompt}],
            )
        except anthropic.RateLimitError as exc:
            raise TransientProbeError(f"judge: rate limited after retries ({exc.status_code})") from exc
        except anthropic.APIStatusError as exc:
            detail = _error_message(exc)
            raise ProbeFailed(f"judge: Messages API answered {exc.status_code}: {detail}") from exc
        except anthropic.APITimeoutError as exc:
            raise TransientProbeError("judge: request timed out after retries") from exc
        except anthropic.APIConnectionError as exc:
            raise TransientProbeError("judge: connection failed after retries") from exc
        text = "".join(getattr(b, "text", "") for b in message.content if getattr(b, "type", "") == "text")
        grade, reason = parse_grade(text)
        u = message.usage
        usage = Usage(
            input_tokens=u.input_tokens or 0,
            output_tokens=u.output_tokens or 0,
            cache_creation_input_tokens=getattr(u, "cache_creation_input_tokens", 0) or 0,
            cache_read_input_tokens=getattr(u, "cache_read_input_tokens", 0) or 0,
        )
        return JudgeResult(grade=grade, reason=reason, usage=usage, resolved_model=message.model)

    async def aclose(self) -> None:
        if self._own_client and self._client is not None:
            await self._client.close()
            self._client = None


def _error_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return str(err["message"])[:200]
    return type(exc).__name__
