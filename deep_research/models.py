"""Pydantic models: one per workflow/activity input and output.

These travel through Temporal's pydantic data converter, so they must stay small: page contents
never travel here, only references into the artifact store (see artifacts.py) and bounded text.
"""

from __future__ import annotations

from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

from deep_research.limits import Mode, Optimization, ResearchLimits

MAX_QUESTION_CHARS = 2_000
MIN_QUESTION_CHARS = 3
MAX_SEED_URLS = 20
MAX_URL_CHARS = 2_048


def validate_http_url(url: str) -> str:
    """Return the URL stripped, or raise ValueError naming what is wrong with it."""
    url = url.strip()
    if not url:
        raise ValueError("URL is empty")
    if len(url) > MAX_URL_CHARS:
        raise ValueError(f"URL is longer than {MAX_URL_CHARS} characters")
    if any(c.isspace() for c in url):
        raise ValueError(f"URL {url!r} contains whitespace")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"URL {url!r} must start with http:// or https://")
    if not parts.hostname:
        raise ValueError(f"URL {url!r} has no host")
    try:
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError as exc:
        raise ValueError(f"URL {url!r} has an invalid port") from exc
    return url


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


# --------------------------------------------------------------------------- workflow


class ResearchInput(_Model):
    question: str
    mode: Mode = "light"
    optimization: Optimization = "balanced"
    # Extra start pages crawled besides the search results (optional).
    seed_urls: list[str] = Field(default_factory=list)
    # Search provider name; None means the worker's configured default.
    search_provider: str | None = None
    # A deadline other than the mode's duration (minutes from the start); `extend` moves it later.
    duration_minutes: float | None = Field(default=None, gt=0, le=360)

    @field_validator("question")
    @classmethod
    def _question(cls, value: str) -> str:
        value = " ".join(value.split())
        if len(value) < MIN_QUESTION_CHARS:
            raise ValueError(f"question is empty or shorter than {MIN_QUESTION_CHARS} characters")
        if len(value) > MAX_QUESTION_CHARS:
            raise ValueError(f"question is longer than {MAX_QUESTION_CHARS} characters ({len(value)})")
        return value

    @field_validator("seed_urls")
    @classmethod
    def _seed_urls(cls, value: list[str]) -> list[str]:
        if len(value) > MAX_SEED_URLS:
            raise ValueError(f"at most {MAX_SEED_URLS} seed URLs, got {len(value)}")
        return [validate_http_url(u) for u in value]


StepName = Literal["search", "sandbox", "setup", "browser", "crawl", "analysis", "finalize", "cleanup"]
STEP_NAMES: tuple[StepName, ...] = (
    "search", "sandbox", "setup", "browser", "crawl", "analysis", "finalize", "cleanup",
)
STEP_LABELS: dict[str, str] = {
    "search": "Finding sources",
    "sandbox": "Preparing sandbox",
    "setup": "Installing browser",
    "browser": "Launching browser",
    "crawl": "Crawling pages",
    "analysis": "Synthesizing notes",
    "finalize": "Drafting report",
    "cleanup": "Cleaning up sandbox",
}
StepState = Literal["pending", "running", "complete", "error"]


class StepProgress(_Model):
    id: StepName
    label: str
    state: StepState = "pending"
    message: str = ""


class Progress(_Model):
    """What the `progress` query returns."""

    status: Literal["running", "completed", "cancelled", "deadline", "failed"] = "running"
    steps: list[StepProgress]
    crawl_current: int = 0
    crawl_total: int = 0
    crawl_url: str = ""
    sandbox_id: str | None = None
    deadline: str = ""  # ISO time
    fallbacks: list[str] = Field(default_factory=list)
    tokens_used: int = 0
    cost_usd: float = 0.0


class LLMUsage(_Model):
    """Tokens and cost of one LLM call (step: summarize, summarize-repair, generate)."""

    step: str
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    estimated: bool = False


class Source(_Model):
    n: int
    url: str
    title: str
    origin: Literal["crawl", "snippet"]


ResearchStatus = Literal["completed", "cancelled", "deadline"]


class ResearchResult(_Model):
    question: str
    status: ResearchStatus
    mode: Mode
    optimization: Optimization
    report_markdown: str
    report_method: str  # "extractive" or "llm:<model>"
    sources: list[Source]
    fallbacks: list[str]
    limits: ResearchLimits
    pages_crawled: int
    sandbox_id: str | None
    sandbox_terminated: bool
    cancel_reason: str | None = None
    usage: list[LLMUsage] = Field(default_factory=list)
    tokens_used: int = 0
    cost_usd: float = 0.0
    citations_checked: int = 0
    citations_unsupported: int = 0


