"""The search provider interface: normalised, deduplicated, ranked results."""

from __future__ import annotations

import abc

from deep_research.models import SearchHit


class SearchError(Exception):
    """A search failed; `retryable` says whether trying again can help.

    `retry_after_s` is how long the provider asked us to wait (HTTP 429/503 Retry-After), if it
    said; the search activity turns it into Temporal's `next_retry_delay`.
    """

    def __init__(self, message: str, *, retryable: bool = True, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.retry_after_s = retry_after_s


class ConfigurationError(SearchError):
    """The worker's search configuration is wrong (unknown backend, missing key or URL): never
    retried (its type name is in policies.NON_RETRYABLE)."""

    retryable = False

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=False)


class SearchProvider(abc.ABC):
    name: str = "abstract"

    @abc.abstractmethod
    async def search(self, query: str, *, max_results: int) -> list[SearchHit]:
        """Results for one query, best first, with `provider` set."""

    async def suggestions(self, query: str, *, limit: int) -> list[str]:
        """Related queries offered by the provider; none by default."""
        return []
