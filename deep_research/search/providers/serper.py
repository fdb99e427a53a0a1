"""Serper (Google results), https://serper.dev.

    POST {SERPER_URL:-https://google.serper.dev}/search, header X-API-KEY: <key>,
    body {"q": ..., "num": n}
    -> {"searchParameters", "organic": [{"title", "link", "snippet", "position", ...}],
        "answerBox", "knowledgeGraph", "peopleAlsoAsk": [{"question", ...}],
        "relatedSearches": [{"query"}]}

Related queries: `relatedSearches`, then the `peopleAlsoAsk` questions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from deep_research.models import SearchHit
from deep_research.search.providers._http import (
    HttpSearchProvider,
    env_key,
    env_url,
    make_hit,
    unique_suggestions,
)

DEFAULT_URL = "https://google.serper.dev"
MAX_NUM = 100


class SerperProvider(HttpSearchProvider):
    name = "serper"
    suggestions_need_request = True

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> "SerperProvider":
        return cls(base_url=env_url(env, "SERPER_URL", DEFAULT_URL, provider=cls.name),
                   api_key=env_key(env, "SERPER_API_KEY", provider=cls.name),
                   **cls.common_options(env))

    async def fetch(self, query: str, max_results: int) -> dict[str, Any]:
        return await self.request_json(
            "POST", "/search", json={"q": query, "num": min(max(max_results, 1), MAX_NUM)},
            headers={"X-API-KEY": self._api_key or ""},
        )

    def parse(self, body: dict[str, Any], query: str) -> tuple[list[SearchHit], list[str]]:
        items = [i for i in self.results_list(body, "organic") if isinstance(i, Mapping)]
        items.sort(key=lambda i: i.get("position") if isinstance(i.get("position"), (int, float)) else 1e9)
        hits: list[SearchHit] = []
        for item in items:
            hit = make_hit(self.name, len(hits), item.get("link"), item.get("title"), item.get("snippet"))
            if hit is not None:
                hits.append(hit)
        related = [r.get("query") for r in self.results_list(body, "relatedSearches") if isinstance(r, Mapping)]
        related += [q.get("question") for q in self.results_list(body, "peopleAlsoAsk") if isinstance(q, Mapping)]
        return hits, unique_suggestions(related, query)


PROVIDER_CLASS = SerperProvider


def build(env: Mapping[str, str]) -> SerperProvider:
    return SerperProvider.from_env(env)
