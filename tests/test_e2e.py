"""End to end on the real Temporal dev server, real bubblewrap sandbox and real Chromium, over the
Python documentation served on several loopback hosts.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType

from deep_research.config import PROJECT_DIR, load_settings
from deep_research.corpus import PYTHON_DOCS, serve_directory
from deep_research.models import ResearchInput, ResearchResult
from deep_research.search.local_index import build_index
from worker import build_worker
from tests.test_workflow import record_history
from workflows.research import ResearchWorkflow

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not PYTHON_DOCS.is_dir(), reason="python3.11-doc is not installed"),
    pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not installed"),
]

HOSTS = {"": "127.0.0.2", "library": "127.0.0.3", "reference": "127.0.0.4", "howto": "127.0.0.5"}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """The docs on four loopback hosts (ephemeral ports) and a search index over them."""
    servers, urls = [], {}
    for section, host in HOSTS.items():
        server, urls[section] = serve_directory(PYTHON_DOCS, host, 0)
        servers.append(server)
    data = tmp_path_factory.mktemp("e2e-data")
    index = data / "index.sqlite"
    build_index(index, folder=PYTHON_DOCS, base_url=urls[""], section_urls={k: v for k, v in urls.items() if k})
    yield {"data": data, "index": index, "urls": urls}
    for server in servers:
        server.shutdown()
        server.server_close()


def _env(corpus, dev_env, queue: str) -> dict[str, str]:
    return {
        "DR_DATA_DIR": str(corpus["data"]),
        "DR_SEARCH_INDEX": str(corpus["index"]),
        "DR_TASK_QUEUE": queue,
        "TEMPORAL_ADDRESS": dev_env.client.service_client.config.target_host,
    }


def _sandbox_states(data: Path) -> list[dict]:
    states = []
    for state_file in (data / "sandboxes").glob("*/state.json"):
        state = json.loads(state_file.read_text())
        state["workspace_exists"] = (state_file.parent / "workspace").exists()
        states.append(state)
    return states


async def test_light_research_cites_the_expected_page(corpus, dev_env):
    queue = f"e2e-{uuid.uuid4().hex[:8]}"
    settings = load_settings({**os.environ, **_env(corpus, dev_env, queue)})
    async with build_worker(dev_env.client, settings):
        handle = await dev_env.client.start_workflow(
            ResearchWorkflow.run,
            ResearchInput(question="How do I run a subprocess and capture its output?", mode="light"),
            id=f"e2e-{uuid.uuid4().hex[:8]}", task_queue=queue,
        )
        result: ResearchResult = await handle.result()
    await record_history(handle, "e2e-light-research")
    assert result.status == "completed", result.fallbacks
    assert result.fallbacks == []
    assert result.pages_crawled >= 3
    cited = [s.url for s in result.sources]
    assert any(u.endswith("/library/subprocess.html") for u in cited), cited
    assert "capture_output" in result.report_markdown or "captured" in result.report_markdown
    assert result.sandbox_terminated
    states = _sandbox_states(corpus["data"])
    sandbox = next(s for s in states if s["id"] == result.sandbox_id)
    assert sandbox["state"] == "terminated" and not sandbox["workspace_exists"]


def _start_worker(env: dict[str, str], log: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(PROJECT_DIR / "worker.py")], cwd=PROJECT_DIR,
                            env={**os.environ, **env}, stdout=log.open("ab"), stderr=subprocess.STDOUT)


async def research_killing_the_worker_mid_crawl(dev_env, queue: str, env: dict[str, str], log: Path):
    """A max research on a worker process that is SIGKILLed once the crawl has fetched a few pages;
    a new worker then finishes it. Returns the handle and the result."""
    first, second = _start_worker(env, log), None
    try:
        handle = await dev_env.client.start_workflow(
            ResearchWorkflow.run,
            ResearchInput(question="How does asyncio run coroutines concurrently with tasks?",
                          mode="max", optimization="quality"),
            id=f"{queue}-wf", task_queue=queue,
        )
        for _ in range(600):  # wait until the crawl has fetched a few pages
            progress = await handle.query(ResearchWorkflow.progress)
            if progress.crawl_current >= 3:
                break
            await asyncio.sleep(0.2)
        else:
            pytest.fail(f"crawl never progressed: {progress}")
        first.send_signal(signal.SIGKILL)
        first.wait()
        second = _start_worker(env, log)
        return handle, await asyncio.wait_for(handle.result(), 300)
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                proc.wait(20)


async def test_worker_killed_mid_crawl_reattaches_and_cleans_up(corpus, dev_env, tmp_path):
    queue = f"e2e-kill-{uuid.uuid4().hex[:8]}"
    log = tmp_path / "worker.log"
    handle, result = await research_killing_the_worker_mid_crawl(dev_env, queue, _env(corpus, dev_env, queue), log)
    await record_history(handle, "e2e-worker-killed")

    assert result.status == "completed", result.fallbacks
    assert result.pages_crawled > 3
    # The crawl activity ran twice, and the second attempt re-attached instead of starting over.
    crawl_results = []
    async for event in handle.fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            payloads = event.activity_task_completed_event_attributes.result.payloads
            body = json.loads(payloads[0].data) if payloads and payloads[0].data else None
            if isinstance(body, dict) and "attached" in body:
                crawl_results.append(body)
    assert len(crawl_results) == 1 and crawl_results[0]["attached"] is True, crawl_results
    assert "crawler started" in log.read_text() and log.read_text().count("crawler started") == 1
    assert "re-attaching to the running crawler" in log.read_text()
    # Sandbox terminated, no process of it left.
    sandbox = next(s for s in _sandbox_states(corpus["data"]) if s["id"] == result.sandbox_id)
    assert sandbox["state"] == "terminated" and not sandbox["workspace_exists"]
    alive = subprocess.run(["pgrep", "-f", f"sandboxes/{result.sandbox_id}"], capture_output=True, text=True)
    assert alive.stdout.strip() == "", alive.stdout
