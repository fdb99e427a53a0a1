"""Async client for an OpenAI-compatible chat completions endpoint, with model candidate fallback.

Retries: the `openai` client is built with `max_retries=0`; Temporal is the only retry layer.
Within one call the only fallback is the seed's: a 429 *before any output* moves on to the next
model candidate. Once output has started a failure raises `LLMStreamInterrupted` with the
partial text (never hidden by quietly switching models). Every other failure is an `LLMError`
whose `retryable` tells the caller whether an activity retry may help.

Secrets: error messages name the model and the HTTP status, never the key; any server text we
quote is scrubbed of the key, and the `openai` exception is not chained (`from None`) because
Temporal serialises exception causes into the workflow history.
"""

from __future__ import annotations

import inspect
import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import httpx
import openai

try:  # openai >= 3 ships its own fork of httpx; older versions use httpx itself
    import httpx2 as _httpx2

    _TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (openai.APIError, httpx.HTTPError, _httpx2.HTTPError)
    _TIMEOUT_ERRORS: tuple[type[BaseException], ...] = (openai.APITimeoutError, httpx.TimeoutException,
                                                        _httpx2.TimeoutException)
except ImportError:  # pragma: no cover - depends on the openai version
    _TRANSPORT_ERRORS = (openai.APIError, httpx.HTTPError)
    _TIMEOUT_ERRORS = (openai.APITimeoutError, httpx.TimeoutException)
from pydantic import BaseModel, ConfigDict

from deep_research.llm.config import LLMConfig

log = logging.getLogger("deep_research.llm")

CHARS_PER_TOKEN = 4
_SERVER_TEXT_CHARS = 200


