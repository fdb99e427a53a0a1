"""The whole pipeline once with a web search provider: a fake SearxNG on 127.0.0.1 (the real JSON
wire format) whose results point at pages served on other loopback hosts; real Temporal dev
server, real bubblewrap sandbox and real Chromium, as in test_e2e.py."""

from __future__ import annotations

import os
import shutil
import uuid

import pytest

from deep_research.config import load_settings
from deep_research.corpus import serve_directory
from deep_research.models import ResearchInput, ResearchResult
from tests.fake_search_servers import FakeSearchServer
from worker import build_worker
from workflows.research import ResearchWorkflow

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not installed"),
]

QUESTION = "How does the Quillmark cache expire stale entries?"

PAGES = {
    "127.0.0.2": {
        "quillmark/expiry.html": (
            "Quillmark cache expiry",
            [
                "The Quillmark cache expires stale entries with a time-to-live stored next to every entry.",
                "When an entry is read after its time-to-live has passed, Quillmark treats it as stale "
                "and fetches a fresh copy from the origin before answering.",
                "A background sweeper thread removes expired entries every thirty seconds so that stale "
                "data never accumulates in memory.",
            ],
        ),
        "quillmark/config.html": (
            "Configuring the Quillmark cache",
            [
                "The default time-to-live of a Quillmark cache entry is five minutes.",
                "Set the ttl option to change how long entries stay fresh before the cache expires them.",
            ],
        ),
    },
    "127.0.0.3": {
        "blog/quillmark-internals.html": (
            "Quillmark internals: eviction and expiry",
            [
                "Quillmark separates eviction from expiry: eviction makes room when the cache is full, "
                "while expiry removes stale entries whose time-to-live has passed.",
                "Eviction uses a least-recently-used list; expiry relies on the timestamps of entries.",
            ],
        ),
    },
}


def _html(title: str, paragraphs: list[str]) -> str:
    body = "\n".join(f"<p>{p}</p>" for p in paragraphs)
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title></head>"
            f"<body><main><h1>{title}</h1>{body}</main></body></html>")


@pytest.fixture(scope="module")
def web(tmp_path_factory):
    servers, results = [], []
    for host, pages in PAGES.items():
        root = tmp_path_factory.mktemp(f"site-{host}")
        for rel, (title, paragraphs) in pages.items():
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(_html(title, paragraphs), encoding="utf-8")
        server, base = serve_directory(root, host, 0)
        servers.append(server)
        for rel, (title, paragraphs) in pages.items():
            # As a search engine would list them: tracking parameters and all.
            results.append({"url": f"{base}{rel}?utm_source=searxng", "title": title, "snippet": paragraphs[0]})
    search = FakeSearchServer("127.0.0.1").start()
    search.results["searxng"] = results
    yield search
    search.stop()
    for server in servers:
        server.shutdown()
        server.server_close()


async def test_research_with_searxng_cites_a_crawled_loopback_page(web, dev_env, tmp_path, monkeypatch):
    queue = f"e2e-web-{uuid.uuid4().hex[:8]}"
    env = {
        "DR_DATA_DIR": str(tmp_path / "data"),
        "DR_TASK_QUEUE": queue,
        "TEMPORAL_ADDRESS": dev_env.client.service_client.config.target_host,
        "DR_SEARCH_PROVIDER": "searxng",
        "SEARXNG_URL": web.base_url("searxng"),
    }
    for key, value in env.items():  # provider settings are read from the worker's environment
        monkeypatch.setenv(key, value)
    settings = load_settings({**os.environ, **env})
    async with build_worker(dev_env.client, settings):
        handle = await dev_env.client.start_workflow(
            ResearchWorkflow.run, ResearchInput(question=QUESTION, mode="light"),
            id=f"e2e-web-{uuid.uuid4().hex[:8]}", task_queue=queue,
        )
        result: ResearchResult = await handle.result()

    searches = [r for r in web.requests if r["provider"] == "searxng"]
    assert searches and searches[0]["params"] == {"q": QUESTION, "format": "json", "pageno": "1"}
    assert len(searches) == 2  # the question and one related query (light mode), from suggestions
    assert searches[1]["params"]["q"] == f"{QUESTION} tutorial"

    assert result.status == "completed", result.fallbacks
    assert result.fallbacks == []
    assert result.pages_crawled >= 3
    crawled = [s.url for s in result.sources if s.origin == "crawl"]
    assert any("127.0.0.2" in u and "quillmark/expiry.html" in u for u in crawled), result.sources
    assert any("127.0.0.3" in u for u in crawled), result.sources
    assert "time-to-live" in result.report_markdown
    assert result.sandbox_terminated
