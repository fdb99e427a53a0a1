"""Brave Search API (its own web index), https://brave.com/search/api/.

    GET {BRAVE_URL:-https://api.search.brave.com}/res/v1/web/search?q=...&count=n,
    header X-Subscription-Token: <key>
    -> {"type": "search", "query": {"original", "altered", ...},
        "web": {"type": "search", "results": [{"title", "url", "description", "age",
        "extra_snippets", ...}]}, "mixed", ...}

Descriptions carry <strong> highlights, removed here. Related queries: `query.altered` (Brave's
spelling correction) when it differs from the query; no extra request. 429 without Retry-After
uses the first value of X-RateLimit-Reset. Brave reports a bad token as 401, or as 422 with
code SUBSCRIPTION_TOKEN_INVALID: both are "API key rejected".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from deep_research.models import SearchHit
from deep_research.search.providers._http import (
    HttpSearchProvider,
    env_key,
    env_url,
    make_hit,
    unique_suggestions,
)

DEFAULT_URL = "https://api.search.brave.com"
MAX_COUNT = 20


class BraveProvider(HttpSearchProvider):
    name = "brave"

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> "BraveProvider":
        return cls(base_url=env_url(env, "BRAVE_URL", DEFAULT_URL, provider=cls.name),
                   api_key=env_key(env, "BRAVE_API_KEY", provider=cls.name),
                   **cls.common_options(env))

    def check_status(self, response: httpx.Response) -> None:
        if response.status_code == 422 and "TOKEN" in response.text.upper():
            raise self._error("API key rejected (422)", retryable=False)
        super().check_status(response)

    async def fetch(self, query: str, max_results: int) -> dict[str, Any]:
        return await self.request_json(
            "GET", "/res/v1/web/search",
            params={"q": query, "count": min(max(max_results, 1), MAX_COUNT)},
            headers={"X-Subscription-Token": self._api_key or ""},
        )

    def parse(self, body: dict[str, Any], query: str) -> tuple[list[SearchHit], list[str]]:
        hits: list[SearchHit] = []
        for item in self.results_list(body, "web", "results"):
            if isinstance(item, Mapping):
                extra = item.get("extra_snippets")
                snippet = item.get("description") or ""
                if not snippet and isinstance(extra, list) and extra:
                    snippet = extra[0]
                hit = make_hit(self.name, len(hits), item.get("url"), item.get("title"), snippet)
                if hit is not None:
                    hits.append(hit)
        q = body.get("query")
        altered = q.get("altered") if isinstance(q, Mapping) else None
        return hits, unique_suggestions([altered] if altered else [], query)


PROVIDER_CLASS = BraveProvider


def build(env: Mapping[str, str]) -> BraveProvider:
    return BraveProvider.from_env(env)
