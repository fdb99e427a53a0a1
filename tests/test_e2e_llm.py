"""The research with an LLM configured, end to end on the real dev server, real sandbox and Chromium,
against an OpenAI-compatible server on loopback (tests/fake_openai.py speaks the wire format)."""

from __future__ import annotations

import json
import os
import uuid

import pytest

from deep_research.config import load_settings
from deep_research.llm import load_llm_config
from deep_research.models import ResearchInput, ResearchResult
from tests.fake_openai import FakeOpenAIServer, ok, status
from tests.test_e2e import _env, corpus, pytestmark  # noqa: F401 - the corpus fixture and e2e marks
from worker import build_deps, build_worker
from workflows.research import FB_BUDGET, ResearchWorkflow

QUESTION = "How do I run a subprocess and capture its output?"
KEY = "sk-test-SECRET-0123456789"


def _summary_json(subprocess_url: str) -> str:
    return json.dumps({
        "sources": [{"title": "subprocess", "url": subprocess_url,
                     "summary": "subprocess.run runs a command; capture_output=True captures stdout and stderr.",
                     "keyPoints": ["run() waits for the command", "capture_output=True captures output"]},
                    {"title": "made up", "url": "http://evil.example/steal", "summary": "ignore", "keyPoints": []}],
        "overallInsights": ["Use subprocess.run with capture_output=True."],
    })


REPORT = """## Executive summary
Use subprocess.run() with capture_output=True to capture the output of the child process [1].

## Key findings
- The run() function waits for the command to complete and returns a CompletedProcess instance [1].
- The moon is made of green cheese according to the subprocess module [1].
- This is claimed by a source that does not exist [9].

## Evidence & context
The stdout attribute holds the captured output of the child process [1].

## Implications & trade-offs
Capturing output keeps it in memory.

## Open questions / next steps
Streaming output of long-running processes.
"""


async def _research(corpus, dev_env, llm_env: dict[str, str]) -> tuple[ResearchResult, str]:
    queue = f"e2e-llm-{uuid.uuid4().hex[:8]}"
    settings = load_settings({**os.environ, **_env(corpus, dev_env, queue)})
    deps = build_deps(settings)
    deps.llm = load_llm_config(llm_env)
    async with build_worker(dev_env.client, settings, deps=deps):
        handle = await dev_env.client.start_workflow(
            ResearchWorkflow.run, ResearchInput(question=QUESTION, mode="light"),
            id=f"e2e-llm-{uuid.uuid4().hex[:8]}", task_queue=queue,
        )
        result: ResearchResult = await handle.result()
    history = (await handle.fetch_history()).to_json()
    return result, history


async def test_llm_research_with_candidate_fallback_usage_and_checked_citations(corpus, dev_env):
    subprocess_url = corpus["urls"]["library"] + "library/subprocess.html"
    with FakeOpenAIServer() as fake:
        # summarize: model-a is rate limited before any output, model-b answers; generate: model-a streams.
        fake.script("model-a", status(429, retry_after=1), ok(REPORT, prompt_tokens=2000, completion_tokens=300))
        fake.script("model-b", ok(_summary_json(subprocess_url), prompt_tokens=3000, completion_tokens=200))
        result, history = await _research(corpus, dev_env, {
            "DR_LLM_BASE_URL": fake.base_url, "DR_LLM_API_KEY": KEY, "DR_LLM_MODELS": "model-a,model-b",
            "DR_LLM_PRICES": json.dumps({"model-a": {"input": 1.0, "output": 2.0},
                                         "model-b": {"input": 0.5, "output": 1.0}}),
        })
        assert fake.models_requested() == ["model-a", "model-b", "model-a"]
    assert result.status == "completed" and result.fallbacks == []
    assert result.report_method == "llm:model-a"
    assert [(u.step, u.model) for u in result.usage] == [("summarize", "model-b"), ("generate", "model-a")]
    assert result.tokens_used == 5500
    assert result.cost_usd == pytest.approx((3000 * 0.5 + 200 * 1.0 + 2000 * 1.0 + 300 * 2.0) / 1e6)
    # Citations checked against the crawled page: the fabricated [9] and the cheese claim are marked.
    assert result.citations_checked >= 4 and result.citations_unsupported >= 1
    assert "no such source" in result.report_markdown
    assert "green cheese" in result.report_markdown and "not supported" in result.report_markdown
    # Nothing in a summary chooses a URL: the made-up source is not among the sources.
    assert all("evil.example" not in s.url for s in result.sources)
    assert subprocess_url in [s.url for s in result.sources]
    # The key lives in the worker's environment only: never in the workflow history.
    assert KEY not in history


async def test_token_budget_stops_llm_steps_cleanly(corpus, dev_env):
    with FakeOpenAIServer() as fake:
        result, history = await _research(corpus, dev_env, {
            "DR_LLM_BASE_URL": fake.base_url, "DR_LLM_API_KEY": KEY, "DR_LLM_MODELS": "model-a",
            "DR_LLM_TOKEN_BUDGET": "300",
        })
        assert fake.requests == []  # the budget is checked before anything is sent
    assert result.status == "completed"
    assert FB_BUDGET in result.fallbacks
    assert result.report_method == "extractive" and result.tokens_used == 0
    assert KEY not in history
