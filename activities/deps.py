"""What activities need from the worker: built once in worker.build_worker, shared by tests."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from temporalio.exceptions import ApplicationError

from deep_research.artifacts import ArtifactStore
from deep_research.config import Settings
from deep_research.llm import LLMConfig
from deep_research.llm.agent import AgentConfig
from deep_research.models import LLMUsage
from deep_research.sandbox.base import Sandbox, SandboxError
from deep_research.search.base import SearchError, SearchProvider


@dataclass
class Deps:
    settings: Settings
    sandbox: Sandbox
    artifacts: ArtifactStore
    # Provider by name (None = the configured default); raises ConfigurationError-typed errors.
    search_provider: Callable[[str | None], SearchProvider]
    # The OpenAI-compatible endpoint, or None: the extractive report (see deep_research/llm/config.py).
    llm: LLMConfig | None = None
    # The optional agent that summarizes inside the sandbox (deep_research/llm/agent.py), or None.
    agent: AgentConfig | None = None


def to_application_error(exc: Exception) -> ApplicationError:
    """Typed error for Temporal: the type is the exception class, retryable as the error says."""
    retryable = getattr(exc, "retryable", True)
    return ApplicationError(f"{type(exc).__name__}: {exc}", type=type(exc).__name__, non_retryable=not retryable)


def usage_records(usages) -> list[LLMUsage]:
    """The LLM library's Usage objects as the workflow's LLMUsage records."""
    return [LLMUsage(step=u.step, model=u.model, prompt_tokens=u.prompt_tokens,
                     completion_tokens=u.completion_tokens, cost_usd=u.cost_usd, estimated=u.estimated)
            for u in usages]


class sandbox_errors:
    """`with sandbox_errors():` turns sandbox/search errors into typed ApplicationErrors."""

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc is not None and isinstance(exc, (SandboxError, SearchError)):
            raise to_application_error(exc) from exc
        return False
