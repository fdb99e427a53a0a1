"""The search provider interface: normalised, deduplicated, ranked results."""

from __future__ import annotations

import abc

from deep_research.models import SearchHit


class SearchError(Exception):
    """A search failed; `retryable` says whether trying again can help."""

    def __init__(self, message: str, *, retryable: bool = True) -> None:
        super().__init__(message)
        self.retryable = retryable


class SearchProvider(abc.ABC):
    name: str = "abstract"

    @abc.abstractmethod
    async def search(self, query: str, *, max_results: int) -> list[SearchHit]:
        """Results for one query, best first, with `provider` set."""

    async def suggestions(self, query: str, *, limit: int) -> list[str]:
        """Related queries offered by the provider; none by default."""
        return []
