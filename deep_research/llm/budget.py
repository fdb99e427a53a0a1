"""Token budget per research, carried between activities (a pydantic model, small and serializable).

`check` runs *before* every LLM call: a call whose estimated prompt plus its minimum output does
not fit in what remains raises `BudgetExhausted` and no request is sent, so the LLM steps stop
cleanly (the caller falls back to the extractive path). `add` records what a call really used;
a call may overshoot a little (the server counts tokens, we estimate), the next check then stops.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pydantic import BaseModel, ConfigDict, Field

from deep_research.llm.client import Usage

# Estimated tokens per character of prompt text (the usual ~4 characters per token for English).
CHARS_PER_TOKEN = 4
MESSAGE_OVERHEAD_TOKENS = 4


class BudgetExhausted(Exception):
    """The research's token budget cannot fit the next LLM call (no request was sent)."""

    def __init__(self, needed: int, remaining: int, limit: int) -> None:
        super().__init__(f"token budget exhausted: the call needs ~{needed} tokens, "
                         f"{remaining} of {limit} remain")
        self.needed, self.remaining, self.limit = needed, remaining, limit


def estimate_tokens(text: str) -> int:
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def estimate_prompt_tokens(messages: Sequence[dict]) -> int:
    return sum(estimate_tokens(str(m.get("content") or "")) + MESSAGE_OVERHEAD_TOKENS for m in messages)


class TokenBudget(BaseModel):
    model_config = ConfigDict(extra="forbid")

    limit: int = Field(gt=0)
    spent: int = Field(default=0, ge=0)
    cost_usd: float = 0.0
    calls: int = 0

    @property
    def remaining(self) -> int:
        return max(0, self.limit - self.spent)

    @property
    def exhausted(self) -> bool:
        return self.spent >= self.limit

    def check(self, estimated_prompt_tokens: int, min_output_tokens: int = 0) -> int:
        """Raise BudgetExhausted unless the prompt plus `min_output_tokens` fit; return the output tokens left."""
        needed = max(0, estimated_prompt_tokens) + max(0, min_output_tokens)
        if needed > self.remaining or self.exhausted:
            raise BudgetExhausted(needed, self.remaining, self.limit)
        return self.remaining - max(0, estimated_prompt_tokens)

    def add(self, usage: Usage | Iterable[Usage]) -> None:
        for u in [usage] if isinstance(usage, Usage) else usage:
            self.spent += u.prompt_tokens + u.completion_tokens
            self.cost_usd = round(self.cost_usd + u.cost_usd, 8)
            self.calls += 1
