"""Summarize and generate steps: with an OpenAI-compatible LLM configured (deep_research/llm), the
seed's analyst summary and a streamed, citation-checked report; without one, or when the workflow
asks for the extractive path (`allow_llm=False`, a fallback), extractive notes and report.

Streaming: the generate activity heartbeats the report text written so far. Heartbeats are how a
running activity talks to Temporal without growing the workflow history (only the last one is kept,
on the pending activity); `starter.py watch` reads it from the workflow's description and prints the
report as it is written. A signal per chunk would have put every chunk into the history.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.deps import Deps, sandbox_errors, usage_records
from activities.setup import exec_with_heartbeat
from deep_research.llm import (
    BudgetExhausted,
    LLMClient,
    LLMError,
    SummaryFailed,
    TokenBudget,
    generate_llm,
    source_inputs,
    summarize_llm,
)
from deep_research.llm.agent import OUTPUT_FILE, SCRIPT_FILE, agent_env, agent_files, notes_from_agent_output
from deep_research.logging import activity_logger
from deep_research.models import GenerateInput, GenerateOutput, LLMUsage, SummarizeInput, SummarizeOutput
from deep_research.report.extractive import cited_sentences, render_report, summarize_extractive, verify_citations
from deep_research.report.notes import Notes, notes_source_texts

MAX_REPORT_CHARS = 200_000  # a report is text for a person; this bounds the workflow payload
MAX_STREAM_HEARTBEAT_CHARS = 64_000  # the tail of the report shown live while it is written


def _llm_failure(exc: Exception) -> ApplicationError:
    """Typed errors: the workflow falls back on the non-retryable ones, Temporal retries the rest."""
    if isinstance(exc, BudgetExhausted):
        return ApplicationError(f"LLM token budget spent: {exc}", type="BudgetExhausted", non_retryable=True)
    if isinstance(exc, SummaryFailed):
        return ApplicationError(f"LLM summary unusable: {exc}", type="SummaryFailed", non_retryable=True)
    if isinstance(exc, LLMError):
        delay = timedelta(seconds=exc.retry_after_s) if getattr(exc, "retry_after_s", None) else None
        return ApplicationError(str(exc), type=f"LLM-{exc.kind}", non_retryable=not exc.retryable,
                                next_retry_delay=delay)
    return ApplicationError(str(exc), type=type(exc).__name__, non_retryable=True)


class ReportActivities:
    def __init__(self, deps: Deps) -> None:
        self.deps = deps

    @activity.defn(name="summarize")
    async def summarize(self, inp: SummarizeInput) -> SummarizeOutput:
        log = activity_logger()
        pages = self.deps.artifacts.get_json(inp.pages_ref) if inp.pages_ref else []
        notes = summarize_extractive(inp.question, pages, inp.hits, inp.source_limit)
        usage: list[LLMUsage] = []
        llm = self.deps.llm
        # The extractive ranking decides which sources the LLM (or the agent) reads, best first.
        order = {s.url: i for i, s in enumerate(notes.sources)}
        inputs = sorted(source_inputs(pages, inp.hits), key=lambda s: order.get(s.url, len(order)))
        if inp.allow_llm and self.deps.agent is not None and inp.sandbox_id and notes.sources:
            notes = await self._summarize_by_agent(inp, inputs)
        elif inp.allow_llm and llm is not None and notes.sources:
            budget = TokenBudget(limit=llm.token_budget, spent=inp.tokens_spent)
            try:
                async with LLMClient(llm) as client:
                    notes, usages = await summarize_llm(client, inp.question, inputs, inp.source_limit, budget,
                                                        candidates=llm.candidates(inp.mode))
            except (BudgetExhausted, SummaryFailed, LLMError) as exc:
                log.warning("LLM summary failed", error=str(exc)[:300])
                raise _llm_failure(exc) from None
            usage = usage_records(usages)
        ref = self.deps.artifacts.put_json(f"{inp.workflow_id}/notes.json", notes.model_dump())
        log.info("notes written", sources=len(notes.sources), method=notes.method,
                 tokens=sum(u.prompt_tokens + u.completion_tokens for u in usage))
        return SummarizeOutput(notes_ref=ref, method=notes.method, sources=len(notes.sources), usage=usage)

    async def _summarize_by_agent(self, inp: SummarizeInput, inputs) -> Notes:
        """The seed's agent summary: prompt files in, the agent command run in the sandbox, output back."""
        agent = self.deps.agent
        files, selected = agent_files(inp.question, inputs, inp.source_limit, agent)
        try:
            with sandbox_errors():
                for path, text in files.items():
                    await self.deps.sandbox.write_file(inp.sandbox_id, path, text)
                result = await exec_with_heartbeat(self.deps, inp.sandbox_id, f"sh {SCRIPT_FILE}",
                                                   timeout_s=agent.timeout_s, env=agent_env(agent))
                if result.exit_code != 0:
                    raise SummaryFailed(f"agent exited {result.exit_code}: {result.stderr[-300:]}")
                output = (await self.deps.sandbox.read_file(inp.sandbox_id, OUTPUT_FILE)).decode("utf-8", "replace")
            return notes_from_agent_output(inp.question, output, selected, agent.model)
        except SummaryFailed as exc:
            activity_logger().warning("agent summary failed", error=str(exc)[:300])
            raise ApplicationError(str(exc), type="AgentSummaryFailed", non_retryable=True) from None

    @activity.defn(name="generate_report")
    async def generate_report(self, inp: GenerateInput) -> GenerateOutput:
        notes = Notes.model_validate(self.deps.artifacts.get_json(inp.notes_ref))
        llm = self.deps.llm
        if inp.allow_llm and llm is not None and notes.sources:
            out = await self._generate_llm(inp, notes)
        else:
            out = self._generate_extractive(inp, notes)
        self.deps.artifacts.put_json(f"{inp.workflow_id}/report.json", out.model_dump())
        activity_logger().info("report written", sources=len(out.sources), chars=len(out.report_markdown),
                               method=out.method, citations=out.citations_checked,
                               unsupported=out.citations_unsupported)
        return out

    def _generate_extractive(self, inp: GenerateInput, notes: Notes) -> GenerateOutput:
        markdown, sources = render_report(inp.question, notes, inp.fallbacks, inp.mode)
        # The extractive guarantee, checked on every report: each quote is verbatim in its source.
        unsupported = verify_citations(markdown, notes_source_texts(notes))
        if unsupported:
            raise ApplicationError(f"{len(unsupported)} quoted sentences are not verbatim in their sources: "
                                   f"{unsupported[0][:200]!r}", type="CitationCheckFailed", non_retryable=True)
        return GenerateOutput(report_markdown=markdown[:MAX_REPORT_CHARS], sources=sources, method="extractive",
                              citations_checked=len(cited_sentences(markdown)))

    async def _generate_llm(self, inp: GenerateInput, notes: Notes) -> GenerateOutput:
        llm = self.deps.llm
        pages = self.deps.artifacts.get_json(inp.pages_ref) if inp.pages_ref else []
        budget = TokenBudget(limit=llm.token_budget, spent=inp.tokens_spent)
        written = ""

        def on_delta(delta: str) -> None:
            nonlocal written
            written += delta
            activity.heartbeat({"text": written[-MAX_STREAM_HEARTBEAT_CHARS:]})

        try:
            async with LLMClient(llm) as client:
                report = await generate_llm(client, inp.question, notes, inp.fallbacks, inp.mode, budget, on_delta,
                                            candidates=llm.candidates(inp.mode),
                                            source_texts={p["url"]: p["text"] for p in pages} or None)
        except (BudgetExhausted, LLMError, ValueError) as exc:
            activity_logger().warning("LLM report failed", error=str(exc)[:300], written=len(written))
            raise _llm_failure(exc) from None
        return GenerateOutput(report_markdown=report.markdown[:MAX_REPORT_CHARS], sources=report.sources,
                              method=report.method, usage=usage_records([report.usage]),
                              citations_checked=report.citations.checked,
                              citations_unsupported=report.citations.unsupported)
