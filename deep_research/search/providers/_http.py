"""What the web search providers share: one HTTP client each, a concurrency limit, typed errors.

Temporal is the one retry layer: the client here never retries. Every failure becomes a
`SearchError` whose `retryable` says whether the activity should be tried again:

| what happened | retryable | note |
| --- | --- | --- |
| 429 | yes | `retry_after_s` from Retry-After (seconds or HTTP date), else X-RateLimit-Reset |
| 5xx, 408, timeout, connection refused/reset | yes | 503 Retry-After honoured too |
| 401, 403 | no | "<provider>: API key rejected (401)" (the key itself never appears) |
| other 4xx | no | the provider's own message, with any key masked, cut to 200 chars |
| body is not JSON (proxy error page, truncated body) | yes | transient in practice; attempts are bounded by SEARCH_RETRY |
| JSON of the wrong shape | no | the API changed or the URL points at something else |
| no results | - | an empty list, not an error |
"""

from __future__ import annotations

import asyncio
import html
import math
import re
import time
from collections import OrderedDict
from collections.abc import Mapping
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from deep_research.models import SearchHit
from deep_research.search.base import ConfigurationError, SearchError, SearchProvider

DEFAULT_TIMEOUT_S = 20.0
DEFAULT_CONCURRENCY = 4
SUGGESTION_CACHE = 64  # queries whose related searches are remembered per provider instance
USER_AGENT = "durable-deep-research/0.1 (+https://temporal.io)"

_TAG_RE = re.compile(r"<[^>]+>")


