"""Notes: what the analysis step hands to the report step (stored in the artifact store as JSON).

Every `key_points` entry of a note is a sentence quoted verbatim from `summary` (the note's
whitespace-collapsed source text), so the extractive report can cite it word for word.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class SourceNote(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: str
    title: str
    origin: Literal["crawl", "snippet"]
    # The raw page text or search snippet the note came from, whitespace-collapsed and bounded.
    summary: str
    # Sentences quoted verbatim from `summary`, in document order.
    key_points: list[str] = Field(default_factory=list)
    # Relevance to the question, relative to the best source (1.0 = best, 0.0 = no matching term).
    relevance: float = 0.0


class Notes(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: str
    sources: list[SourceNote] = Field(default_factory=list)  # best first
    overall_insights: list[str] = Field(default_factory=list)  # best first, verbatim
    method: str = "extractive"


def notes_source_texts(notes: Notes) -> dict[int, str]:
    """The text each report citation number [n] quotes from (n starts at 1, in `notes.sources` order)."""
    return {n: source.summary for n, source in enumerate(notes.sources, start=1)}
