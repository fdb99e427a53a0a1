"""The seed's optional agent summary: the analyst prompt run by an agent command INSIDE the sandbox.

The prompt and system prompt are written as files into the sandbox, the agent's endpoint and token
travel in the command's environment (never in a file, an argument, the history or a log), and the
agent's output file is read back and parsed like the direct LLM summary (same JSON shape, same
rule that only input URLs may appear). Active when DR_AGENT_BASE_URL and DR_AGENT_MODEL are set.

| variable | meaning |
| --- | --- |
| `DR_AGENT_BASE_URL` | the agent's LLM endpoint (seed: a Janus router / Anthropic-compatible URL) |
| `DR_AGENT_TOKEN` | its token (passed as AGENT_TOKEN, ANTHROPIC_AUTH_TOKEN, ANTHROPIC_API_KEY) |
| `DR_AGENT_MODEL` | model name for the agent |
| `DR_AGENT_COMMAND` | shell command run in the sandbox's agent/ folder (default: the seed's `claude -p`) |
| `DR_AGENT_TIMEOUT_S` | how long the agent may run (default 600, the seed's API_TIMEOUT_MS) |
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict, SecretStr

from deep_research.llm.summarize import (
    SourceInput,
    SummaryFailed,
    SummaryParseError,
    _matched,
    _select,
    _to_notes,
    build_summary_prompt,
    parse_summary,
)
from deep_research.report.notes import Notes

AGENT_DIR = "agent"
PROMPT_FILE = f"{AGENT_DIR}/agent-prompt.txt"
SYSTEM_PROMPT_FILE = f"{AGENT_DIR}/agent-system-prompt.txt"
OUTPUT_FILE = f"{AGENT_DIR}/agent-output.txt"
SCRIPT_FILE = f"{AGENT_DIR}/run-agent.sh"

# The seed's invocation of Claude Code; any agent reading the same files and variables will do.
DEFAULT_COMMAND = ('claude -p --output-format text --no-session-persistence --model "$AGENT_MODEL" '
                   '--append-system-prompt-file "$SYSTEM_PROMPT_FILE" "$(cat "$PROMPT_FILE")" > "$OUTPUT_FILE"')


class AgentConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str
    token: SecretStr = SecretStr("")
    model: str
    command: str = DEFAULT_COMMAND
    timeout_s: float = 600.0


def load_agent_config(env: Mapping[str, str]) -> AgentConfig | None:
    base_url, model = env.get("DR_AGENT_BASE_URL", "").strip(), env.get("DR_AGENT_MODEL", "").strip()
    if not base_url or not model:
        return None
    return AgentConfig(base_url=base_url, token=SecretStr(env.get("DR_AGENT_TOKEN", "")), model=model,
                       command=env.get("DR_AGENT_COMMAND") or DEFAULT_COMMAND,
                       timeout_s=float(env.get("DR_AGENT_TIMEOUT_S", "600")))


def agent_files(question: str, sources: Sequence[SourceInput | Mapping], limit: int,
                config: AgentConfig) -> tuple[dict[str, str], list[SourceInput]]:
    """Files to write into the sandbox (path -> text) and the sources the prompt holds."""
    system, user = build_summary_prompt(question, sources, limit)
    script = f"#!/bin/sh\nset -e\ncd \"$(dirname \"$0\")/..\"\n{config.command}\n"
    return ({PROMPT_FILE: user["content"], SYSTEM_PROMPT_FILE: system["content"], SCRIPT_FILE: script},
            _select(sources, limit))


def agent_env(config: AgentConfig) -> dict[str, str]:
    """The command's environment: endpoint and token as the seed passes them to Claude Code."""
    token = config.token.get_secret_value()
    return {
        "AGENT_BASE_URL": config.base_url, "AGENT_TOKEN": token, "AGENT_MODEL": config.model,
        "ANTHROPIC_BASE_URL": config.base_url, "ANTHROPIC_AUTH_TOKEN": token, "ANTHROPIC_API_KEY": token,
        "API_TIMEOUT_MS": str(int(config.timeout_s * 1000)), "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "PROMPT_FILE": PROMPT_FILE, "SYSTEM_PROMPT_FILE": SYSTEM_PROMPT_FILE, "OUTPUT_FILE": OUTPUT_FILE,
    }


def notes_from_agent_output(question: str, text: str, selected: list[SourceInput], model: str) -> Notes:
    """Parse the agent's answer; raises SummaryFailed (no repair round: the agent ran once)."""
    try:
        summary = parse_summary(text)
        matched = _matched(summary, selected)
    except SummaryParseError as exc:
        raise SummaryFailed(f"agent output unusable: {exc}", []) from None
    notes = _to_notes(question, summary, matched, selected, model)
    return notes.model_copy(update={"method": f"agent:{model}"})
