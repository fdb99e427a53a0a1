"""The crawl step: run the crawler in the sandbox, follow its log, re-attach after a worker crash.

The crawler (deep_research/crawler/crawler.py) runs as a background process in the sandbox and
writes: crawl.log (with `__PROGRESS__` lines), output.json (after every page), alive (unix time,
every 2 s) and done.json at the end. This activity polls the log from an offset with one exec per
poll (`tail -c +offset`), heartbeats the offset, and signals progress to the workflow. A retried
attempt reads the offset from the last heartbeat and, if the crawler is still alive, re-attaches
instead of starting the crawl over.
"""

from __future__ import annotations

import asyncio
import base64
import json
import shlex
import time

from pydantic import BaseModel
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.deps import Deps, sandbox_errors
from activities.setup import CRAWLER_PATH
from deep_research import policies as P
from deep_research.logging import activity_logger
from deep_research.sandbox.base import SandboxUnavailable
from deep_research.models import (
    CRAWL_DIR,
    CRAWL_OUTPUT,
    CollectInput,
    CollectOutput,
    CrawlInput,
    CrawlOutput,
    CrawlProgressSignal,
    PageMeta,
)

LOG = f"{CRAWL_DIR}/crawl.log"
INPUT = f"{CRAWL_DIR}/input.json"
DONE = f"{CRAWL_DIR}/done.json"
ALIVE = f"{CRAWL_DIR}/alive"
PROGRESS_PREFIX = "__PROGRESS__"
MAX_LOG_CHUNK = 256 * 1024
CRAWL_CONCURRENCY = 3  # pages at once in one browser: enough to hide latency on 2 cores
CHUNK_BYTES = 64 * 1024  # chunked read of the output through exec + dd
SIGNAL_EVERY_S = 1.0


class CrawlHeartbeat(BaseModel):
    offset: int = 0
    current: int = 0
    total: int = 0


class _Snapshot(BaseModel):
    done: dict | None
    alive_at: float | None
    now: float  # the sandbox's clock: the alive mark is compared on the clock that wrote it
    log: bytes

    @property
    def alive(self) -> bool:
        return self.alive_at is not None and self.now - self.alive_at < P.CRAWLER_STALE_AFTER_S


def parse_progress(chunk: bytes) -> tuple[list[dict], int]:
    """Progress events of the complete lines in `chunk`, and how many bytes those lines span."""
    end = chunk.rfind(b"\n") + 1
    events = []
    for raw in chunk[:end].splitlines():
        line = raw.decode("utf-8", "replace")
        if line.startswith(PROGRESS_PREFIX):
            try:
                events.append(json.loads(line[len(PROGRESS_PREFIX):]))
            except json.JSONDecodeError:
                continue
    return events, end


