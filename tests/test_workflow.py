"""Workflow behaviour in the time-skipping test server, with stand-in activities.

Covers every row of the seed's fallback table, cancel in each phase, workflow cancellation, the
deadline and `extend`, retries per the policies, and terminate exactly once on every path.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path
from datetime import datetime

import pytest
from temporalio.client import WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.exceptions import CancelledError

from deep_research import policies as P
from deep_research.config import Settings
from deep_research.models import CancelRequest, ExtendRequest, ExtendResult, Progress, ResearchInput, ResearchResult
from tests.standins import Standins
from worker import build_worker
from workflows import research as W

QUESTION = "How do I run a subprocess and capture its output?"


async def _run(env, standins: Standins, inp: ResearchInput | None = None, *, during=None,
               record: str | None = None) -> ResearchResult:
    """Run one research with the stand-ins; `during(handle)` runs while it is in flight."""
    queue = f"q-{uuid.uuid4().hex[:8]}"
    async with build_worker(env.client, Settings(), activities=standins.activities(), task_queue=queue):
        handle = await env.client.start_workflow(
            W.ResearchWorkflow.run, inp or ResearchInput(question=QUESTION),
            id=f"wf-{uuid.uuid4().hex[:8]}", task_queue=queue,
        )
        if during is not None:
            await during(handle)
        try:
            return await handle.result()
        finally:
            if record:
                await record_history(handle, record)


async def record_history(handle, name: str) -> None:
    """With DR_RECORD_HISTORIES=1, keep this run's history for the replay test."""
    if os.environ.get("DR_RECORD_HISTORIES") == "1":
        history = await handle.fetch_history()
        (Path(__file__).parent / "histories" / f"{name}.json").write_text(history.to_json())


def _terminated_once(s: Standins) -> bool:
    return s.calls["terminate_sandbox"] == 1


# ------------------------------------------------------------------ happy path


async def test_happy_path_runs_every_step_in_order_and_terminates_once(time_env):
    s = Standins()
    result = await _run(time_env, s, record="standin-happy-path")
    assert result.status == "completed"
    assert s.events == ["search", "create_sandbox", "warmup_sandbox", "install_runtime", "verify_browser",
                        "crawl_pages", "collect_output", "summarize", "generate_report", "terminate_sandbox"]
    assert result.fallbacks == []
    assert result.sandbox_id == "sb-1" and result.sandbox_terminated
    assert result.pages_crawled == 1
    crawl_input = s.inputs["crawl_pages"][0]
    assert crawl_input.seeds[0].url == "http://127.0.0.2/p0.html"
    assert crawl_input.limits.max_pages == result.limits.max_pages


async def test_progress_query_reports_all_steps_complete(time_env):
    s = Standins()
    seen: dict = {}

    async def during(handle):
        await handle.result()
        seen["p"] = await handle.query(W.ResearchWorkflow.progress)

    await _run(time_env, s, during=during)
    progress: Progress = seen["p"]
    assert [st.id for st in progress.steps] == ["search", "sandbox", "setup", "browser", "crawl", "analysis",
                                                "finalize", "cleanup"]
    assert all(st.state == "complete" for st in progress.steps), progress.steps
    assert progress.status == "completed"


async def test_seed_urls_are_crawled_first(time_env):
    s = Standins()
    await _run(time_env, s, ResearchInput(question=QUESTION, seed_urls=["http://127.0.0.3/start.html"]))
    assert s.inputs["crawl_pages"][0].seeds[0].url == "http://127.0.0.3/start.html"


# ------------------------------------------------------------------ fallback table


async def test_create_fails_retries_per_policy_then_snippets(time_env):
    s = Standins(failures={"create_sandbox": -1})
    result = await _run(time_env, s)
    assert s.calls["create_sandbox"] == P.CREATE_RETRY.maximum_attempts == 5  # 4 retries
    assert result.fallbacks == [W.FB_CREATE]
    assert s.calls["terminate_sandbox"] == 0  # nothing to terminate
    assert s.inputs["summarize"][0].pages_ref is None  # report from search snippets
    assert "based on search snippets only" in result.report_markdown


