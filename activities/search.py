"""The search step: primary query plus related queries, merged, deduplicated, ranked."""

from __future__ import annotations

import asyncio
import re
from datetime import timedelta

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.deps import Deps, sandbox_errors, usage_records
from deep_research.logging import activity_logger
from deep_research.llm import BudgetExhausted, LLMClient, LLMError, TokenBudget
from deep_research.llm.related import related_queries_llm
from deep_research.models import LLMUsage, SearchInput, SearchOutput
from deep_research.search.base import SearchError
from deep_research.search.urls import dedupe_and_rank

_STOP = set(
    "a an and are as at be by can do does for from how i in is it of on or should the to what when "
    "where which who why will with my me you your we our this that these those".split()
)


def related_from_question(question: str, count: int) -> list[str]:
    """Related queries when the provider offers none: keyword forms of the question itself."""
    words = re.findall(r"[\w.]+", question)
    keywords = [w for w in words if w.lower() not in _STOP]
    variants = [" ".join(keywords)]
    # Then the question minus its most generic keyword each time (longest words are kept).
    by_len = sorted(keywords, key=len)
    for drop in by_len:
        if len(variants) > count:
            break
        variant = " ".join(w for w in keywords if w != drop)
        if variant and variant not in variants:
            variants.append(variant)
    return [v for v in variants if v and v.lower() != question.lower()][:count]


# Longest wait asked by a provider's Retry-After that we honour; the research has a deadline.
MAX_RETRY_AFTER = timedelta(minutes=5)


class _retry_after:
    """A SearchError with `retry_after_s` (429/503) becomes an ApplicationError with Temporal's
    `next_retry_delay`, so the next attempt waits as long as the provider asked (capped)."""

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if isinstance(exc, SearchError) and exc.retryable and exc.retry_after_s is not None:
            delay = min(timedelta(seconds=exc.retry_after_s), MAX_RETRY_AFTER)
            raise ApplicationError(f"{type(exc).__name__}: {exc}", type=type(exc).__name__,
                                   next_retry_delay=max(delay, timedelta(seconds=1))) from exc
        return False


class SearchActivities:
    def __init__(self, deps: Deps) -> None:
        self.deps = deps

    @activity.defn(name="search")
    async def search(self, inp: SearchInput) -> SearchOutput:
        log = activity_logger()
        with sandbox_errors(), _retry_after():
            provider = self.deps.search_provider(inp.provider)
            hits = await provider.search(inp.question, max_results=inp.max_results)
            queries = [inp.question]
            related = await provider.suggestions(inp.question, limit=inp.related_queries)
            usage: list[LLMUsage] = []
            if not related and inp.related_queries:
                related, usage = await self._related_by_llm(inp)
            if not related:
                related = related_from_question(inp.question, inp.related_queries)
            related = related[: inp.related_queries]
            # Related queries at once (the provider's concurrency limit applies). The question's
            # own results are in hand: a related query that fails in a retryable way is skipped.
            results = await asyncio.gather(
                *(provider.search(q, max_results=inp.max_results) for q in related), return_exceptions=True
            )
            for query, result in zip(related, results):
                if isinstance(result, SearchError) and result.retryable and hits:
                    log.warning("related query failed; skipped", query=query, error=str(result))
                    continue
                if isinstance(result, BaseException):
                    raise result
                queries.append(query)
                hits += result
        # Domain diversity: one site cannot fill the list (soft cap, see dedupe_and_rank).
        ranked = dedupe_and_rank(hits, inp.max_results, max_per_host=max(2, inp.max_results // 3))
        log.info("search done", provider=provider.name, queries=len(queries), hits=len(ranked))
        return SearchOutput(hits=ranked, queries=queries, provider=provider.name, usage=usage)

    async def _related_by_llm(self, inp: SearchInput) -> tuple[list[str], list[LLMUsage]]:
        """Related queries from the LLM when one is configured; any failure: none (the caller derives them)."""
        llm = self.deps.llm
        if llm is None:
            return [], []
        try:
            async with LLMClient(llm) as client:
                queries, used = await related_queries_llm(client, inp.question, inp.related_queries,
                                                          TokenBudget(limit=llm.token_budget),
                                                          candidates=llm.candidates(inp.mode))
        except (BudgetExhausted, LLMError) as exc:
            activity_logger().warning("LLM related queries failed; derived from the question", error=str(exc)[:200])
            return [], []
        return queries, usage_records([used])
