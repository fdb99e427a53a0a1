"""End to end over HTTP: the worker uses the Sandy provider against our sandbox server (real
Temporal dev server, real bubblewrap sandboxes behind the server, real Chromium), with the server's
fault injection for each failure of the seed. Every test ends with no sandbox running on the server.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import uuid
from pathlib import Path

import httpx
import pytest
from temporalio.api.enums.v1 import EventType

from deep_research.config import load_settings
from deep_research.models import ResearchInput, ResearchResult
from deep_research.sandbox.local import LocalSandbox
from deep_research.sandbox.server import SandyServer
from tests.test_e2e import corpus, pytestmark, research_killing_the_worker_mid_crawl  # noqa: F401 - fixture and marks reused
from worker import build_worker
from workflows.research import FB_CRAWL_FAILED, FB_WARMUP, ResearchWorkflow

TOKEN = "e2e-sandy-token"
QUESTION = "How do I run a subprocess and capture its output?"


class Server:
    def __init__(self, root: Path, port: int = 0) -> None:
        self.root = root
        self.srv = SandyServer(root, TOKEN, port=port, reap_interval_s=1.0)
        self.srv.start()
        self.url = self.srv.url

    def admin(self, method: str, path: str, body: dict | None = None) -> dict:
        response = httpx.request(method, self.url + path, json=body,
                                 headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
        response.raise_for_status()
        return response.json()

    def faults(self, **faults) -> None:
        self.admin("POST", "/admin/faults", faults)

    def counters(self) -> dict:
        return self.admin("GET", "/admin/faults")["counters"]

    def sandboxes(self) -> list[dict]:
        return self.admin("GET", "/admin/sandboxes")["sandboxes"]

    def assert_none_running(self) -> None:
        boxes = self.sandboxes()
        assert boxes, "no sandbox was ever created"
        assert all(b["state"] == "terminated" and not b["workspaceExists"] for b in boxes), boxes


@pytest.fixture
def server(tmp_path):
    handle = Server(tmp_path / "sandy")
    yield handle
    try:
        running = [b["sandboxId"] for b in handle.sandboxes() if b["state"] == "running"]
        for sandbox_id in running:
            handle.admin("POST", f"/admin/sandboxes/{sandbox_id}/kill")
    finally:
        handle.srv.stop()


def _env(corpus, dev_env, server: Server, queue: str) -> dict[str, str]:
    return {
        "DR_DATA_DIR": str(corpus["data"]),
        "DR_SEARCH_INDEX": str(corpus["index"]),
        "DR_TASK_QUEUE": queue,
        "TEMPORAL_ADDRESS": dev_env.client.service_client.config.target_host,
        "DR_SANDBOX_PROVIDER": "sandy",
        "SANDY_BASE_URL": server.url,
        "SANDY_API_KEY": TOKEN,
    }


async def _run(corpus, dev_env, server: Server, question: str = QUESTION, *, during=None, timeout_s: float = 240):
    """One research over the server; `timeout_s` guards against a hang (the research must end)."""
    queue = f"e2e-sandy-{uuid.uuid4().hex[:8]}"
    settings = load_settings({**os.environ, **_env(corpus, dev_env, server, queue)})
    assert settings.sandbox_provider == "sandy"
    async with build_worker(dev_env.client, settings):
        handle = await dev_env.client.start_workflow(
            ResearchWorkflow.run, ResearchInput(question=question, mode="light"),
            id=f"e2e-sandy-{uuid.uuid4().hex[:8]}", task_queue=queue,
        )
        if during is not None:
            await during(handle)
        result: ResearchResult = await asyncio.wait_for(handle.result(), timeout_s)
        progress = await handle.query(ResearchWorkflow.progress)
    return handle, result, progress


async def _activity_events(handle) -> list:
    events = []
    async for event in handle.fetch_history_events():
        events.append(event)
    return events


def _scheduled(events, name: str) -> int:
    return sum(1 for e in events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
               and e.activity_task_scheduled_event_attributes.activity_type.name == name)


def _completed_results(events) -> list[dict]:
    out = []
    for e in events:
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            payloads = e.activity_task_completed_event_attributes.result.payloads
            body = json.loads(payloads[0].data) if payloads and payloads[0].data else None
            if isinstance(body, dict):
                out.append(body)
    return out


def _assert_cites_subprocess(result: ResearchResult) -> None:
    assert result.status == "completed", result.fallbacks
    assert result.fallbacks == []
    assert result.pages_crawled >= 3
    cited = [s.url for s in result.sources]
    assert any(u.endswith("/library/subprocess.html") for u in cited), cited
    assert result.sandbox_terminated


async def test_whole_pipeline_over_http(corpus, dev_env, server):
    handle, result, _ = await _run(corpus, dev_env, server)
    _assert_cites_subprocess(result)
    box = next(b for b in server.sandboxes() if b["sandboxId"] == result.sandbox_id)
    assert box["request"]["flavor"] == "agent-ready" and box["request"]["priority"] == 1
    assert box["request"]["ttlSeconds"] > 0 and box["labels"]["workflow_id"] == handle.id
    reads = [r for r in _completed_results(await _activity_events(handle)) if "read_method" in r]
    assert [r["read_method"] for r in reads] == ["files-api"]
    server.assert_none_running()


async def test_502_during_warmup_then_success(corpus, dev_env, server):
    server.faults(warmup_502=2)
    handle, result, _ = await _run(corpus, dev_env, server)
    _assert_cites_subprocess(result)
    assert server.counters()["warmup_502"] == 2
    assert _scheduled(await _activity_events(handle), "warmup_sandbox") == 3  # 2 failed, 1 passed
    server.assert_none_running()


async def test_warmup_failing_five_times_falls_back_to_snippets(corpus, dev_env, server):
    server.faults(warmup_502=100)
    handle, result, _ = await _run(corpus, dev_env, server)
    assert result.fallbacks == [FB_WARMUP]
    assert result.sources and result.report_markdown  # a report from the search snippets
    assert result.pages_crawled == 0 and result.sandbox_terminated
    assert server.counters()["warmup_502"] == 5
    events = await _activity_events(handle)
    assert _scheduled(events, "warmup_sandbox") == 5 and _scheduled(events, "install_runtime") == 0
    server.assert_none_running()


async def test_429_on_create_is_retried(corpus, dev_env, server):
    server.faults(create_429=2)
    handle, result, _ = await _run(corpus, dev_env, server)
    _assert_cites_subprocess(result)
    assert server.counters()["create_429"] == 2
    events = await _activity_events(handle)
    started = [e.activity_task_started_event_attributes.attempt for e in events
               if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
               and e.activity_task_started_event_attributes.last_failure.message]
    assert _scheduled(events, "create_sandbox") == 1  # one activity, retried by Temporal's policy
    assert 3 in started, started  # third attempt succeeded (the client itself never retries)
    server.assert_none_running()


async def test_truncated_file_read_recovered_by_chunked_read(corpus, dev_env, server):
    server.faults(truncate_reads=2000)
    handle, result, _ = await _run(corpus, dev_env, server)
    _assert_cites_subprocess(result)
    assert server.counters()["truncate_reads"] >= 1
    reads = [r for r in _completed_results(await _activity_events(handle)) if "read_method" in r]
    assert [r["read_method"] for r in reads] == ["chunked"]
    server.assert_none_running()


async def test_sandbox_dying_mid_crawl_gives_a_report_with_a_clear_reason(corpus, dev_env, server):
    server.faults(kill_sandbox_after_s=3)
    handle, result, progress = await _run(corpus, dev_env, server, timeout_s=90)  # no hang
    assert server.counters()["killed"] == 1
    assert result.fallbacks == [FB_CRAWL_FAILED]
    crawl = next(s for s in progress.steps if s.id == "crawl")
    assert crawl.state == "error" and "SandboxNotFound" in crawl.message, crawl
    assert result.sources and result.report_markdown
    assert _scheduled(await _activity_events(handle), "crawl_pages") == 1
    server.assert_none_running()


async def test_server_restarted_without_the_sandbox(corpus, dev_env, server, tmp_path):
    """The sandbox host restarts with a fresh root: the sandbox is gone, the workflow ends quickly."""
    port = int(server.url.rsplit(":", 1)[1])
    old_root = server.root

    async def restart_mid_crawl(handle):
        for _ in range(600):
            if (await handle.query(ResearchWorkflow.progress)).crawl_current >= 1:
                break
            await asyncio.sleep(0.2)
        server.srv.stop()
        await asyncio.sleep(2)  # a gap: the poll in flight fails as unavailable (retryable)
        fresh = Server(tmp_path / "fresh-root", port=port)
        server.srv, server.root = fresh.srv, fresh.root

    try:
        handle, result, progress = await _run(corpus, dev_env, server, during=restart_mid_crawl, timeout_s=120)
    finally:
        # The old host's crawler outlived its server: terminate it over the old root.
        leftovers = LocalSandbox(old_root)
        for state in old_root.glob("*/state.json"):
            await leftovers.terminate(state.parent.name)
    assert result.fallbacks == [FB_CRAWL_FAILED]
    crawl = next(s for s in progress.steps if s.id == "crawl")
    assert "SandboxNotFound" in crawl.message, crawl
    assert result.sources and result.report_markdown
    assert server.sandboxes() == []  # the fresh host never had it; terminate found it gone


async def test_worker_killed_mid_crawl_reattaches_through_the_server(corpus, dev_env, server, tmp_path):
    queue = f"e2e-sandy-kill-{uuid.uuid4().hex[:8]}"
    env = _env(corpus, dev_env, server, queue)
    log = tmp_path / "worker.log"
    handle, result = await research_killing_the_worker_mid_crawl(dev_env, queue, env, log)
    assert result.status == "completed", result.fallbacks
    assert result.pages_crawled > 3
    crawls = [r for r in _completed_results(await _activity_events(handle)) if "attached" in r]
    assert len(crawls) == 1 and crawls[0]["attached"] is True, crawls
    text = log.read_text()
    assert text.count("crawler started") == 1 and "re-attaching to the running crawler" in text
    assert TOKEN not in text  # the key never reaches a log
    server.assert_none_running()
    alive = subprocess.run(["pgrep", "-f", f"{result.sandbox_id}"], capture_output=True, text=True)
    assert alive.stdout.strip() == "", alive.stdout
