"""LLM configuration, read from the worker's environment (never from workflow inputs).

| Variable              | Meaning                                                                 |
|-----------------------|-------------------------------------------------------------------------|
| `DR_LLM_BASE_URL`     | OpenAI-compatible base URL, e.g. `https://api.example.com/v1`           |
| `DR_LLM_API_KEY`      | API key (a SecretStr: never in repr, logs, errors or workflow payloads) |
| `DR_LLM_MODELS`       | comma list of model candidates, tried in order on 429                    |
| `DR_LLM_MAX_MODELS`   | comma list of high-quality candidates for max mode (default: the above) |
| `DR_LLM_PRICES`       | JSON `{"model": {"input": usd_per_1M, "output": usd_per_1M}}`           |
| `DR_LLM_TOKEN_BUDGET` | tokens (prompt + completion) per research, default 200000               |
| `DR_LLM_TIMEOUT_S`    | per-request timeout in seconds, default 120                             |

No base URL or no model: the LLM is not configured (`load_llm_config` returns None) and the
extractive report is used.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError

DEFAULT_TOKEN_BUDGET = 200_000
DEFAULT_TIMEOUT_S = 120.0


class ModelPrice(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    input: float = Field(default=0.0, ge=0)  # USD per 1M prompt tokens
    output: float = Field(default=0.0, ge=0)  # USD per 1M completion tokens


class LLMConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str
    api_key: SecretStr = SecretStr("")
    models: list[str] = Field(min_length=1)
    max_models: list[str] = Field(default_factory=list)  # empty: same as `models`
    prices: dict[str, ModelPrice] = Field(default_factory=dict)
    token_budget: int = Field(default=DEFAULT_TOKEN_BUDGET, gt=0)
    timeout_s: float = Field(default=DEFAULT_TIMEOUT_S, gt=0)

    def candidates(self, mode: str = "light") -> list[str]:
        """Model candidates in order for a research mode ("max" uses the high-quality list)."""
        return list(self.max_models or self.models) if mode == "max" else list(self.models)

    def price(self, model: str) -> ModelPrice:
        return self.prices.get(model, ModelPrice())

    def cost_usd(self, model: str, prompt_tokens: int, completion_tokens: int) -> float:
        price = self.price(model)
        return round((prompt_tokens * price.input + completion_tokens * price.output) / 1_000_000, 8)

    def describe(self) -> str:
        """A loggable one-line description (no key, only whether one is set)."""
        return (f"base_url={self.base_url} models={','.join(self.models)} "
                f"max_models={','.join(self.candidates('max'))} key={'set' if self.api_key.get_secret_value() else 'unset'} "
                f"budget={self.token_budget} timeout_s={self.timeout_s}")


def _split(value: str | None) -> list[str]:
    return list(dict.fromkeys(m.strip() for m in (value or "").split(",") if m.strip()))


def load_llm_config(env: Mapping[str, str] | None = None) -> LLMConfig | None:
    """The LLM configuration from `env` (default os.environ), or None when no LLM is configured.

    Raises ValueError naming the variable (never its value) when a variable is malformed.
    """
    env = os.environ if env is None else env
    base_url = (env.get("DR_LLM_BASE_URL") or "").strip().rstrip("/")
    models = _split(env.get("DR_LLM_MODELS"))
    if not base_url or not models:
        return None
    if not base_url.startswith(("http://", "https://")):
        raise ValueError("DR_LLM_BASE_URL must start with http:// or https://")
    try:
        prices_raw = json.loads(env.get("DR_LLM_PRICES") or "{}")
    except json.JSONDecodeError as exc:
        raise ValueError(f"DR_LLM_PRICES is not valid JSON ({exc.msg})") from None
    try:
        return LLMConfig(
            base_url=base_url,
            api_key=SecretStr((env.get("DR_LLM_API_KEY") or "").strip()),
            models=models,
            max_models=_split(env.get("DR_LLM_MAX_MODELS")),
            prices=prices_raw,
            token_budget=int(env.get("DR_LLM_TOKEN_BUDGET") or DEFAULT_TOKEN_BUDGET),
            timeout_s=float(env.get("DR_LLM_TIMEOUT_S") or DEFAULT_TIMEOUT_S),
        )
    except ValidationError as exc:
        fields = ", ".join(".".join(str(p) for p in e["loc"]) for e in exc.errors())
        raise ValueError(f"invalid LLM configuration: {fields}") from None
    except ValueError:
        raise ValueError("DR_LLM_TOKEN_BUDGET must be an integer and DR_LLM_TIMEOUT_S a number") from None