async def test_create_429_then_success(time_env):
    s = Standins(failures={"create_sandbox": 2}, error_types={"create_sandbox": ("SandboxUnavailable", False)})
    result = await _run(time_env, s)
    assert s.calls["create_sandbox"] == 3
    assert result.fallbacks == [] and _terminated_once(s)


async def test_warmup_502s_then_ready(time_env):
    s = Standins(failures={"warmup_sandbox": 2})
    result = await _run(time_env, s)
    assert s.calls["warmup_sandbox"] == 3
    assert result.fallbacks == [] and _terminated_once(s)


async def test_warmup_fails_five_times_falls_back_and_terminates(time_env):
    s = Standins(failures={"warmup_sandbox": -1})
    result = await _run(time_env, s, record="standin-warmup-fails")
    assert s.calls["warmup_sandbox"] == P.WARMUP_ATTEMPTS == 5
    assert result.fallbacks == [W.FB_WARMUP]
    assert _terminated_once(s) and result.sandbox_terminated
    assert s.calls["install_runtime"] == 0


async def test_install_fails_uses_snippets(time_env):
    s = Standins(failures={"install_runtime": -1}, error_types={"install_runtime": ("InstallFailed", True)})
    result = await _run(time_env, s)
    assert s.calls["install_runtime"] == 1  # non-retryable: no point trying again
    assert result.fallbacks == [W.FB_INSTALL]
    assert s.inputs["summarize"][0].pages_ref is None and _terminated_once(s)


async def test_preinstalled_browser_fails_local_install_works(time_env):
    s = Standins(failures={"verify_browser": -1}, error_types={"verify_browser": ("BrowserLaunchFailed", True)})
    result = await _run(time_env, s)
    assert s.calls["install_system_deps"] == 1 and s.calls["install_browser"] == 1
    assert s.calls["verify_browser_local"] == 1
    assert s.inputs["crawl_pages"][0].executable == ""  # Playwright's own browser
    assert result.fallbacks == [W.FB_BROWSER_LOCAL] and _terminated_once(s)


async def test_browser_fails_and_local_install_fails_uses_snippets(time_env):
    s = Standins(failures={"verify_browser": -1, "install_system_deps": -1},
                 error_types={"verify_browser": ("BrowserLaunchFailed", True),
                              "install_system_deps": ("InstallImpossible", True)})
    result = await _run(time_env, s)
    assert s.calls["crawl_pages"] == 0
    assert result.fallbacks == [W.FB_BROWSER] and _terminated_once(s)


async def test_apt_lock_is_retried_three_times_20s_apart(time_env):
    s = Standins(failures={"verify_browser": -1, "install_system_deps": -1},
                 error_types={"verify_browser": ("BrowserLaunchFailed", True),
                              "install_system_deps": ("AptLocked", False)})
    await _run(time_env, s)
    assert s.calls["install_system_deps"] == P.APT_RETRY.maximum_attempts == 3
    assert P.APT_RETRY.initial_interval.total_seconds() == 20 and P.APT_RETRY.backoff_coefficient == 1.0


async def test_crawler_timeout_returns_partial_results(time_env):
    s = Standins(crawl_timed_out=True)
    result = await _run(time_env, s)
    assert result.fallbacks == [W.FB_CRAWL_TIMEOUT]
    assert s.inputs["summarize"][0].pages_ref == "artifact:x/pages.json"  # partial pages are used
    assert _terminated_once(s)


async def test_crawler_fails_entirely_uses_snippets(time_env):
    s = Standins(failures={"crawl_pages": -1})
    result = await _run(time_env, s)
    assert s.calls["crawl_pages"] == P.CRAWL_RETRY.maximum_attempts
    assert result.fallbacks == [W.FB_CRAWL_FAILED]
    assert s.inputs["summarize"][0].pages_ref is None and _terminated_once(s)


async def test_output_unreadable_uses_snippets(time_env):
    s = Standins(failures={"collect_output": -1})
    result = await _run(time_env, s)
    assert s.calls["collect_output"] == P.STEP_RETRY.maximum_attempts
    assert result.fallbacks == [W.FB_OUTPUT]
    assert "based on search snippets only" in result.report_markdown and _terminated_once(s)