class CancelRequest(_Model):
    reason: str = "cancelled by user"


class ExtendRequest(_Model):
    minutes: float


class ExtendResult(_Model):
    deadline: str  # ISO time


class CrawlProgressSignal(_Model):
    current: int
    total: int
    url: str = ""
    stage: str = "crawl"
    status: str = "running"


# --------------------------------------------------------------------------- search


MAX_RAW_CONTENT_CHARS = 20_000  # page text some providers return (Tavily); bounded for payloads


class SearchHit(_Model):
    url: str
    title: str
    snippet: str = ""
    score: float = 0.0
    provider: str = ""
    # Page text as the provider extracted it (optional), cut to MAX_RAW_CONTENT_CHARS.
    raw_content: str | None = None

    @field_validator("raw_content")
    @classmethod
    def _raw_content(cls, value: str | None) -> str | None:
        if value is None:
            return None
        value = value.strip()
        return value[:MAX_RAW_CONTENT_CHARS] or None


class SearchInput(_Model):
    question: str
    max_results: int
    related_queries: int
    provider: str | None = None
    mode: Mode = "light"  # picks the LLM candidates for generated related queries


class SearchOutput(_Model):
    hits: list[SearchHit]
    queries: list[str]
    provider: str
    usage: list[LLMUsage] = Field(default_factory=list)


# --------------------------------------------------------------------------- sandbox


class SandboxInput(_Model):
    sandbox_id: str


class CreateSandboxInput(_Model):
    workflow_id: str
    ttl_s: int


class ExtendSandboxInput(_Model):
    sandbox_id: str
    ttl_s: int  # new time-to-live from now


class CreateSandboxOutput(_Model):
    sandbox_id: str
    provider: str


class InstallOutput(_Model):
    python: str  # interpreter that runs the crawler inside the sandbox
    method: Literal["preinstalled", "installed"]


class VerifyInput(_Model):
    sandbox_id: str
    python: str
    use_local_install: bool = False


class VerifyOutput(_Model):
    executable: str  # browser executable that launched ("" = Playwright's own)
    method: Literal["preinstalled", "local-install"]


# Where the crawler works inside the sandbox workspace (relative paths).
CRAWL_DIR = "crawl"
CRAWL_OUTPUT = "crawl/output.json"


class CrawlInput(_Model):
    sandbox_id: str
    python: str
    executable: str
    seeds: list[SearchHit]
    limits: ResearchLimits
    workflow_id: str


class CrawlOutput(_Model):
    output_path: str
    pages: int
    timed_out: bool
    finished: bool  # crawler wrote its done marker
    attached: bool  # this attempt re-attached to a crawler already running


class CollectInput(_Model):
    sandbox_id: str
    output_path: str
    max_chars_per_source: int
    workflow_id: str


class PageMeta(_Model):
    url: str
    title: str
    chars: int


class CollectOutput(_Model):
    pages_ref: str
    pages: list[PageMeta]
    read_method: Literal["files-api", "chunked", "cat"]
    timed_out: bool


class SummarizeInput(_Model):
    question: str
    pages_ref: str | None  # None: no crawl; work from the search snippets
    hits: list[SearchHit]
    source_limit: int
    workflow_id: str
    allow_llm: bool = True  # False: the extractive path only (fallback, or after a stop)
    mode: Mode = "light"  # picks the LLM model candidates
    tokens_spent: int = 0  # of the research's LLM token budget, before this step
    sandbox_id: str | None = None  # a live sandbox: the optional agent summary runs in it


class SummarizeOutput(_Model):
    notes_ref: str
    method: str  # "extractive", "llm:<model>", "raw"
    sources: int
    usage: list[LLMUsage] = Field(default_factory=list)


class GenerateInput(_Model):
    question: str
    notes_ref: str
    fallbacks: list[str]
    mode: Mode
    workflow_id: str
    allow_llm: bool = True
    pages_ref: str | None = None  # crawled text, to check the report's citations against
    tokens_spent: int = 0


class GenerateOutput(_Model):
    report_markdown: str
    sources: list[Source]
    method: str
    usage: list[LLMUsage] = Field(default_factory=list)
    citations_checked: int = 0
    citations_unsupported: int = 0


class TerminateOutput(_Model):
    terminated: bool
    detail: str = ""
