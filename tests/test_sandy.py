"""The Sandy provider against our sandbox server, over real HTTP on loopback.

The server runs in this process (threads) over a temporary root; every test ends by asking the
server for its sandboxes and asserting that none is left running.
"""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest
from temporalio.testing import ActivityEnvironment

from activities.crawl import CrawlActivities
from activities.deps import Deps, to_application_error
from deep_research.artifacts import ArtifactStore
from deep_research.config import Settings, load_settings
from deep_research.models import CollectInput
from deep_research.sandbox.base import SandboxNotFound, SandboxUnavailable
from deep_research.sandbox.sandy import SandboxRejected, SandySandbox, _error
from deep_research.sandbox.server import SandyServer

TOKEN = "test-token-0123456789"


class ServerHandle:
    def __init__(self, server: SandyServer) -> None:
        self.server = server
        self.url = server.url

    def admin(self, method: str, path: str, body: dict | None = None) -> dict:
        response = httpx.request(method, self.url + path, json=body,
                                 headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
        response.raise_for_status()
        return response.json()

    def faults(self, **faults) -> dict:
        return self.admin("POST", "/admin/faults", faults)

    def counters(self) -> dict:
        return self.admin("GET", "/admin/faults")["counters"]

    def sandboxes(self) -> list[dict]:
        return self.admin("GET", "/admin/sandboxes")["sandboxes"]

    def running(self) -> list[str]:
        return [s["sandboxId"] for s in self.sandboxes() if s["state"] == "running"]


@pytest.fixture
def server(tmp_path):
    srv = SandyServer(tmp_path / "sandy", TOKEN, reap_interval_s=0.2)
    srv.start()
    handle = ServerHandle(srv)
    try:
        yield handle
        assert handle.running() == [], "sandboxes left running on the server"
    finally:
        for sandbox_id in handle.running():  # do not leak processes into other tests
            handle.admin("POST", f"/admin/sandboxes/{sandbox_id}/kill")
        srv.stop()


@pytest.fixture
def sandy(server):
    return SandySandbox(server.url, TOKEN)


async def test_full_api_round_trip(server, sandy):
    sid = await sandy.create(ttl_s=120, labels={"workflow_id": "wf-1"})
    listed = next(s for s in server.sandboxes() if s["sandboxId"] == sid)
    # The seed's sandbox configuration travels with the create request, with an expiry.
    assert listed["request"]["priority"] == 1 and listed["request"]["preemptable"] is False
    assert listed["request"]["flavor"] == "agent-ready" and listed["labels"] == {"workflow_id": "wf-1"}

    status = await sandy.status(sid)
    assert status.state == "running" and status.processes == 0
    assert status.expires_at == pytest.approx(time.time() + 120, abs=5)

    fg = await sandy.exec(sid, "echo out; echo err >&2; pwd; exit 3")
    assert (fg.exit_code, fg.stdout.split("\n")[0], fg.stderr.strip()) == (3, "out", "err")
    assert fg.stdout.split("\n")[1] == status.workspace
    timed = await sandy.exec(sid, "sleep 5", timeout_s=0.3)
    assert timed.timed_out
    env = await sandy.exec(sid, 'echo "$GREETING"', env={"GREETING": "hello"})
    assert env.stdout.strip() == "hello"

    bg = await sandy.exec(sid, "sleep 30", background=True)
    assert bg.exit_code == 0 and bg.pid
    assert (await sandy.status(sid)).processes == 1

    payload = bytes(range(256)) * 100
    await sandy.write_file(sid, "dir/data.bin", payload)
    await sandy.write_file(sid, "note.txt", "héllo")
    assert await sandy.read_file(sid, "dir/data.bin") == payload
    assert await sandy.read_file(sid, "note.txt") == "héllo".encode()
    files = {f.path: f for f in await sandy.list_files(sid)}
    assert files["dir"].is_dir and files["dir/data.bin"].size == len(payload)
    assert [f.path for f in await sandy.list_files(sid, "dir")] == ["data.bin"]

    assert await sandy.terminate(sid) is True
    assert await sandy.terminate(sid) is False  # idempotent
    assert (await sandy.status(sid)).state == "terminated"
    with pytest.raises(SandboxNotFound):
        await sandy.exec(sid, "true")
    await sandy.aclose()


async def test_wrong_token_is_rejected_and_not_retryable(server):
    bad = SandySandbox(server.url, "wrong-key-987")
    with pytest.raises(SandboxRejected) as info:
        await bad.create(ttl_s=60)
    assert "401" in str(info.value) and "wrong-key-987" not in str(info.value)
    assert to_application_error(info.value).non_retryable
    assert "wrong-key-987" not in repr(bad)


def test_error_mapping_follows_the_seed():
    assert isinstance(_error("GET x", 429, '{"error": "slow down"}'), SandboxUnavailable)
    assert isinstance(_error("GET x", 502, "bad gateway"), SandboxUnavailable)
    assert isinstance(_error("GET x", 503, ""), SandboxUnavailable)
    assert isinstance(_error("GET x", 400, '{"error": "Upstream error: try later"}'), SandboxUnavailable)
    assert isinstance(_error("GET x", 404, '{"error": "no such sandbox"}'), SandboxNotFound)
    rejected = _error("GET x", 400, '{"error": "bad path"}')
    assert isinstance(rejected, SandboxRejected) and not rejected.retryable
    assert "bad path" in str(rejected)
    # As Temporal sees them: type = class name, non_retryable = not retryable.
    assert not to_application_error(_error("GET x", 502, "")).non_retryable
    app = to_application_error(_error("GET x", 404, ""))
    assert app.type == "SandboxNotFound" and app.non_retryable


async def test_errors_from_the_server(server, sandy):
    with pytest.raises(SandboxNotFound):
        await sandy.status("lsb-doesnotexist")
    server.faults(create_429=1)
    with pytest.raises(SandboxUnavailable, match="429"):
        await sandy.create(ttl_s=60)
    sid = await sandy.create(ttl_s=60)  # the next attempt goes through
    try:
        server.faults(warmup_502=2)
        with pytest.raises(SandboxUnavailable, match="Upstream error"):
            await sandy.status(sid)
        with pytest.raises(SandboxUnavailable, match="502"):
            await sandy.exec(sid, "true")
        assert (await sandy.exec(sid, "true")).exit_code == 0
        assert server.counters()["warmup_502"] == 2 and server.counters()["create_429"] == 1
        with pytest.raises(SandboxRejected, match="outside the workspace"):  # 400: not retryable
            await sandy.read_file(sid, "../../etc/passwd")
        server.faults(slow_ms=500)
        impatient = SandySandbox(server.url, TOKEN, timeout_s=0.1)
        with pytest.raises(SandboxUnavailable, match="timed out"):
            await impatient.status(sid)
        server.faults(slow_ms=0)
    finally:
        await sandy.terminate(sid)
    unreachable = SandySandbox("http://127.0.0.1:9", TOKEN)  # connection refused: retryable
    with pytest.raises(SandboxUnavailable):
        await unreachable.status(sid)


async def test_every_sandbox_gets_an_expiry_and_the_reaper_enforces_it(server, sandy):
    sid = await sandy.create(ttl_s=1)
    default = await sandy.create()  # no ttl asked: the server's default applies
    try:
        await sandy.exec(sid, "sleep 60", background=True)
        assert (await sandy.status(default)).expires_at is not None
        for _ in range(50):
            if (await sandy.status(sid)).state == "terminated":
                break
            await asyncio.sleep(0.1)
        assert (await sandy.status(sid)).state == "terminated"
        assert server.counters()["reaped"] >= 1
    finally:
        await sandy.terminate(default)


async def test_extend_moves_the_expiry(server, sandy):
    sid = await sandy.create(ttl_s=1)
    try:
        await sandy.extend(sid, 600)
        assert (await sandy.status(sid)).expires_at == pytest.approx(time.time() + 600, abs=5)
        await sandy.extend(sid, 10)  # never shortens (idempotent under retries)
        assert (await sandy.status(sid)).expires_at == pytest.approx(time.time() + 600, abs=5)
        await asyncio.sleep(1.5)
        assert (await sandy.status(sid)).state == "running"  # the reaper left it alone
    finally:
        await sandy.terminate(sid)
    with pytest.raises(SandboxNotFound):
        await sandy.extend(sid, 60)


async def test_sandbox_killed_by_fault(server, sandy):
    sid = await sandy.create(ttl_s=60)
    server.faults(kill_sandbox_after_s=0.3)
    await sandy.exec(sid, "sleep 60", background=True)
    await asyncio.sleep(1.0)
    assert (await sandy.status(sid)).state == "terminated"
    with pytest.raises(SandboxNotFound):
        await sandy.exec(sid, "true")
    assert server.counters()["killed"] == 1


async def test_restarted_server_over_the_same_root_finds_its_sandboxes(tmp_path):
    root = tmp_path / "shared-root"
    first = SandyServer(root, TOKEN)
    first.start()
    sid = await SandySandbox(first.url, TOKEN).create(ttl_s=60)
    await SandySandbox(first.url, TOKEN).exec(sid, "sleep 60", background=True)
    first.stop()
    second = SandyServer(root, TOKEN)
    second.start()
    try:
        client = SandySandbox(second.url, TOKEN)
        status = await client.status(sid)
        assert status.state == "running" and status.processes == 1
        assert await client.terminate(sid)
        assert (await client.status(sid)).processes == 0
    finally:
        second.stop()


@pytest.fixture
def output():
    pages = [{"url": f"http://127.0.0.3/p{i}.html", "title": f"Page {i}", "text": f"Sentence {i}. " * 3000}
             for i in range(5)]
    return {"pages": pages, "timed_out": False}


@pytest.mark.parametrize(("faults", "method"), [
    ({}, "files-api"),
    ({"truncate_reads": 1000}, "chunked"),
    ({"truncate_reads": 1000, "fail_chunked_reads": True}, "cat"),
])
async def test_collect_output_over_http_recovers_truncated_reads(server, sandy, tmp_path, output, faults, method):
    sid = await sandy.create(ttl_s=60)
    try:
        await sandy.write_file(sid, "crawl/output.json", json.dumps(output))
        server.faults(**faults)
        deps = Deps(settings=Settings(), sandbox=sandy, artifacts=ArtifactStore(tmp_path / "artifacts"),
                    search_provider=lambda name: None)
        out = await ActivityEnvironment().run(
            CrawlActivities(deps).collect_output,
            CollectInput(sandbox_id=sid, output_path="crawl/output.json", max_chars_per_source=5000,
                         workflow_id="wf-1"),
        )
        assert out.read_method == method
        assert len(deps.artifacts.get_json(out.pages_ref)) == 5
        if faults:
            assert server.counters()["truncate_reads"] >= 1
    finally:
        await sandy.terminate(sid)


def test_provider_is_chosen_by_configuration(monkeypatch):
    from worker import ConfigurationError, make_sandbox

    assert make_sandbox(load_settings({})).name == "local"  # the default
    with pytest.raises(ConfigurationError, match="SANDY_BASE_URL"):
        make_sandbox(load_settings({"DR_SANDBOX_PROVIDER": "sandy", "SANDY_API_KEY": "k"}))
    with pytest.raises(ConfigurationError, match="SANDY_API_KEY"):
        make_sandbox(load_settings({"DR_SANDBOX_PROVIDER": "sandy", "SANDY_BASE_URL": "http://x"}))
    settings = load_settings({"DR_SANDBOX_PROVIDER": "sandy", "SANDY_BASE_URL": "http://x:1/",
                              "SANDY_API_KEY": "secret-key-42"})
    sandbox = make_sandbox(settings)
    assert sandbox.name == "sandy" and sandbox.base_url == "http://x:1"
    assert "secret-key-42" not in repr(settings) and "secret-key-42" not in repr(sandbox)