def env_float(env: Mapping[str, str], key: str, default: float, *, minimum: float) -> float:
    raw = (env.get(key) or "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigurationError(f"{key}={raw!r} is not a number") from None
    if not math.isfinite(value) or value < minimum:
        raise ConfigurationError(f"{key}={raw!r} must be >= {minimum:g}")
    return value


def env_url(env: Mapping[str, str], key: str, default: str | None, *, provider: str) -> str:
    """An http(s) base URL from `key` (or the default), without a trailing slash."""
    raw = (env.get(key) or "").strip() or default
    if not raw:
        raise ConfigurationError(
            f"{provider}: {key} is not set in the worker's environment (the URL of the {provider} instance)"
        )
    parts = urlsplit(raw)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigurationError(f"{provider}: {key} must be an http(s) URL, got {redact_url(raw)!r}")
    return raw.rstrip("/")


def env_key(env: Mapping[str, str], key: str, *, provider: str) -> str:
    value = (env.get(key) or "").strip()
    if not value:
        raise ConfigurationError(f"{provider}: {key} is not set in the worker's environment")
    return value


def redact_url(url: str) -> str:
    """The URL without user:password (for messages)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<invalid URL>"
    if parts.username is None and parts.password is None:
        return url
    netloc = parts.hostname or ""
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, f"***@{netloc}", parts.path, parts.query, parts.fragment))


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a Retry-After header: delta-seconds or an HTTP date; None if absent
    or unparseable; never negative."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None:
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    if not math.isfinite(seconds):
        return None
    return max(0.0, seconds)


def clean_text(text: Any) -> str:
    """Provider snippets as plain text: tags (Brave's <strong>) removed, entities decoded."""
    if not isinstance(text, str):
        return ""
    return " ".join(html.unescape(_TAG_RE.sub("", text)).split())


def make_hit(provider: str, rank: int, url: Any, title: Any, snippet: Any,
             raw_content: Any = None) -> SearchHit | None:
    """A normalised hit, or None when the result has no usable http(s) URL.

    Scores are reciprocal ranks (1, 1/2, 1/3, ...) for every web provider, so hits of different
    providers and queries are comparable when merged; the provider's own order is kept.
    """
    if not isinstance(url, str):
        return None
    url = url.strip()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    title_text = clean_text(title) or url
    raw = raw_content if isinstance(raw_content, str) and raw_content.strip() else None
    return SearchHit(url=url, title=title_text, snippet=clean_text(snippet),
                     score=round(1.0 / (rank + 1), 6), provider=provider, raw_content=raw)


def unique_suggestions(items: list[Any], query: str) -> list[str]:
    out: list[str] = []
    seen = {query.strip().lower()}
    for item in items:
        text = clean_text(item)
        if text and text.lower() not in seen:
            seen.add(text.lower())
            out.append(text)
    return out


class HttpSearchProvider(SearchProvider):
    """Base of the web providers: subclasses build the request and parse the response.

    One `httpx.AsyncClient` per instance (created on first use, connection pool reused), at most
    `concurrency` requests in flight per instance, no retries (Temporal retries the activity).
    Related searches that arrive with a result page are remembered per query, so
    `suggestions()` right after `search()` costs no second request.
    """

    name = "http"
    # Whether suggestions() may send a request of its own when none are remembered for the query.
    suggestions_need_request = False

    def __init__(self, *, base_url: str, api_key: str | None = None,
                 timeout_s: float = DEFAULT_TIMEOUT_S, concurrency: int = DEFAULT_CONCURRENCY,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self._api_key = api_key
        self.timeout_s = timeout_s
        self.concurrency = max(1, int(concurrency))
        self._transport = transport
        self._client: httpx.AsyncClient | None = None
        self._semaphore: asyncio.Semaphore | None = None
        self._suggestions: OrderedDict[str, list[str]] = OrderedDict()

    @classmethod
    def common_options(cls, env: Mapping[str, str]) -> dict[str, Any]:
        return {
            "timeout_s": env_float(env, "DR_SEARCH_TIMEOUT_S", DEFAULT_TIMEOUT_S, minimum=0.1),
            "concurrency": int(env_float(env, "DR_SEARCH_CONCURRENCY", DEFAULT_CONCURRENCY, minimum=1)),
        }

    def __repr__(self) -> str:  # never the key
        return f"{type(self).__name__}(base_url={redact_url(self.base_url)!r})"

    # ------------------------------------------------------------------ plumbing

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(
                timeout=httpx.Timeout(self.timeout_s),
                follow_redirects=True,
                headers={"User-Agent": USER_AGENT, "Accept": "application/json"},
                transport=self._transport,
            )
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    def _mask(self, text: str) -> str:
        if self._api_key:
            text = text.replace(self._api_key, "***")
        return text

    def _error(self, message: str, *, retryable: bool, retry_after_s: float | None = None) -> SearchError:
        return SearchError(f"{self.name}: {self._mask(message)}", retryable=retryable,
                           retry_after_s=retry_after_s)

    async def request_json(self, method: str, path: str, *, params: dict[str, Any] | None = None,
                           json: dict[str, Any] | None = None,
                           headers: dict[str, str] | None = None) -> dict[str, Any]:
        """One request under the concurrency limit; the JSON object it returned, or SearchError."""
        if self._semaphore is None:
            self._semaphore = asyncio.Semaphore(self.concurrency)
        url = f"{self.base_url}{path}"
        async with self._semaphore:
            try:
                response = await self.client.request(method, url, params=params, json=json, headers=headers)
            except httpx.TimeoutException:
                raise self._error(f"no answer from {redact_url(self.base_url)} within {self.timeout_s:g}s",
                                  retryable=True) from None
            except httpx.TransportError as exc:
                raise self._error(f"cannot reach {redact_url(self.base_url)} ({type(exc).__name__})",
                                  retryable=True) from None
        self.check_status(response)
        try:
            body = response.json()
        except ValueError:
            kind = response.headers.get("content-type", "unknown content type")
            raise self._error(f"answer is not JSON ({kind}, {len(response.content)} bytes)",
                              retryable=True) from None
        if not isinstance(body, dict):
            raise self._error(f"unexpected answer: a JSON {type(body).__name__}, not an object",
                              retryable=False)
        return body

    def check_status(self, response: httpx.Response) -> None:
        status = response.status_code
        if status < 400:
            return
        if status == 429:
            wait = parse_retry_after(response.headers.get("retry-after"))
            if wait is None:  # Brave: X-RateLimit-Reset "1, 1419704" (seconds, per window)
                reset = response.headers.get("x-ratelimit-reset", "").split(",")[0]
                wait = parse_retry_after(reset)
            after = f"; retry after {wait:g}s" if wait is not None else ""
            raise self._error(f"rate limited (429){after}", retryable=True, retry_after_s=wait)
        if status >= 500 or status == 408:
            wait = parse_retry_after(response.headers.get("retry-after"))
            raise self._error(f"server error ({status})", retryable=True, retry_after_s=wait)
        if status in (401, 403):
            raise self._error(self.auth_message(status, response), retryable=False)
        raise self._error(f"request rejected ({status}): {self.error_detail(response)}", retryable=False)

    def auth_message(self, status: int, response: httpx.Response) -> str:
        return f"API key rejected ({status})"

    def error_detail(self, response: httpx.Response) -> str:
        """The provider's own explanation of a 4xx, short and without the key."""
        try:
            body = response.json()
        except ValueError:
            body = response.text
        detail: Any = body
        if isinstance(body, dict):
            for key in ("detail", "error", "message", "msg"):
                if key in body:
                    detail = body[key]
                    break
            if isinstance(detail, dict):
                detail = detail.get("error") or detail.get("detail") or detail.get("message") or detail
        text = " ".join(str(detail).split())
        return self._mask(text)[:200] or "no details"

    def remember_suggestions(self, query: str, suggestions: list[str]) -> None:
        self._suggestions[query] = suggestions
        self._suggestions.move_to_end(query)
        while len(self._suggestions) > SUGGESTION_CACHE:
            self._suggestions.popitem(last=False)

    # ------------------------------------------------------------------ interface

    async def search(self, query: str, *, max_results: int) -> list[SearchHit]:
        if max_results <= 0 or not query.strip():
            return []
        body = await self.fetch(query, max_results)
        hits, suggestions = self.parse(body, query)
        self.remember_suggestions(query, suggestions)
        return hits[:max_results]

    async def suggestions(self, query: str, *, limit: int) -> list[str]:
        if limit <= 0:
            return []
        if query not in self._suggestions and self.suggestions_need_request:
            await self.search(query, max_results=1)
        return self._suggestions.get(query, [])[:limit]

    async def fetch(self, query: str, max_results: int) -> dict[str, Any]:
        raise NotImplementedError

    def parse(self, body: dict[str, Any], query: str) -> tuple[list[SearchHit], list[str]]:
        raise NotImplementedError

    def results_list(self, body: Mapping[str, Any], *path: str) -> list[Any]:
        """body[path...] as a list: missing or null is empty; any other type is a shape error."""
        value: Any = body
        for key in path:
            if value is None:
                return []
            if not isinstance(value, Mapping):
                raise self._error(f"unexpected answer: {'.'.join(path)} is not an object", retryable=False)
            value = value.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            raise self._error(f"unexpected answer: {'.'.join(path)} is not a list", retryable=False)
        return value
