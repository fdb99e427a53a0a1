"""Related queries: provider suggestions first; for a provider that has none, the LLM writes them
when one is configured (against the OpenAI-compatible loopback server), else the question does."""

from __future__ import annotations

from temporalio.testing import ActivityEnvironment

from activities.deps import Deps
from activities.search import SearchActivities
from deep_research.artifacts import ArtifactStore
from deep_research.config import Settings
from deep_research.llm import load_llm_config
from deep_research.llm.related import parse_queries
from deep_research.models import SearchHit, SearchInput
from deep_research.search.base import SearchProvider
from tests.fake_openai import FakeOpenAIServer, ok, status


class StaticProvider(SearchProvider):
    """A custom provider (the factory allows them) with results and no suggestions."""

    name = "static"

    def __init__(self) -> None:
        self.queries: list[str] = []

    async def search(self, query: str, *, max_results: int) -> list[SearchHit]:
        self.queries.append(query)
        return [SearchHit(url=f"http://127.0.0.2/{len(self.queries)}.html", title=query, provider=self.name)]


async def _search(tmp_path, provider, llm_env) -> tuple:
    deps = Deps(settings=Settings(), sandbox=None, artifacts=ArtifactStore(tmp_path),
                search_provider=lambda name: provider, llm=load_llm_config(llm_env))
    out = await ActivityEnvironment().run(SearchActivities(deps).search, SearchInput(
        question="What is the global interpreter lock?", max_results=10, related_queries=2))
    return out


async def test_llm_writes_related_queries_when_the_provider_has_none(tmp_path):
    provider = StaticProvider()
    with FakeOpenAIServer() as fake:
        fake.script("m", ok("1. GIL CPython threads\n- \"python global interpreter lock explained\"\n"
                            "What is the global interpreter lock?\n", prompt_tokens=40, completion_tokens=20))
        out = await _search(tmp_path, provider, {"DR_LLM_BASE_URL": fake.base_url, "DR_LLM_MODELS": "m"})
    assert out.queries[1:] == ["GIL CPython threads", "python global interpreter lock explained"]
    assert provider.queries == out.queries
    assert [(u.step, u.prompt_tokens, u.completion_tokens) for u in out.usage] == [("related-queries", 40, 20)]


async def test_llm_failure_falls_back_to_queries_from_the_question(tmp_path):
    provider = StaticProvider()
    with FakeOpenAIServer() as fake:
        fake.script("m", status(500))
        out = await _search(tmp_path, provider, {"DR_LLM_BASE_URL": fake.base_url, "DR_LLM_MODELS": "m"})
    assert out.queries[1] == "global interpreter lock" and out.usage == []


async def test_without_llm_queries_come_from_the_question(tmp_path):
    out = await _search(tmp_path, StaticProvider(), {})
    assert out.queries[1] == "global interpreter lock"


def test_parse_queries_drops_markers_duplicates_and_the_question():
    text = "1) a b\n* a b\n\n  \"c d\"  \nQ?\n" + "x" * 300
    assert parse_queries(text, "q?", 5) == ["a b", "c d"]
