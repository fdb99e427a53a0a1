"""SearxNG (self-hosted metasearch), JSON API.

    GET {SEARXNG_URL}/search?q=...&format=json[&engines=...][&language=...]
    -> {"query", "number_of_results", "results": [{"url", "title", "content", "engine",
        "score", ...}], "answers", "corrections", "infoboxes", "suggestions": [...],
        "unresponsive_engines": [[engine, reason], ...]}

The JSON format must be enabled in the instance's settings.yml (`search.formats: [html, json]`);
otherwise SearxNG answers 403, reported as such. SearxNG has no result-count parameter: the
first page (about 20 results) is cut to `max_results`. No key; a reverse proxy's credentials can
go in the URL (`https://user:pass@host`) and are never shown in messages.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from deep_research.models import SearchHit
from deep_research.search.providers._http import HttpSearchProvider, env_url, make_hit, unique_suggestions


class SearxngProvider(HttpSearchProvider):
    name = "searxng"
    suggestions_need_request = True

    def __init__(self, *, engines: str = "", language: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.engines = engines
        self.language = language

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> "SearxngProvider":
        return cls(base_url=env_url(env, "SEARXNG_URL", None, provider=cls.name),
                   engines=(env.get("SEARXNG_ENGINES") or "").strip(),
                   language=(env.get("SEARXNG_LANGUAGE") or "").strip(),
                   **cls.common_options(env))

    def auth_message(self, status: int, response: httpx.Response) -> str:
        if status == 403:
            return ("instance refused the JSON API (403): enable it in settings.yml "
                    "(search.formats: [html, json])")
        return f"instance requires authentication ({status}): put the credentials in SEARXNG_URL"

    async def fetch(self, query: str, max_results: int) -> dict[str, Any]:
        params = {"q": query, "format": "json", "pageno": 1}
        if self.engines:
            params["engines"] = self.engines
        if self.language:
            params["language"] = self.language
        return await self.request_json("GET", "/search", params=params)

    def parse(self, body: dict[str, Any], query: str) -> tuple[list[SearchHit], list[str]]:
        results = self.results_list(body, "results")
        hits: list[SearchHit] = []
        for item in results:
            if isinstance(item, Mapping):
                hit = make_hit(self.name, len(hits), item.get("url"), item.get("title"), item.get("content"))
                if hit is not None:
                    hits.append(hit)
        unresponsive = self.results_list(body, "unresponsive_engines")
        if not hits and unresponsive:
            # Every engine failed (timeouts, CAPTCHAs, their own rate limits): worth another try.
            names = ", ".join(str(e[0] if isinstance(e, list) and e else e) for e in unresponsive[:5])
            raise self._error(f"no results: engines unresponsive ({names})", retryable=True)
        suggestions = unique_suggestions(self.results_list(body, "suggestions"), query)
        return hits, suggestions


PROVIDER_CLASS = SearxngProvider


def build(env: Mapping[str, str]) -> SearxngProvider:
    return SearxngProvider.from_env(env)
