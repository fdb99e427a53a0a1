"""The search step: primary query plus related queries, merged, deduplicated, ranked."""

from __future__ import annotations

import re

from temporalio import activity

from activities.deps import Deps, sandbox_errors
from deep_research.logging import activity_logger
from deep_research.models import SearchInput, SearchOutput
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


class SearchActivities:
    def __init__(self, deps: Deps) -> None:
        self.deps = deps

    @activity.defn(name="search")
    async def search(self, inp: SearchInput) -> SearchOutput:
        log = activity_logger()
        with sandbox_errors():
            provider = self.deps.search_provider(inp.provider)
            hits = await provider.search(inp.question, max_results=inp.max_results)
            queries = [inp.question]
            related = await provider.suggestions(inp.question, limit=inp.related_queries)
            if not related:
                related = related_from_question(inp.question, inp.related_queries)
            for query in related[: inp.related_queries]:
                queries.append(query)
                hits += await provider.search(query, max_results=inp.max_results)
        ranked = dedupe_and_rank(hits, inp.max_results)
        log.info("search done", provider=provider.name, queries=len(queries), hits=len(ranked))
        return SearchOutput(hits=ranked, queries=queries, provider=provider.name)
