"""The research workflow: the sandbox state machine of seed 000 as durable steps.

search -> create -> warmup -> install -> verify -> crawl -> summarize -> generate -> terminate

Every step is an activity (activities/) with the policy from deep_research/policies.py. Each row
of the seed's "Error Handling and Fallbacks" table is a branch below, recorded in `fallbacks` so
the report says which one was used. Terminate runs exactly once, shielded from cancellation, on
every path: success, failure, the `cancel` signal, workflow cancellation and the deadline.

Deterministic: no I/O, no clocks but workflow.now(), randomness only from workflow.random().
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError

with workflow.unsafe.imports_passed_through():
    from deep_research import policies as P
    from deep_research.limits import compute_limits
    from deep_research.models import (
        STEP_LABELS,
        CRAWL_OUTPUT,
        STEP_NAMES,
        CancelRequest,
        CollectInput,
        CollectOutput,
        CrawlInput,
        CrawlOutput,
        CrawlProgressSignal,
        CreateSandboxInput,
        CreateSandboxOutput,
        ExtendRequest,
        ExtendResult,
        ExtendSandboxInput,
        GenerateInput,
        GenerateOutput,
        InstallOutput,
        LLMUsage,
        Progress,
        ResearchInput,
        ResearchResult,
        SandboxInput,
        SearchHit,
        SearchInput,
        SearchOutput,
        StepProgress,
        SummarizeInput,
        SummarizeOutput,
        TerminateOutput,
        VerifyInput,
        VerifyOutput,
    )

# Fallback labels, as the report shows them (seed table "Error Handling and Fallbacks").
FB_SNIPPETS = "based on search snippets only"
FB_CREATE = "sandbox creation failed: " + FB_SNIPPETS
FB_WARMUP = "sandbox warmup failed after 5 attempts: " + FB_SNIPPETS
FB_INSTALL = "crawler runtime install failed: " + FB_SNIPPETS
FB_BROWSER_LOCAL = "preinstalled browser failed to launch: used a local browser install"
FB_BROWSER = "browser launch failed, local install too: " + FB_SNIPPETS
FB_CRAWL_TIMEOUT = "crawler timed out: partial results"
FB_CRAWL_FAILED = "crawler failed: " + FB_SNIPPETS
FB_OUTPUT = "crawler output unreadable: " + FB_SNIPPETS
FB_NO_PAGES = "crawler returned no pages: " + FB_SNIPPETS
FB_SUMMARY = "summarization failed: used raw crawled content"
FB_REPORT_LLM = "report LLM failed: extractive report"
FB_BUDGET = "LLM token budget spent: extractive from here on"
FB_NO_RESULTS = "search returned no results"
FB_DEADLINE = "deadline reached: report from what was gathered"
FB_CANCELLED = "cancelled: report from what was gathered"


class _Stop(Exception):
    """Raised inside the pipeline to jump straight to the report from what was gathered."""


@workflow.defn(name="ResearchWorkflow")
class ResearchWorkflow:
    @workflow.init
    def __init__(self, inp: ResearchInput) -> None:
        self._input = inp
        self._limits = compute_limits(inp.mode, inp.optimization)
        self._steps = {s: StepProgress(id=s, label=STEP_LABELS[s]) for s in STEP_NAMES}
        if inp.duration_minutes is not None:
            self._limits = self._limits.model_copy(update={"max_duration_s": max(1, int(inp.duration_minutes * 60))})
        self._deadline = workflow.now() + timedelta(seconds=self._limits.max_duration_s)
        self._started = workflow.now()
        self._deadline_moved = False
        self._cancel_reason: str | None = None
        self._status = "running"
        self._fallbacks: list[str] = []
        self._crawl = CrawlProgressSignal(current=0, total=0)
        # What has been gathered so far; a stop builds the report from this.
        self._hits: list[SearchHit] = []
        self._sandbox_id: str | None = None
        self._sandbox_terminated = False
        self._terminate_task: asyncio.Task | None = None
        self._stopping = False  # a cancel or the deadline is stopping the pipeline
        self._expiry_tasks: list[asyncio.Task] = []
        self._python = ""
        self._crawl_output_path: str | None = None
        self._crawl_interrupted = False  # the crawl started and did not return
        self._collect: CollectOutput | None = None
        self._notes: SummarizeOutput | None = None
        self._report: GenerateOutput | None = None
        self._usage: list[LLMUsage] = []
        self._llm_allowed = True  # turned off once the token budget is spent

    # ------------------------------------------------------------------ messages

    @workflow.signal
    def cancel(self, request: CancelRequest) -> None:
        if self._cancel_reason is None:
            self._cancel_reason = request.reason or "cancelled by user"
            workflow.logger.info("cancel requested: %s", self._cancel_reason)

    @workflow.signal(name="extend")
    def extend(self, request: ExtendRequest) -> None:
        problem = self._extend_problem(request)
        if problem:
            workflow.logger.warning("extend ignored: %s", problem)
            return
        self._apply_extend(request)

    @workflow.update(name="extend_deadline")
    def extend_deadline(self, request: ExtendRequest) -> ExtendResult:
        self._apply_extend(request)
        return ExtendResult(deadline=self._deadline.isoformat())

    @extend_deadline.validator
    def _validate_extend(self, request: ExtendRequest) -> None:
        problem = self._extend_problem(request)
        if problem:
            raise ValueError(problem)

    @workflow.signal(name="crawl_progress")
    def crawl_progress(self, progress: CrawlProgressSignal) -> None:
        if progress.current >= self._crawl.current:
            self._crawl = progress

    @workflow.query
    def progress(self) -> Progress:
        return Progress(
            status=self._status,
            steps=list(self._steps.values()),
            crawl_current=self._crawl.current,
            crawl_total=self._crawl.total,
            crawl_url=self._crawl.url,
            sandbox_id=self._sandbox_id,
            deadline=self._deadline.isoformat(),
            fallbacks=list(self._fallbacks),
            tokens_used=self._tokens_used(),
            cost_usd=round(sum(u.cost_usd for u in self._usage), 6),
        )

    def _tokens_used(self) -> int:
        return sum(u.prompt_tokens + u.completion_tokens for u in self._usage)

    def _extend_problem(self, request: ExtendRequest) -> str | None:
        if self._status != "running":
            return f"research is already {self._status}"
        if not (0 < request.minutes <= P.MAX_EXTEND_MINUTES):
            return f"minutes must be > 0 and <= {P.MAX_EXTEND_MINUTES:g}, got {request.minutes:g}"
        new_deadline = self._deadline + timedelta(minutes=request.minutes)
        if new_deadline - self._started > timedelta(minutes=P.MAX_TOTAL_MINUTES):
            return f"the deadline may not be more than {P.MAX_TOTAL_MINUTES:g} minutes after the start"
        return None

    def _apply_extend(self, request: ExtendRequest) -> None:
        self._deadline += timedelta(minutes=request.minutes)
        self._deadline_moved = True
        workflow.logger.info("deadline extended by %s min to %s", request.minutes, self._deadline)

    # ------------------------------------------------------------------ run

    @workflow.run
    async def run(self, inp: ResearchInput) -> ResearchResult:
        pipeline = asyncio.create_task(self._pipeline())
        try:
            stop = await self._supervise(pipeline)
            if stop is None:
                pipeline.result()  # re-raises a pipeline failure
            else:
                self._status = stop
                self._fallbacks.append(FB_DEADLINE if stop == "deadline" else FB_CANCELLED)
                await self._cancel_and_wait(pipeline)
                if self._crawl_interrupted:
                    await self._collect_output()  # partial pages the crawler wrote before the stop
                await self._terminate_once()
                await self._report_from_what_we_have()
            await self._terminate_once()
        except asyncio.CancelledError:
            # `temporal workflow cancel`: stop the step in flight, clean up, end as cancelled.
            self._status = "cancelled"
            await self._cancel_and_wait(pipeline)
            await self._terminate_once()
            raise
        except BaseException:
            self._status = "failed"
            await self._cancel_and_wait(pipeline)
            await self._terminate_once()
            raise
        if self._status == "running":
            self._status = "completed"
        return self._result()

    async def _supervise(self, pipeline: asyncio.Task) -> str | None:
        """Wait for the pipeline, a cancel signal or the deadline (a timer that `extend` moves)."""
        while not pipeline.done():
            self._deadline_moved = False
            remaining = (self._deadline - workflow.now()).total_seconds()
            if remaining <= 0:
                return "deadline"
            try:
                await workflow.wait_condition(
                    lambda: pipeline.done() or self._cancel_reason is not None or self._deadline_moved,
                    timeout=remaining,
                )
            except asyncio.TimeoutError:
                if not self._deadline_moved:
                    return "deadline"
            if self._deadline_moved:
                self._extend_sandbox_expiry()
            if self._cancel_reason is not None and not pipeline.done():
                return "cancelled"
        return None

    async def _cancel_and_wait(self, task: asyncio.Task) -> None:
        """Cancel the pipeline's step in flight and wait until it has stopped.

        `_stopping` makes sure it does stop: a step whose activity finished despite the cancel
        request (one that never heartbeats never hears of it) raises CancelledError on return
        instead of letting the pipeline go on to the next step.
        """
        if task.done():
            return
        self._stopping = True
        task.cancel()
        while not task.done():
            try:
                await workflow.wait_condition(task.done)
            except asyncio.CancelledError:
                continue  # a second cancel: still wait, the sandbox must not be left mid-step
        self._stopping = False  # what follows (partial report, terminate) must run

    # ------------------------------------------------------------------ the pipeline

    async def _pipeline(self) -> None:
        await self._search()
        try:
            if self._hits:
                await self._sandbox_and_crawl()
            else:
                self._fallbacks.append(FB_NO_RESULTS)
                self._mark("sandbox", "error", "skipped: nothing to crawl")
        except _Stop:
            pass
        await self._summarize()
        await self._generate()

    async def _search(self) -> None:
        self._mark("search", "running")
        try:
            out: SearchOutput = await self._execute(
                "search",
                SearchInput(
                    question=self._input.question,
                    max_results=self._limits.max_sources,
                    related_queries=self._limits.related_queries,
                    provider=self._input.search_provider,
                    mode=self._input.mode,
                ),
                result_type=SearchOutput,
                start_to_close_timeout=P.SEARCH_TIMEOUT,
                retry_policy=P.SEARCH_RETRY,
            )
        except ActivityError as err:
            self._mark("search", "error", _cause(err))
            raise ApplicationError(f"search failed: {_cause(err)}", type="SearchFailed", non_retryable=True) from err
        self._usage += out.usage
        seen = {h.url for h in out.hits}
        extra = [SearchHit(url=u, title=u, provider="seed") for u in self._input.seed_urls if u not in seen]
        self._hits = extra + out.hits
        self._mark("search", "complete", f"{len(self._hits)} sources from {len(out.queries)} queries")

    async def _sandbox_and_crawl(self) -> None:
        # create + warmup
        self._mark("sandbox", "running", "creating sandbox")
        try:
            created: CreateSandboxOutput = await self._execute(
                "create_sandbox",
                CreateSandboxInput(
                    workflow_id=workflow.info().workflow_id,
                    ttl_s=int(self._limits.max_duration_s + P.SANDBOX_TTL_MARGIN.total_seconds()),
                ),
                result_type=CreateSandboxOutput,
                start_to_close_timeout=P.CREATE_TIMEOUT,
                retry_policy=P.CREATE_RETRY,
                # A sandbox created despite a cancel is still recorded, so terminate finds it.
                on_result=lambda out: setattr(self, "_sandbox_id", out.sandbox_id),
            )
        except ActivityError as err:
            self._fail("sandbox", FB_CREATE, err)
        self._mark("sandbox", "running", f"warming up {created.sandbox_id}")
        if not await self._warmup():
            self._fail("sandbox", FB_WARMUP, None)
        self._mark("sandbox", "complete", created.sandbox_id)

        # install the crawler runtime
        self._mark("setup", "running")
        try:
            installed: InstallOutput = await self._sandbox_call(
                "install_runtime", SandboxInput(sandbox_id=self._sandbox_id), InstallOutput,
                timeout=P.INSTALL_TIMEOUT, heartbeat=P.INSTALL_HEARTBEAT,
            )
        except ActivityError as err:
            self._fail("setup", FB_INSTALL, err)
        self._python = installed.python
        self._mark("setup", "complete", installed.method)

        # verify the browser: preinstalled first, then a local install
        self._mark("browser", "running", "launching preinstalled browser")
        verified = await self._verify_browser(use_local_install=False)
        if verified is None:
            self._mark("browser", "running", "preinstalled browser failed; installing locally")
            verified = await self._install_local_browser()
            if verified is None:
                self._fail("browser", FB_BROWSER, None)
            self._fallbacks.append(FB_BROWSER_LOCAL)
        self._mark("browser", "complete", verified.executable or "playwright chromium")

        await self._crawl_and_collect(verified)

    async def _warmup(self) -> bool:
        """Up to 5 health checks, 2 s x attempt + jitter apart, on durable timers."""
        for attempt in range(1, P.WARMUP_ATTEMPTS + 1):
            try:
                await self._execute(
                    "warmup_sandbox",
                    SandboxInput(sandbox_id=self._sandbox_id),
                    start_to_close_timeout=P.WARMUP_CHECK_TIMEOUT,
                    retry_policy=P.SINGLE_ATTEMPT,
                )
                return True
            except ActivityError as err:
                workflow.logger.info("warmup attempt %d failed: %s", attempt, _cause(err))
                if _non_retryable(err) or attempt == P.WARMUP_ATTEMPTS:
                    return False
                delay = P.WARMUP_DELAY_PER_ATTEMPT.total_seconds() * attempt
                delay += workflow.random().uniform(0, P.WARMUP_JITTER_MAX_S)
                await workflow.sleep(delay)
        return False

    async def _verify_browser(self, *, use_local_install: bool) -> VerifyOutput | None:
        try:
            return await self._execute(
                "verify_browser",
                VerifyInput(sandbox_id=self._sandbox_id, python=self._python, use_local_install=use_local_install),
                result_type=VerifyOutput,
                start_to_close_timeout=P.VERIFY_TIMEOUT,
                retry_policy=P.SANDBOX_API_RETRY,
            )
        except ActivityError as err:
            workflow.logger.warning("browser launch failed: %s", _cause(err))
            return None

    async def _install_local_browser(self) -> VerifyOutput | None:
        """Seed's FallbackInstall: system deps (apt, 3 tries 20 s apart), browser, verify again."""
        try:
            await self._sandbox_call("install_system_deps", SandboxInput(sandbox_id=self._sandbox_id), None,
                                     timeout=P.APT_TIMEOUT, heartbeat=P.INSTALL_HEARTBEAT, retry=P.APT_RETRY)
            await self._sandbox_call("install_browser",
                                     VerifyInput(sandbox_id=self._sandbox_id, python=self._python), None,
                                     timeout=P.INSTALL_TIMEOUT, heartbeat=P.INSTALL_HEARTBEAT)
        except ActivityError as err:
            workflow.logger.warning("local browser install failed: %s", _cause(err))
            return None
        return await self._verify_browser(use_local_install=True)

    async def _crawl_and_collect(self, verified: VerifyOutput) -> None:
        self._mark("crawl", "running")
        # The crawler's own duration cap leaves time before the deadline to read and report.
        budget = self._deadline - workflow.now() - P.FINALIZE_RESERVE
        budget_s = int(max(budget, P.MIN_CRAWL_BUDGET).total_seconds())
        limits = self._limits.model_copy(update={"max_duration_s": min(self._limits.max_duration_s, budget_s)})
        self._crawl_output_path = CRAWL_OUTPUT
        self._crawl_interrupted = True
        try:
            crawl: CrawlOutput = await self._execute(
                "crawl_pages",
                CrawlInput(
                    sandbox_id=self._sandbox_id, python=self._python, executable=verified.executable,
                    seeds=self._hits, limits=limits, workflow_id=workflow.info().workflow_id,
                ),
                result_type=CrawlOutput,
                start_to_close_timeout=timedelta(seconds=limits.max_duration_s) + P.CRAWL_TIMEOUT_MARGIN,
                heartbeat_timeout=P.CRAWL_HEARTBEAT_TIMEOUT,
                retry_policy=P.CRAWL_RETRY,
            )
        except ActivityError as err:
            self._crawl_interrupted = False
            self._fail("crawl", FB_CRAWL_FAILED, err)
        self._crawl_interrupted = False
        if crawl.timed_out:
            self._fallbacks.append(FB_CRAWL_TIMEOUT)
        if not await self._collect_output():
            self._fail("crawl", FB_OUTPUT, None)
        if not self._collect.pages:
            self._fail("crawl", FB_NO_PAGES, None)
        self._mark("crawl", "complete", f"{len(self._collect.pages)} pages")

    async def _collect_output(self) -> bool:
        """Read the crawler output (files API, chunked dd, cat) into the artifact store."""
        try:
            self._collect = await self._sandbox_call(
                "collect_output",
                CollectInput(
                    sandbox_id=self._sandbox_id, output_path=self._crawl_output_path,
                    max_chars_per_source=self._limits.max_chars_per_source,
                    workflow_id=workflow.info().workflow_id,
                ),
                CollectOutput, timeout=P.COLLECT_TIMEOUT, retry=P.STEP_RETRY,
            )
        except ActivityError as err:
            workflow.logger.warning("crawler output unreadable: %s", _cause(err))
            return False
        return True

    async def _summarize(self, *, allow_llm: bool = True) -> None:
        self._mark("analysis", "running")
        pages_ref = self._collect.pages_ref if self._collect and self._collect.pages else None
        base = SummarizeInput(
            question=self._input.question, pages_ref=pages_ref, hits=self._hits,
            source_limit=self._limits.summary_source_limit, workflow_id=workflow.info().workflow_id,
            allow_llm=allow_llm and self._llm_allowed, mode=self._input.mode, tokens_spent=self._tokens_used(),
            sandbox_id=self._sandbox_id if pages_ref and self._terminate_task is None else None,
        )
        try:
            self._notes = await self._execute("summarize", base, result_type=SummarizeOutput,
                                         start_to_close_timeout=P.SUMMARIZE_TIMEOUT, retry_policy=P.STEP_RETRY)
        except ActivityError as err:
            if not base.allow_llm:
                raise
            # Seed: "Agent summarization fails -> use raw crawled content".
            workflow.logger.warning("summarization failed: %s", _cause(err))
            self._llm_fallback(err, FB_SUMMARY)
            self._notes = await self._execute("summarize", base.model_copy(update={"allow_llm": False}),
                                         result_type=SummarizeOutput, start_to_close_timeout=P.SUMMARIZE_TIMEOUT,
                                         retry_policy=P.STEP_RETRY)
        self._usage += self._notes.usage
        self._mark("analysis", "complete", f"{self._notes.sources} sources, {self._notes.method}")

    async def _generate(self, *, allow_llm: bool = True) -> None:
        self._mark("finalize", "running")
        base = GenerateInput(
            question=self._input.question, notes_ref=self._notes.notes_ref,
            fallbacks=list(self._fallbacks), mode=self._input.mode,
            workflow_id=workflow.info().workflow_id, allow_llm=allow_llm and self._llm_allowed,
            pages_ref=self._collect.pages_ref if self._collect else None, tokens_spent=self._tokens_used(),
        )
        try:
            self._report = await self._execute("generate_report", base, result_type=GenerateOutput,
                                          start_to_close_timeout=P.GENERATE_TIMEOUT, retry_policy=P.STEP_RETRY)
        except ActivityError as err:
            if not base.allow_llm:
                raise
            # Seed: "Report LLM rate limited -> fallback model" happens inside the activity; when every
            # candidate and every retry failed, the report is still written, extractively.
            workflow.logger.warning("LLM report failed: %s", _cause(err))
            self._llm_fallback(err, FB_REPORT_LLM)
            base = base.model_copy(update={"allow_llm": False, "fallbacks": list(self._fallbacks)})
            self._report = await self._execute("generate_report", base, result_type=GenerateOutput,
                                          start_to_close_timeout=P.GENERATE_TIMEOUT, retry_policy=P.STEP_RETRY)
        self._usage += self._report.usage
        self._mark("finalize", "complete", self._report.method)

    def _llm_fallback(self, err: ActivityError, fallback: str) -> None:
        cause = err.cause
        if isinstance(cause, ApplicationError) and cause.type == "BudgetExhausted":
            self._llm_allowed = False
            fallback = FB_BUDGET
        if fallback not in self._fallbacks:
            self._fallbacks.append(fallback)

    async def _report_from_what_we_have(self) -> None:
        """After a cancel or the deadline: a quick extractive report from what was gathered."""
        for step in self._steps.values():
            if step.state == "running":
                step.state, step.message = "error", f"stopped: {self._status}"
        self._notes = None
        self._report = None
        await self._summarize(allow_llm=False)
        await self._generate(allow_llm=False)

    def _extend_sandbox_expiry(self) -> None:
        """Keep the sandbox's server-side expiry (the backstop) beyond a deadline `extend` moved."""
        if self._sandbox_id is None or self._terminate_task is not None:
            return
        if not workflow.patched("extend-sandbox-expiry"):  # histories recorded before this step
            return
        ttl_s = int((self._deadline - workflow.now() + P.SANDBOX_TTL_MARGIN).total_seconds())
        self._expiry_tasks.append(asyncio.create_task(self._extend_expiry(ttl_s)))

    async def _extend_expiry(self, ttl_s: int) -> None:
        try:
            await self._execute("extend_sandbox", ExtendSandboxInput(sandbox_id=self._sandbox_id, ttl_s=ttl_s),
                           start_to_close_timeout=P.EXTEND_SANDBOX_TIMEOUT, retry_policy=P.SANDBOX_API_RETRY)
        except (ActivityError, asyncio.CancelledError) as err:
            workflow.logger.warning("sandbox expiry not extended: %s", _cause(err))

    # ------------------------------------------------------------------ terminate

    async def _terminate_once(self) -> None:
        """Terminate the sandbox exactly once, never cancelled, whatever path we are on."""
        if self._sandbox_id is None:
            self._mark("cleanup", "complete", "no sandbox")
            return
        if self._terminate_task is None:
            self._terminate_task = asyncio.create_task(self._terminate())
            for task in self._expiry_tasks:
                task.cancel()
        await asyncio.shield(self._terminate_task)

    async def _terminate(self) -> None:
        self._mark("cleanup", "running", self._sandbox_id)
        try:
            out: TerminateOutput = await self._execute(
                "terminate_sandbox",
                SandboxInput(sandbox_id=self._sandbox_id),
                result_type=TerminateOutput,
                start_to_close_timeout=P.TERMINATE_TIMEOUT,
                retry_policy=P.TERMINATE_RETRY,
                cancellation_type=workflow.ActivityCancellationType.ABANDON,
            )
        except ActivityError as err:
            # Still not fatal for the report: the sandbox's server-side expiry is the backstop.
            self._mark("cleanup", "error", _cause(err))
            return
        self._sandbox_terminated = True
        self._mark("cleanup", "complete", out.detail or "terminated")

    # ------------------------------------------------------------------ helpers

    async def _execute(self, activity: str, arg, *, on_result=None, **options):
        """workflow.execute_activity for the steps, with two rules about stopping.

        A cancelled activity raises asyncio.CancelledError: the SDK reports it as
        ActivityError(cause=CancelledError), and the fallback branches catch ActivityError; a cancel
        must never be mistaken for a failed step. And while the pipeline is stopping, no step starts
        and a step that returns anyway raises CancelledError after `on_result` saw its result.
        """
        if self._stopping:
            raise asyncio.CancelledError("the research is stopping")
        # A step in flight is cancelled and awaited before the sandbox is terminated.
        options.setdefault("cancellation_type", workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED)
        try:
            result = await workflow.execute_activity(activity, arg, **options)
        except ActivityError as err:
            if isinstance(err.cause, CancelledError):
                raise asyncio.CancelledError(str(err.cause)) from err
            raise
        if on_result is not None:
            on_result(result)
        if self._stopping:
            raise asyncio.CancelledError("the research is stopping")
        return result

    async def _sandbox_call(self, name, arg, result_type, *, timeout, heartbeat=None, retry=P.SANDBOX_API_RETRY):
        return await self._execute(
            name, arg, result_type=result_type,
            start_to_close_timeout=timeout, heartbeat_timeout=heartbeat, retry_policy=retry,
        )

    def _mark(self, step: str, state: str, message: str = "") -> None:
        self._steps[step].state = state
        self._steps[step].message = message

    def _fail(self, step: str, fallback: str, err: ActivityError | None) -> None:
        self._mark(step, "error", _cause(err) if err else fallback)
        self._fallbacks.append(fallback)
        raise _Stop(fallback)

    def _result(self) -> ResearchResult:
        report = self._report
        return ResearchResult(
            question=self._input.question,
            status=self._status,
            mode=self._input.mode,
            optimization=self._input.optimization,
            report_markdown=report.report_markdown,
            report_method=report.method,
            sources=report.sources,
            fallbacks=list(self._fallbacks),
            limits=self._limits,
            pages_crawled=len(self._collect.pages) if self._collect else 0,
            sandbox_id=self._sandbox_id,
            sandbox_terminated=self._sandbox_terminated,
            cancel_reason=self._cancel_reason,
            usage=list(self._usage),
            tokens_used=self._tokens_used(),
            cost_usd=round(sum(u.cost_usd for u in self._usage), 6),
            citations_checked=report.citations_checked,
            citations_unsupported=report.citations_unsupported,
        )


def _cause(err: BaseException | None) -> str:
    """The innermost message of an ActivityError chain, for progress and logs."""
    while err is not None and err.__cause__ is not None:
        err = err.__cause__
    return str(err) if err else ""


def _non_retryable(err: ActivityError) -> bool:
    cause = err.cause
    return isinstance(cause, ApplicationError) and (cause.non_retryable or cause.type in P.NON_RETRYABLE)
