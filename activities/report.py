"""Summarize and generate steps. Without an LLM configured both are extractive and say so.

The LLM path (its own issue) plugs in here: `allow_llm` and a configured endpoint select it, and a
failure falls back to the extractive path in the workflow.
"""

from __future__ import annotations

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.deps import Deps
from deep_research.logging import activity_logger
from deep_research.models import GenerateInput, GenerateOutput, SummarizeInput, SummarizeOutput
from deep_research.report.extractive import render_report, summarize_extractive, verify_citations
from deep_research.report.notes import Notes, notes_source_texts

MAX_REPORT_CHARS = 200_000  # a report is text for a person; this bounds the workflow payload


class ReportActivities:
    def __init__(self, deps: Deps) -> None:
        self.deps = deps

    @activity.defn(name="summarize")
    async def summarize(self, inp: SummarizeInput) -> SummarizeOutput:
        pages = self.deps.artifacts.get_json(inp.pages_ref) if inp.pages_ref else []
        notes = summarize_extractive(inp.question, pages, inp.hits, inp.source_limit)
        ref = self.deps.artifacts.put_json(f"{inp.workflow_id}/notes.json", notes.model_dump())
        activity_logger().info("notes written", sources=len(notes.sources), method=notes.method)
        return SummarizeOutput(notes_ref=ref, method=notes.method, sources=len(notes.sources))

    @activity.defn(name="generate_report")
    async def generate_report(self, inp: GenerateInput) -> GenerateOutput:
        notes = Notes.model_validate(self.deps.artifacts.get_json(inp.notes_ref))
        markdown, sources = render_report(inp.question, notes, inp.fallbacks, inp.mode)
        # The extractive guarantee, checked on every report: each quote is verbatim in its source.
        unsupported = verify_citations(markdown, notes_source_texts(notes))
        if unsupported:
            raise ApplicationError(f"{len(unsupported)} quoted sentences are not verbatim in their sources: "
                                   f"{unsupported[0][:200]!r}", type="CitationCheckFailed", non_retryable=True)
        self.deps.artifacts.put_json(f"{inp.workflow_id}/report.json",
                                     {"markdown": markdown, "sources": [s.model_dump() for s in sources]})
        activity_logger().info("report written", sources=len(sources), chars=len(markdown))
        return GenerateOutput(report_markdown=markdown[:MAX_REPORT_CHARS], sources=sources, method="extractive")