async def test_summary_failure_uses_raw_content(time_env):
    s = Standins(failures={"summarize": P.STEP_RETRY.maximum_attempts})
    result = await _run(time_env, s)
    assert [i.allow_llm for i in s.inputs["summarize"]][-1] is False
    assert result.fallbacks == [W.FB_SUMMARY] and _terminated_once(s)


async def test_no_search_results_skips_sandbox(time_env):
    s = Standins(hits=0)
    result = await _run(time_env, s)
    assert s.calls["create_sandbox"] == 0 and s.calls["terminate_sandbox"] == 0
    assert result.fallbacks == [W.FB_NO_RESULTS]


async def test_search_failure_fails_the_research_without_a_sandbox(time_env):
    s = Standins(failures={"search": -1})
    with pytest.raises(WorkflowFailureError) as info:
        await _run(time_env, s)
    assert "search failed" in str(info.value.cause)
    assert s.calls["search"] == P.SEARCH_RETRY.maximum_attempts and s.calls["create_sandbox"] == 0


# ------------------------------------------------------------------ cancel, deadline, extend


@pytest.mark.parametrize("phase", ["create_sandbox", "warmup_sandbox", "install_runtime", "verify_browser",
                                   "crawl_pages", "collect_output", "summarize", "generate_report"])
async def test_cancel_signal_in_each_phase(time_env, phase):
    s = Standins(block=phase)

    async def during(handle):
        await asyncio.wait_for(s.blocked_started.wait(), 30)
        await handle.signal(W.ResearchWorkflow.cancel, CancelRequest(reason="user changed mind"))

    result = await _run(time_env, s, during=during, record=f"standin-cancel-{phase}")
    assert result.status == "cancelled" and result.cancel_reason == "user changed mind"
    assert W.FB_CANCELLED in result.fallbacks
    # The step in flight was cancelled and acknowledged before the sandbox was terminated.
    assert f"{phase}:cancelled" in s.events
    if phase != "create_sandbox":
        assert s.events.index(f"{phase}:cancelled") < s.events.index("terminate_sandbox")
        assert _terminated_once(s)
    assert result.report_markdown  # a report from what was gathered


@pytest.mark.parametrize("phase", ["create_sandbox", "install_runtime", "collect_output"])
async def test_cancel_holds_when_the_step_in_flight_returns_anyway(time_env, phase):
    # An activity that never heartbeats never hears of the cancel and returns normally: the research
    # must still stop there, not go on to the next steps.
    s = Standins(block=phase, block_deaf_s=1.5)

    async def during(handle):
        await asyncio.wait_for(s.blocked_started.wait(), 30)
        await handle.signal(W.ResearchWorkflow.cancel, CancelRequest(reason="stop now"))

    result = await _run(time_env, s, during=during)
    assert result.status == "cancelled"
    assert f"{phase}:returned" in s.events
    after = s.events[s.events.index(f"{phase}:returned") + 1:]
    assert "crawl_pages" not in after and "warmup_sandbox" not in after and "verify_browser" not in after
    assert _terminated_once(s)  # a sandbox created despite the cancel is terminated too
    assert s.events.index("terminate_sandbox") > s.events.index(f"{phase}:returned")


async def test_cancel_during_search_has_no_sandbox(time_env):
    s = Standins(block="search")

    async def during(handle):
        await asyncio.wait_for(s.blocked_started.wait(), 30)
        await handle.signal(W.ResearchWorkflow.cancel, CancelRequest(reason="stop"))

    result = await _run(time_env, s, during=during)
    assert result.status == "cancelled" and s.calls["terminate_sandbox"] == 0


async def test_workflow_cancellation_terminates_sandbox(time_env):
    s = Standins(block="crawl_pages")

    async def during(handle):
        await asyncio.wait_for(s.blocked_started.wait(), 30)
        await handle.cancel()

    with pytest.raises(WorkflowFailureError) as info:
        await _run(time_env, s, during=during)
    assert isinstance(info.value.cause, CancelledError)
    assert "crawl_pages:cancelled" in s.events and _terminated_once(s)
    assert s.events.index("crawl_pages:cancelled") < s.events.index("terminate_sandbox")


