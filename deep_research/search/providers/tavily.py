"""Tavily (search API for agents), https://tavily.com.

    POST {TAVILY_URL:-https://api.tavily.com}/search, header Authorization: Bearer <key>,
    body {"query", "max_results", "search_depth", "include_raw_content", "include_answer"}
    -> {"query", "answer", "images", "follow_up_questions": [...] | null,
        "results": [{"title", "url", "content", "score", "raw_content"}], "response_time"}

`raw_content` (the page text Tavily extracted) is asked for only with TAVILY_RAW_CONTENT=1 and
is cut to `models.MAX_RAW_CONTENT_CHARS`. Results are ordered by Tavily's score. Related queries:
`follow_up_questions` when Tavily sends them (no extra request otherwise). Errors: 432/433 are
Tavily's plan and pay-as-you-go limits (not retried).
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

DEFAULT_URL = "https://api.tavily.com"
MAX_RESULTS = 20


class TavilyProvider(HttpSearchProvider):
    name = "tavily"

    def __init__(self, *, include_raw_content: bool = False, search_depth: str = "basic", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.include_raw_content = include_raw_content
        self.search_depth = search_depth

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> "TavilyProvider":
        raw = (env.get("TAVILY_RAW_CONTENT") or "").strip().lower() in ("1", "true", "yes", "on")
        depth = (env.get("TAVILY_SEARCH_DEPTH") or "basic").strip() or "basic"
        return cls(base_url=env_url(env, "TAVILY_URL", DEFAULT_URL, provider=cls.name),
                   api_key=env_key(env, "TAVILY_API_KEY", provider=cls.name),
                   include_raw_content=raw, search_depth=depth, **cls.common_options(env))

    def check_status(self, response: httpx.Response) -> None:
        if response.status_code in (432, 433):
            raise self._error(f"usage limit of the plan reached ({response.status_code}): "
                              f"{self.error_detail(response)}", retryable=False)
        super().check_status(response)

    async def fetch(self, query: str, max_results: int) -> dict[str, Any]:
        body = {
            "query": query,
            "max_results": min(max(max_results, 1), MAX_RESULTS),
            "search_depth": self.search_depth,
            "include_raw_content": self.include_raw_content,
            "include_answer": False,
        }
        return await self.request_json("POST", "/search", json=body,
                                       headers={"Authorization": f"Bearer {self._api_key or ''}"})

    def parse(self, body: dict[str, Any], query: str) -> tuple[list[SearchHit], list[str]]:
        items = [i for i in self.results_list(body, "results") if isinstance(i, Mapping)]
        # Stable sort: equal (or missing) scores keep Tavily's order.
        items.sort(key=lambda i: -float(i["score"]) if isinstance(i.get("score"), (int, float)) else 0.0)
        hits: list[SearchHit] = []
        for item in items:
            hit = make_hit(self.name, len(hits), item.get("url"), item.get("title"), item.get("content"),
                           raw_content=item.get("raw_content") if self.include_raw_content else None)
            if hit is not None:
                hits.append(hit)
        return hits, unique_suggestions(self.results_list(body, "follow_up_questions"), query)


PROVIDER_CLASS = TavilyProvider


def build(env: Mapping[str, str]) -> TavilyProvider:
    return TavilyProvider.from_env(env)