class Usage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    estimated: bool = False  # the server sent no usage: chars/4 estimates
    step: str = ""  # "summarize", "summarize-repair", "generate"

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class Completion(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str
    model: str
    usage: Usage
    finish_reason: str | None = None
    tried: list[str] = []  # candidates tried, in order (the last one answered)


class LLMError(Exception):
    """An LLM call failed. `retryable`: whether retrying the activity later may help.

    kind: "rate_limited" (every candidate answered 429), "server" (5xx), "timeout", "connection",
    "auth" (401/403), "bad_request" (400/422), "not_found" (404), "client" (other 4xx),
    "protocol" (unreadable answer), "interrupted" (see LLMStreamInterrupted).
    """

    def __init__(self, message: str, *, retryable: bool, kind: str, model: str | None = None,
                 status: int | None = None, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retryable, self.kind, self.model, self.status = retryable, kind, model, status
        self.retry_after_s = retry_after_s


class LLMStreamInterrupted(LLMError):
    """The stream failed after output had started; `partial_text` is what arrived.

    Not retried on another model (the reader has seen the partial text). Retryable: an activity
    retry starts the step again from scratch.
    """

    def __init__(self, partial_text: str, model: str, detail: str = "") -> None:
        super().__init__(f"stream from model {model} interrupted after {len(partial_text)} characters"
                         + (f": {detail}" if detail else ""), retryable=True, kind="interrupted", model=model)
        self.partial_text = partial_text


OnDelta = Callable[[str], Awaitable[None] | None]


class LLMClient:
    """`complete` and `stream` over one OpenAI-compatible endpoint. Use `async with` or `aclose()`."""

    def __init__(self, config: LLMConfig, *, http_client: Any = None) -> None:
        self.config = config
        self._secret = config.api_key.get_secret_value()
        self._openai = openai.AsyncOpenAI(
            base_url=config.base_url,
            api_key=self._secret or "unset",
            max_retries=0,
            timeout=config.timeout_s,
            http_client=http_client,
        )

    async def __aenter__(self) -> LLMClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._openai.close()

    def __repr__(self) -> str:
        return f"LLMClient({self.config.describe()})"

    # ----------------------------------------------------------------- public calls

    async def complete(self, messages: list[dict], *, candidates: Sequence[str] | None = None,
                       max_tokens: int | None = None, response_format_json: bool = False,
                       step: str = "") -> Completion:
        """One non-streamed chat completion, trying `candidates` in order on 429."""
        extra: dict = {"response_format": {"type": "json_object"}} if response_format_json else {}
        if max_tokens:
            extra["max_tokens"] = max_tokens
        tried: list[str] = []
        model, response = await self._first_answer(
            candidates, tried, lambda m: self._openai.chat.completions.create(model=m, messages=messages, **extra))
        if not response.choices:
            raise LLMError(f"model {model} returned no choices", retryable=True, kind="protocol", model=model)
        choice = response.choices[0]
        text = choice.message.content or ""
        usage = self._usage(model, messages, text, response.usage, step)
        log.info("llm call model=%s step=%s prompt_tokens=%d completion_tokens=%d cost_usd=%.6f",
                 model, step, usage.prompt_tokens, usage.completion_tokens, usage.cost_usd)
        return Completion(text=text, model=model, usage=usage, finish_reason=choice.finish_reason, tried=tried)

    async def stream(self, messages: list[dict], *, candidates: Sequence[str] | None = None,
                     on_delta: OnDelta | None = None, max_tokens: int | None = None,
                     step: str = "") -> Completion:
        """A streamed chat completion; each content delta goes to `on_delta` in order.

        429 before any output: next candidate. A failure after output started, or a stream that
        ends without a finish reason (connection cut): LLMStreamInterrupted(partial_text, model).
        """
        extra: dict = {"max_tokens": max_tokens} if max_tokens else {}
        tried: list[str] = []
        model, response = await self._first_answer(candidates, tried, lambda m: self._openai.chat.completions.create(
            model=m, messages=messages, stream=True, stream_options={"include_usage": True}, **extra))
        # One candidate answered: from here on a failure is not hidden.
        parts: list[str] = []
        server_usage = None
        finish_reason: str | None = None
        iterator = response.__aiter__()
        try:
            while True:
                try:
                    chunk = await iterator.__anext__()
                except StopAsyncIteration:
                    break
                except (*_TRANSPORT_ERRORS, ValueError) as exc:  # ValueError: a malformed chunk
                    if parts:
                        raise LLMStreamInterrupted("".join(parts), model, self._detail(exc)) from None
                    raise self._error(model, exc) from None
                if chunk.usage is not None:
                    server_usage = chunk.usage
                for choice in chunk.choices[:1]:
                    delta = choice.delta.content if choice.delta else None
                    if delta:
                        parts.append(delta)
                        if on_delta is not None:
                            result = on_delta(delta)
                            if inspect.isawaitable(result):
                                await result
                    if choice.finish_reason:
                        finish_reason = choice.finish_reason
        finally:
            await response.close()
        text = "".join(parts)
        if finish_reason is None:
            if parts:
                raise LLMStreamInterrupted(text, model, "stream ended without a finish reason")
            raise LLMError(f"stream from model {model} ended before any output", retryable=True,
                           kind="connection", model=model)
        usage = self._usage(model, messages, text, server_usage, step)
        log.info("llm stream model=%s step=%s prompt_tokens=%d completion_tokens=%d cost_usd=%.6f",
                 model, step, usage.prompt_tokens, usage.completion_tokens, usage.cost_usd)
        return Completion(text=text, model=model, usage=usage, finish_reason=finish_reason, tried=tried)

    # ----------------------------------------------------------------- helpers

    async def _first_answer(self, candidates: Sequence[str] | None, tried: list[str], create) -> tuple[str, Any]:
        """`await create(model)` for each candidate in order until one does not answer 429."""
        retry_after: float | None = None
        for model in self._candidates(candidates):
            tried.append(model)
            try:
                return model, await create(model)
            except openai.RateLimitError as exc:
                retry_after = _retry_after(exc) or retry_after
                log.warning("llm model=%s answered 429 before any output; trying the next candidate", model)
            except _TRANSPORT_ERRORS as exc:
                raise self._error(model, exc) from None
        raise self._all_rate_limited(tried, retry_after)

    def _candidates(self, candidates: Sequence[str] | None) -> list[str]:
        models = list(dict.fromkeys(m for m in (candidates or self.config.models) if m))
        if not models:
            raise LLMError("no model candidates configured", retryable=False, kind="client")
        return models

    def _usage(self, model: str, messages: list[dict], text: str, server_usage, step: str) -> Usage:
        if server_usage is not None and (server_usage.prompt_tokens or server_usage.completion_tokens):
            prompt, completion, estimated = server_usage.prompt_tokens or 0, server_usage.completion_tokens or 0, False
        else:
            prompt_chars = sum(len(str(m.get("content") or "")) for m in messages)
            prompt = -(-prompt_chars // CHARS_PER_TOKEN)
            completion = -(-len(text) // CHARS_PER_TOKEN)
            estimated = True
        return Usage(model=model, prompt_tokens=prompt, completion_tokens=completion,
                     cost_usd=self.config.cost_usd(model, prompt, completion), estimated=estimated, step=step)

    def _scrub(self, text: str) -> str:
        if self._secret:
            text = text.replace(self._secret, "***")
        # Key-like tokens some servers echo back ("Incorrect API key provided: sk-...").
        return re.sub(r"\b(sk|key|rk|pk)-[A-Za-z0-9_\-*]{6,}", r"\1-***", text)

    def _detail(self, exc: BaseException) -> str:
        body = getattr(exc, "body", None)
        message = ""
        if isinstance(body, dict):
            error = body.get("error", body)
            message = str(error.get("message", "")) if isinstance(error, dict) else str(error)
        if not message and not isinstance(exc, openai.APIStatusError):
            message = f"{type(exc).__name__}: {exc}"
        message = self._scrub(" ".join(message.split()))
        return message[:_SERVER_TEXT_CHARS]

    def _all_rate_limited(self, tried: list[str], retry_after: float | None) -> LLMError:
        return LLMError(f"every model candidate was rate limited (429): {', '.join(tried)}", retryable=True,
                        kind="rate_limited", model=tried[-1] if tried else None, status=429,
                        retry_after_s=retry_after)

    def _error(self, model: str, exc: BaseException) -> LLMError:
        detail = self._detail(exc)
        suffix = f": {detail}" if detail else ""
        if isinstance(exc, _TIMEOUT_ERRORS):
            error = LLMError(f"model {model} timed out after {self.config.timeout_s:g}s", retryable=True,
                             kind="timeout", model=model)
        elif isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            if status >= 500:
                kind, retryable = "server", True
            elif status in (401, 403):
                kind, retryable = "auth", False
            elif status == 404:
                kind, retryable = "not_found", False
            elif status in (400, 422):
                kind, retryable = "bad_request", False
            elif status in (408, 409):
                kind, retryable = "client", True
            else:
                kind, retryable = "client", False
            error = LLMError(f"model {model} failed with HTTP {status}{suffix}", retryable=retryable, kind=kind,
                             model=model, status=status)
        elif isinstance(exc, openai.APIConnectionError) or (isinstance(exc, _TRANSPORT_ERRORS)
                                                              and not isinstance(exc, openai.APIError)):
            error = LLMError(f"model {model}: connection failed{suffix}", retryable=True, kind="connection",
                             model=model)
        else:
            error = LLMError(f"model {model}: unreadable answer{suffix}", retryable=True, kind="protocol",
                             model=model)
        log.warning("llm error model=%s kind=%s retryable=%s", model, error.kind, error.retryable)
        return error


def _retry_after(exc: openai.APIStatusError) -> float | None:
    try:
        value = exc.response.headers.get("retry-after")
        return float(value) if value else None
    except (AttributeError, ValueError):
        return None
