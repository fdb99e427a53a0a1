"""LLM steps of a research (issue 4): summarize the sources, then write the cited report.

Pure library, no Temporal code. Without an OpenAI-compatible endpoint configured
(`load_llm_config` returns None) the extractive report stays the default.

- config.py: `LLMConfig` from the worker's environment (the API key is a SecretStr).
- client.py: `LLMClient` over `openai.AsyncOpenAI` (max_retries=0: Temporal is the only retry
  layer), candidate fallback on 429 before output, `Usage` with cost.
- budget.py: `TokenBudget`, carried between activities; `BudgetExhausted` before a call that cannot fit.
- summarize.py: the seed's analyst prompt, untrusted page text as delimited data, one bounded repair.
- generate.py: the seed's report structure, streamed, citations checked afterwards.
- citations.py: deterministic lexical check of every `[n]` citation.
"""

from deep_research.llm.budget import BudgetExhausted, TokenBudget
from deep_research.llm.citations import CitationReport, check_citations
from deep_research.llm.client import Completion, LLMClient, LLMError, LLMStreamInterrupted, Usage
from deep_research.llm.config import LLMConfig, ModelPrice, load_llm_config
from deep_research.llm.generate import GeneratedReport, build_report_prompt, generate_llm
from deep_research.llm.summarize import (
    LLMSummary, SourceInput, SummaryFailed, build_summary_prompt, parse_summary, source_inputs, summarize_llm,
)

__all__ = [
    "BudgetExhausted", "CitationReport", "Completion", "GeneratedReport", "LLMClient", "LLMConfig",
    "LLMError", "LLMStreamInterrupted", "LLMSummary", "ModelPrice", "SourceInput", "SummaryFailed",
    "TokenBudget", "Usage", "build_report_prompt", "build_summary_prompt", "check_citations",
    "generate_llm", "load_llm_config", "parse_summary", "source_inputs", "summarize_llm",
]