class CrawlActivities:
    def __init__(self, deps: Deps) -> None:
        self.deps = deps

    async def _snapshot(self, sandbox_id: str, offset: int) -> _Snapshot:
        """done marker, alive time and the log from `offset`, in one exec (the seed's tail -c +N)."""
        script = (
            f"printf '%s' \"$(cat {DONE} 2>/dev/null)\" | base64 -w0; echo; "
            f"printf '%s\\n' \"$(cat {ALIVE} 2>/dev/null)\"; date +%s.%N; "
            f"tail -c +{offset + 1} {LOG} 2>/dev/null | head -c {MAX_LOG_CHUNK} | base64 -w0"
        )
        result = await self.deps.sandbox.exec(sandbox_id, script, timeout_s=30)
        done_b64, alive, now, log_b64 = (result.stdout.split("\n") + ["", "", "", ""])[:4]
        done_text = base64.b64decode(done_b64 or b"").decode("utf-8", "replace").strip()
        try:
            done = json.loads(done_text) if done_text else None
        except json.JSONDecodeError:
            done = None  # being written right now; seen complete on the next poll
        try:
            alive_at = float(alive.strip()) if alive.strip() else None
        except ValueError:
            alive_at = None
        try:
            sandbox_now = float(now.strip())
        except ValueError:
            sandbox_now = time.time()
        return _Snapshot(done=done, alive_at=alive_at, now=sandbox_now, log=base64.b64decode(log_b64 or b""))

    async def _start(self, inp: CrawlInput) -> None:
        limits = inp.limits
        crawler_input = {
            "seeds": [{"url": h.url, "title": h.title, "snippet": h.snippet} for h in inp.seeds],
            "max_pages": limits.max_pages,
            "max_depth": limits.max_depth,
            "max_links_per_page": limits.max_links_per_page,
            "max_pages_per_host": limits.max_pages_per_host,
            "max_duration_s": limits.max_duration_s,
            "max_chars": limits.max_chars_per_source,
            "concurrency": CRAWL_CONCURRENCY,
            "executable": inp.executable,
            "output": "output.json",
            "done_marker": "done.json",
            "alive_file": "alive",
            "block_resources": True,
        }
        await self.deps.sandbox.write_file(inp.sandbox_id, INPUT, json.dumps(crawler_input))
        # Clear what a dead earlier crawler left, then start detached (it outlives this worker).
        command = (f"rm -f {DONE} {ALIVE} {CRAWL_OUTPUT} && cd {CRAWL_DIR} && "
                   f"exec {shlex.quote(inp.python)} {CRAWLER_PATH.split('/')[-1]} input.json > crawl.log 2>&1")
        await self.deps.sandbox.exec(inp.sandbox_id, command, background=True)

    @activity.defn(name="crawl_pages")
    async def crawl_pages(self, inp: CrawlInput) -> CrawlOutput:
        log = activity_logger()
        details = activity.info().heartbeat_details
        beat = CrawlHeartbeat.model_validate(details[0]) if details else CrawlHeartbeat()
        with sandbox_errors():
            snap = await self._snapshot(inp.sandbox_id, beat.offset)
            # A crawler that is alive or done was started by an earlier attempt (perhaps one that
            # died before its first heartbeat): follow it instead of starting the crawl over.
            attached = snap.done is not None or snap.alive
            if attached:
                log.info("re-attaching to the running crawler", offset=beat.offset, done=snap.done is not None)
            else:
                if details:
                    log.warning("crawler from an earlier attempt is gone; starting it again")
                beat = CrawlHeartbeat()
                await self._start(inp)
                log.info("crawler started", seeds=len(inp.seeds), max_pages=inp.limits.max_pages)
            started = snap.now
            last_signal = 0.0
            while True:
                snap = await self._snapshot(inp.sandbox_id, beat.offset)
                events, consumed = parse_progress(snap.log)
                beat.offset += consumed
                for event in events:
                    if event.get("stage") == "crawl" and "current" in event:
                        beat.current = max(beat.current, int(event["current"]))
                        beat.total = max(beat.total, int(event.get("total") or 0))
                activity.heartbeat(beat.model_dump())
                now = time.time()
                if events and (now - last_signal >= SIGNAL_EVERY_S or snap.done is not None):
                    last_signal = now
                    url = next((e.get("url", "") for e in reversed(events) if e.get("url")), "")
                    await self._signal(inp.workflow_id, CrawlProgressSignal(
                        current=beat.current, total=beat.total, url=url))
                # Done, and the log read to its end (a last line without a newline is no progress line).
                if snap.done is not None and len(snap.log) < MAX_LOG_CHUNK:
                    break
                last_alive = max(snap.alive_at or 0.0, started)
                if snap.done is None and snap.now - last_alive > P.CRAWLER_STALE_AFTER_S:
                    raise ApplicationError("crawler stopped without finishing (no alive mark for "
                                           f"{P.CRAWLER_STALE_AFTER_S:.0f} s)", type="CrawlerDied")
                await asyncio.sleep(P.CRAWL_POLL_INTERVAL_S)
        pages = int(snap.done.get("pages", beat.current))
        log.info("crawl finished", pages=pages, timed_out=bool(snap.done.get("timed_out")), attached=attached)
        return CrawlOutput(output_path=CRAWL_OUTPUT, pages=pages, timed_out=bool(snap.done.get("timed_out")),
                           finished=True, attached=attached)

    async def _signal(self, workflow_id: str, progress: CrawlProgressSignal) -> None:
        """Live crawl progress for the workflow's `progress` query; best effort."""
        try:
            await activity.client().get_workflow_handle(workflow_id).signal("crawl_progress", progress)
        except Exception as exc:  # progress display must never fail the crawl
            activity_logger().warning("progress signal failed", error=str(exc))

    @activity.defn(name="collect_output")
    async def collect_output(self, inp: CollectInput) -> CollectOutput:
        """Read output.json with the seed's fallbacks: files API, chunked dd via exec, then cat."""
        log = activity_logger()
        data, method = None, None
        with sandbox_errors():
            for method, reader in (("files-api", self._read_files_api), ("chunked", self._read_chunked),
                                   ("cat", self._read_cat)):
                try:
                    data = json.loads(await reader(inp.sandbox_id, inp.output_path))
                    break
                except (json.JSONDecodeError, UnicodeDecodeError, OSError, ValueError, SandboxUnavailable) as exc:
                    log.warning("output read failed", method=method, error=str(exc)[:200])
        if not isinstance(data, dict):
            raise ApplicationError(f"crawler output {inp.output_path} unreadable by every method",
                                   type="OutputUnreadable")
        pages = []
        for page in data.get("pages", []):
            text = (page.get("text") or "").strip()
            if not text:
                continue
            pages.append({"url": page.get("final_url") or page["url"], "title": (page.get("title") or "")[:300],
                          "text": text[: inp.max_chars_per_source]})
        ref = self.deps.artifacts.put_json(f"{inp.workflow_id}/pages.json", pages)
        log.info("crawler output read", method=method, pages=len(pages))
        return CollectOutput(
            pages_ref=ref,
            pages=[PageMeta(url=p["url"], title=p["title"][:200], chars=len(p["text"])) for p in pages],
            read_method=method,
            timed_out=bool(data.get("timed_out")),
        )

    async def _read_files_api(self, sandbox_id: str, path: str) -> str:
        return (await self.deps.sandbox.read_file(sandbox_id, path)).decode("utf-8")

    async def _read_chunked(self, sandbox_id: str, path: str) -> str:
        size = await self.deps.sandbox.exec(sandbox_id, f"wc -c < {shlex.quote(path)}", timeout_s=30)
        if size.exit_code != 0:
            raise OSError(size.stderr.strip() or "wc failed")
        total, parts = int(size.stdout.strip()), []
        for index in range((total + CHUNK_BYTES - 1) // CHUNK_BYTES):
            chunk = await self.deps.sandbox.exec(
                sandbox_id,
                f"dd if={shlex.quote(path)} bs={CHUNK_BYTES} skip={index} count=1 2>/dev/null | base64 -w0",
                timeout_s=30,
            )
            parts.append(base64.b64decode(chunk.stdout.strip()))
            activity.heartbeat(index)
        return b"".join(parts).decode("utf-8")

    async def _read_cat(self, sandbox_id: str, path: str) -> str:
        result = await self.deps.sandbox.exec(sandbox_id, f"cat {shlex.quote(path)}", timeout_s=60)
        if result.exit_code != 0:
            raise OSError(result.stderr.strip() or "cat failed")
        return result.stdout
