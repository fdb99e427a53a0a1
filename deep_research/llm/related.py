"""Related search queries written by the LLM, for providers that offer no suggestions (issue 5)."""

from __future__ import annotations

import re

from deep_research.llm.budget import TokenBudget, estimate_prompt_tokens
from deep_research.llm.client import LLMClient, Usage

MAX_QUERY_CHARS = 200
OUTPUT_TOKENS = 200

_PROMPT = (
    "Write {n} web search queries that would find sources for the research question below, "
    "each phrased differently from the question and from each other. Return only the queries, one per "
    "line, without numbering or quotes.\n\nQuestion: {question}"
)


def parse_queries(text: str, question: str, limit: int) -> list[str]:
    """Non-empty distinct lines, stripped of list markers and quotes, not the question itself."""
    queries: list[str] = []
    for line in text.splitlines():
        query = re.sub(r"^\s*(?:[-*•]|\d+[.)])\s*", "", line).strip().strip('"“”\'').strip()
        if query and len(query) <= MAX_QUERY_CHARS and query.lower() != question.lower() \
                and query.lower() not in (q.lower() for q in queries):
            queries.append(query)
    return queries[:limit]


async def related_queries_llm(client: LLMClient, question: str, limit: int, budget: TokenBudget,
                              *, candidates=None) -> tuple[list[str], Usage]:
    """Up to `limit` related queries. Raises BudgetExhausted (nothing sent) or LLMError."""
    messages = [{"role": "user", "content": _PROMPT.format(n=limit, question=question)}]
    budget.check(estimate_prompt_tokens(messages), OUTPUT_TOKENS)
    completion = await client.complete(messages, candidates=candidates, max_tokens=OUTPUT_TOKENS,
                                       step="related-queries")
    budget.add(completion.usage)
    return parse_queries(completion.text, question, limit), completion.usage
