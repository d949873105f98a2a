"""The LLM rubric judge over the Messages API (official ``anthropic`` SDK, imported lazily).

Key and endpoint come from ``ANTHROPIC_API_KEY`` / ``ANTHROPIC_BASE_URL`` as the SDK reads them (or a
``client`` passed in). One request per graded answer: the prompt of ``skillreach/templates/judge.j2``
as the user message, no tools (the SDK of this project takes no ``temperature``). Transient failures
(429, 529, 5xx, timeouts, dropped connections) are retried by the SDK (``max_retries``, honouring
``retry-after``); ``timeout_s`` is a deadline for the whole grading, the SDK's retries included (the
SDK's own timeout bounds each read: a reply dripped a byte at a time would never end); what still
fails becomes :class:`~skillreach.errors.ProbeFailed` (the probe stays
ungraded). Keys never reach messages.
"""

from __future__ import annotations

from typing import Any, ClassVar

from skillreach.runtimes._anthropic_common import translate_error, usage_of, within_deadline
from skillreach.study.judge import JudgeRequest, JudgeResult, parse_grade

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
        client = self._get_client()
        try:
            create = client.messages.create(
                model=self.model,
                max_tokens=self.max_tokens,
                system=SYSTEM,
                messages=[{"role": "user", "content": request.prompt}],
            )
            url = str(getattr(client, "base_url", "") or "").rstrip("/") + "/v1/messages"
            message = await within_deadline(self._timeout_s, create, url)
        except Exception as exc:
            err = translate_error(exc)  # the one map of the SDK's errors (runtime, judge, generator)
            if err is None:
                raise
            raise type(err)(f"judge: {err.message} (after the SDK's retries)") from exc
        text = "".join(getattr(b, "text", "") for b in message.content if getattr(b, "type", "") == "text")
        grade, reason = parse_grade(text)
        return JudgeResult(grade=grade, reason=reason, usage=usage_of(message), resolved_model=message.model)

    async def aclose(self) -> None:
        if self._own_client and self._client is not None:
            await self._client.close()
            self._client = None

