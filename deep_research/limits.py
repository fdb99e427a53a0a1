"""Research limits: the seed's mode table scaled by the optimisation table, as one pure function.

Seed 000 ("Deep Research Modes"): light/max base values, then a scale factor per optimisation
(count scale, duration scale, chars scale). Counts are rounded half-up and never drop below 1;
the crawl depth is a structural choice (seed pages only vs follow links) and is not scaled.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

Mode = Literal["light", "max"]
Optimization = Literal["speed", "balanced", "quality"]

MODES: tuple[str, ...] = ("light", "max")
OPTIMIZATIONS: tuple[str, ...] = ("speed", "balanced", "quality")


class ResearchLimits(BaseModel):
    model_config = ConfigDict(frozen=True)

    max_sources: int
    max_chars_per_source: int
    max_duration_s: int
    max_pages: int
    max_depth: int
    max_links_per_page: int
    max_pages_per_host: int
    related_queries: int
    summary_source_limit: int


# Seed table "Deep Research Modes" (duration in minutes).
_BASE: dict[str, dict[str, int]] = {
    "light": dict(max_sources=10, max_chars_per_source=8_000, max_duration_min=12, max_pages=22,
                  max_depth=1, max_links_per_page=8, max_pages_per_host=4, related_queries=1,
                  summary_source_limit=12),
    "max": dict(max_sources=18, max_chars_per_source=12_000, max_duration_min=18, max_pages=48,
                max_depth=2, max_links_per_page=12, max_pages_per_host=8, related_queries=3,
                summary_source_limit=20),
}

# Seed table "optimization mode": (count scale, duration scale, chars scale).
_SCALE: dict[str, tuple[float, float, float]] = {
    "speed": (0.7, 0.7, 0.8),
    "balanced": (0.85, 0.9, 1.0),
    "quality": (1.0, 1.1, 1.1),
}


def _scaled(value: int, factor: float) -> int:
    return max(1, int(value * factor + 0.5))


def compute_limits(mode: str, optimization: str) -> ResearchLimits:
    """Every limit of a research, from the mode and the optimisation. Raises ValueError on unknown names."""
    if mode not in _BASE:
        raise ValueError(f"unknown mode {mode!r}: expected one of {', '.join(MODES)}")
    if optimization not in _SCALE:
        raise ValueError(f"unknown optimization {optimization!r}: expected one of {', '.join(OPTIMIZATIONS)}")
    base = _BASE[mode]
    count, duration, chars = _SCALE[optimization]
    return ResearchLimits(
        max_sources=_scaled(base["max_sources"], count),
        max_chars_per_source=_scaled(base["max_chars_per_source"], chars),
        max_duration_s=_scaled(base["max_duration_min"] * 60, duration),
        max_pages=_scaled(base["max_pages"], count),
        max_depth=base["max_depth"],
        max_links_per_page=_scaled(base["max_links_per_page"], count),
        max_pages_per_host=_scaled(base["max_pages_per_host"], count),
        related_queries=_scaled(base["related_queries"], count),
        summary_source_limit=_scaled(base["summary_source_limit"], count),
    )