async def test_deadline_stops_the_crawl_and_reports_partial(time_env):
    # The test server cannot skip time while an activity runs, so this deadline is real: 6 s.
    s = Standins(block="crawl_pages")
    result = await _run(time_env, s, ResearchInput(question=QUESTION, duration_minutes=0.1),
                        record="standin-deadline")
    assert result.status == "deadline"
    assert W.FB_DEADLINE in result.fallbacks
    assert _terminated_once(s)
    # The partial output the crawler wrote is read before the sandbox goes.
    assert s.calls["collect_output"] == 1
    assert s.events.index("collect_output") < s.events.index("terminate_sandbox")


async def test_extend_moves_the_deadline(time_env):
    s = Standins(block="crawl_pages")
    seen: dict = {}

    async def during(handle):
        await asyncio.wait_for(s.blocked_started.wait(), 30)
        before = datetime.fromisoformat((await handle.query(W.ResearchWorkflow.progress)).deadline)
        # invalid signals are logged and ignored, never fail the run
        await handle.signal(W.ResearchWorkflow.extend, ExtendRequest(minutes=-5))
        await handle.signal(W.ResearchWorkflow.extend, ExtendRequest(minutes=10_000))
        with pytest.raises(WorkflowUpdateFailedError):
            await handle.execute_update(W.ResearchWorkflow.extend_deadline, ExtendRequest(minutes=0))
        out: ExtendResult = await handle.execute_update(W.ResearchWorkflow.extend_deadline,
                                                        ExtendRequest(minutes=30))
        await handle.signal(W.ResearchWorkflow.extend, ExtendRequest(minutes=5))
        after = datetime.fromisoformat((await handle.query(W.ResearchWorkflow.progress)).deadline)
        seen["delta"] = (after - before).total_seconds()
        seen["update"] = datetime.fromisoformat(out.deadline)
        seen["before"] = before
        await handle.signal(W.ResearchWorkflow.cancel, CancelRequest(reason="done testing"))

    result = await _run(time_env, s, during=during)
    assert seen["delta"] == 35 * 60
    assert (seen["update"] - seen["before"]).total_seconds() == 30 * 60
    assert result.status == "cancelled"


async def test_extended_research_outlives_the_original_deadline(time_env):
    s = Standins(block="crawl_pages")

    async def during(handle):
        await asyncio.wait_for(s.blocked_started.wait(), 30)
        await handle.execute_update(W.ResearchWorkflow.extend_deadline, ExtendRequest(minutes=1))
        await asyncio.sleep(8)  # real time past the original 6 s deadline, before the extended one
        progress = await handle.query(W.ResearchWorkflow.progress)
        assert progress.status == "running"
        await handle.signal(W.ResearchWorkflow.cancel, CancelRequest(reason="enough"))

    result = await _run(time_env, s, ResearchInput(question=QUESTION, duration_minutes=0.1), during=during,
                        record="standin-extend-expiry")
    assert result.status == "cancelled" and _terminated_once(s)
    # The sandbox's server-side expiry was moved too: past the new deadline plus the margin.
    assert s.calls["extend_sandbox"] == 1
    ttl = s.inputs["extend_sandbox"][0].ttl_s
    assert 60 < ttl <= 60 + 6 + P.SANDBOX_TTL_MARGIN.total_seconds()


def test_input_validation_rejects_bad_input():
    with pytest.raises(ValueError, match="question is empty"):
        ResearchInput(question="  ")
    with pytest.raises(ValueError, match="longer than"):
        ResearchInput(question="x" * 5000)
    with pytest.raises(ValueError, match="mode"):
        ResearchInput(question=QUESTION, mode="huge")
    with pytest.raises(ValueError, match="must start with http"):
        ResearchInput(question=QUESTION, seed_urls=["ftp://example.com"])
    with pytest.raises(ValueError, match="no host"):
        ResearchInput(question=QUESTION, seed_urls=["http://"])
    with pytest.raises(ValueError, match="duration_minutes"):
        ResearchInput(question=QUESTION, duration_minutes=0)
