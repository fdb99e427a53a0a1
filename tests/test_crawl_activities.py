"""The crawl-side activities against a real local sandbox: reading the crawler's state and its
output with the seed's fallbacks (files API, then chunked dd, then cat).

A files API that truncates large files is what remote sandbox services do (the seed's reason for
the chunked read); `TruncatingSandbox` plays that part over the real local sandbox.
"""

from __future__ import annotations

import json

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.crawl import CrawlActivities
from activities.deps import Deps
from deep_research.artifacts import ArtifactStore
from deep_research.config import Settings
from deep_research.models import CollectInput
from deep_research.sandbox.base import ExecResult
from deep_research.sandbox.local import LocalSandbox


class TruncatingSandbox(LocalSandbox):
    def __init__(self, root, *, broken_commands: tuple[str, ...] = ()):
        super().__init__(root)
        self.broken_commands = broken_commands

    async def read_file(self, sandbox_id, path):
        return (await super().read_file(sandbox_id, path))[:1000]

    async def exec(self, sandbox_id, command, **kwargs):
        if any(command.startswith(prefix) for prefix in self.broken_commands):
            return ExecResult(exit_code=1, stderr=f"{command.split()[0]}: broken")
        return await super().exec(sandbox_id, command, **kwargs)


@pytest.fixture
def output():
    pages = [{"url": f"http://127.0.0.3/p{i}.html", "title": f"Page {i}", "text": f"Sentence {i}. " * 3000}
             for i in range(5)]
    return {"pages": pages, "timed_out": True}


async def _collect(tmp_path, sandbox, output) -> tuple:
    sid = await sandbox.create()
    try:
        await sandbox.write_file(sid, "crawl/output.json", json.dumps(output))
        deps = Deps(settings=Settings(), sandbox=sandbox, artifacts=ArtifactStore(tmp_path / "artifacts"),
                    search_provider=lambda name: None)
        out = await ActivityEnvironment().run(
            CrawlActivities(deps).collect_output,
            CollectInput(sandbox_id=sid, output_path="crawl/output.json", max_chars_per_source=5000,
                         workflow_id="wf-1"),
        )
        return out, deps.artifacts
    finally:
        await sandbox.terminate(sid)


async def test_files_api_read(tmp_path, output):
    out, store = await _collect(tmp_path, LocalSandbox(tmp_path / "sb"), output)
    assert out.read_method == "files-api" and out.timed_out
    pages = store.get_json(out.pages_ref)
    assert [p["url"] for p in pages] == [p["url"] for p in output["pages"]]
    assert all(len(p["text"]) == 5000 for p in pages)  # bounded to the mode's chars per source
    assert [m.chars for m in out.pages] == [5000] * 5


async def test_truncated_files_api_falls_back_to_chunked_read(tmp_path, output):
    out, store = await _collect(tmp_path, TruncatingSandbox(tmp_path / "sb"), output)
    assert out.read_method == "chunked"  # the output is ~225 KB: several 64 KB chunks
    assert len(store.get_json(out.pages_ref)) == 5


async def test_broken_chunked_read_falls_back_to_cat(tmp_path, output):
    out, _ = await _collect(tmp_path, TruncatingSandbox(tmp_path / "sb", broken_commands=("wc", "dd")), output)
    assert out.read_method == "cat"


async def test_unreadable_output_is_a_typed_error(tmp_path, output):
    sandbox = TruncatingSandbox(tmp_path / "sb", broken_commands=("wc", "dd", "cat"))
    with pytest.raises(ApplicationError) as info:
        await _collect(tmp_path, sandbox, output)
    assert info.value.type == "OutputUnreadable"


async def test_snapshot_reads_done_alive_and_log_from_offset(tmp_path):
    sandbox = LocalSandbox(tmp_path / "sb")
    sid = await sandbox.create()
    try:
        acts = CrawlActivities(Deps(settings=Settings(), sandbox=sandbox, artifacts=ArtifactStore(tmp_path),
                                    search_provider=lambda name: None))
        log = ('__PROGRESS__{"stage":"crawl","status":"running","current":1,"total":4}\n'
               'noise line\n__PROGRESS__{"stage":"crawl","status":"running","current":2,"total":4}\n__PROG')
        await sandbox.write_file(sid, "crawl/crawl.log", log)
        await sandbox.write_file(sid, "crawl/alive", "1700000000.5\n")  # trailing newline, as written
        snap = await acts._snapshot(sid, 0)
        assert snap.done is None and snap.alive_at == 1700000000.5 and snap.log == log.encode()
        await sandbox.write_file(sid, "crawl/done.json", '{"pages": 2, "timed_out": false}\n')
        offset = log.index("noise")
        snap = await acts._snapshot(sid, offset)
        assert snap.done == {"pages": 2, "timed_out": False}
        assert snap.log == log[offset:].encode()
    finally:
        await sandbox.terminate(sid)
