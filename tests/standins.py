"""Stand-in activities for workflow behaviour tests: same names and models as the real ones, with
behaviour a test sets (fail N times, fail for good, block until cancelled). They record every call
so tests can assert order, attempts and that terminate ran exactly once.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field

from temporalio import activity
from temporalio.exceptions import ApplicationError

from deep_research.models import (
    CollectInput,
    CollectOutput,
    CrawlInput,
    CrawlOutput,
    CreateSandboxInput,
    CreateSandboxOutput,
    ExtendSandboxInput,
    GenerateInput,
    GenerateOutput,
    InstallOutput,
    PageMeta,
    SandboxInput,
    SearchHit,
    SearchInput,
    SearchOutput,
    Source,
    SummarizeInput,
    SummarizeOutput,
    TerminateOutput,
    VerifyInput,
    VerifyOutput,
)

BLOCK_LIMIT_S = 60.0  # a blocked stand-in gives up after this much real time


@dataclass
class Standins:
    # Per activity name: how many times to fail before succeeding (-1 = always fail).
    failures: dict[str, int] = field(default_factory=dict)
    # Per activity name: error type raised on failure, and whether it is non-retryable.
    error_types: dict[str, tuple[str, bool]] = field(default_factory=dict)
    # Activity name that blocks (heartbeating) until cancelled.
    block: str | None = None
    crawl_timed_out: bool = False
    hits: int = 3
    calls: Counter = field(default_factory=Counter)
    events: list[str] = field(default_factory=list)
    inputs: dict[str, list] = field(default_factory=dict)
    blocked_started: asyncio.Event = field(default_factory=asyncio.Event)
    # >0: the blocked activity never heartbeats (so never hears of a cancel) and returns normally
    # after this many seconds.
    block_deaf_s: float = 0.0

    async def _enter(self, name: str, inp=None, *, blockable: bool = True) -> None:
        self.calls[name] += 1
        self.events.append(name)
        self.inputs.setdefault(name, []).append(inp)
        remaining = self.failures.get(name, 0)
        if remaining != 0:
            if remaining > 0:
                self.failures[name] = remaining - 1
            error_type, non_retryable = self.error_types.get(name, ("StandinFailure", False))
            raise ApplicationError(f"{name} failed (stand-in)", type=error_type, non_retryable=non_retryable)
        if blockable and self.block == name and self.block_deaf_s:
            self.blocked_started.set()
            await asyncio.sleep(self.block_deaf_s)
            self.events.append(f"{name}:returned")
            return
        if blockable and self.block == name:
            self.blocked_started.set()
            try:
                loop = asyncio.get_running_loop()
                end = loop.time() + BLOCK_LIMIT_S
                while loop.time() < end:
                    activity.heartbeat()
                    await asyncio.sleep(0.05)
            except asyncio.CancelledError:
                self.events.append(f"{name}:cancelled")
                raise

    @activity.defn(name="search")
    async def search(self, inp: SearchInput) -> SearchOutput:
        await self._enter("search", inp)
        hits = [SearchHit(url=f"http://127.0.0.2/p{i}.html", title=f"Page {i}", snippet=f"snippet {i}")
                for i in range(self.hits)]
        return SearchOutput(hits=hits, queries=[inp.question], provider="standin")

    @activity.defn(name="create_sandbox")
    async def create_sandbox(self, inp: CreateSandboxInput) -> CreateSandboxOutput:
        await self._enter("create_sandbox", inp)
        return CreateSandboxOutput(sandbox_id="sb-1", provider="standin")

    @activity.defn(name="warmup_sandbox")
    async def warmup_sandbox(self, inp: SandboxInput) -> None:
        await self._enter("warmup_sandbox", inp)

    @activity.defn(name="install_runtime")
    async def install_runtime(self, inp: SandboxInput) -> InstallOutput:
        await self._enter("install_runtime", inp)
        return InstallOutput(python="/usr/bin/python3", method="preinstalled")

    @activity.defn(name="verify_browser")
    async def verify_browser(self, inp: VerifyInput) -> VerifyOutput:
        name = "verify_browser_local" if inp.use_local_install else "verify_browser"
        await self._enter(name, inp)
        return VerifyOutput(executable="" if inp.use_local_install else "/usr/bin/chromium",
                            method="local-install" if inp.use_local_install else "preinstalled")

    @activity.defn(name="install_system_deps")
    async def install_system_deps(self, inp: SandboxInput) -> None:
        await self._enter("install_system_deps", inp)

    @activity.defn(name="install_browser")
    async def install_browser(self, inp: VerifyInput) -> None:
        await self._enter("install_browser", inp)

    @activity.defn(name="crawl_pages")
    async def crawl_pages(self, inp: CrawlInput) -> CrawlOutput:
        await self._enter("crawl_pages", inp)
        return CrawlOutput(output_path="crawl/output.json", pages=2, timed_out=self.crawl_timed_out,
                           finished=True, attached=False)

    @activity.defn(name="collect_output")
    async def collect_output(self, inp: CollectInput) -> CollectOutput:
        await self._enter("collect_output", inp)
        return CollectOutput(pages_ref="artifact:x/pages.json", read_method="files-api", timed_out=False,
                             pages=[PageMeta(url="http://127.0.0.2/p0.html", title="Page 0", chars=100)])

    @activity.defn(name="summarize")
    async def summarize(self, inp: SummarizeInput) -> SummarizeOutput:
        await self._enter("summarize", inp, blockable=inp.allow_llm)
        return SummarizeOutput(notes_ref="artifact:x/notes.json", method="extractive", sources=1)

    @activity.defn(name="generate_report")
    async def generate_report(self, inp: GenerateInput) -> GenerateOutput:
        await self._enter("generate_report", inp, blockable=inp.allow_llm)
        body = "# report\n" + "\n".join(f"- fallback: {f}" for f in inp.fallbacks)
        return GenerateOutput(report_markdown=body, method="extractive",
                              sources=[Source(n=1, url="http://127.0.0.2/p0.html", title="Page 0", origin="crawl")])

    @activity.defn(name="extend_sandbox")
    async def extend_sandbox(self, inp: ExtendSandboxInput) -> None:
        await self._enter("extend_sandbox", inp, blockable=False)

    @activity.defn(name="terminate_sandbox")
    async def terminate_sandbox(self, inp: SandboxInput) -> TerminateOutput:
        await self._enter("terminate_sandbox", inp, blockable=False)
        return TerminateOutput(terminated=True)

    def activities(self) -> list:
        return [self.search, self.create_sandbox, self.warmup_sandbox, self.install_runtime, self.verify_browser,
                self.install_system_deps, self.install_browser, self.extend_sandbox, self.crawl_pages, self.collect_output,
                self.summarize, self.generate_report, self.terminate_sandbox]
