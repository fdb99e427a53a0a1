"""The optional agent summary inside the sandbox (seed 000), with a stand-in agent script.

The stand-in plays the agent installed in the sandbox image: it reads the prompt files, checks the
endpoint and token arrived in its environment, and writes the seed's JSON shape to the output file.
"""

from __future__ import annotations

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.deps import Deps
from activities.report import ReportActivities
from deep_research.artifacts import ArtifactStore
from deep_research.config import Settings
from deep_research.llm.agent import load_agent_config
from deep_research.models import SummarizeInput
from deep_research.sandbox.local import LocalSandbox
from deep_research.report.notes import Notes

STANDIN_AGENT = r'''
import json, os, re, sys
prompt = open(os.environ["PROMPT_FILE"]).read()
system = open(os.environ["SYSTEM_PROMPT_FILE"]).read()
assert "research analyst" in system and os.environ["AGENT_TOKEN"] == "agent-secret"
assert os.environ["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9/agent"
urls = re.findall(r'"url": "([^"]+)"', prompt)
mode = sys.argv[1] if len(sys.argv) > 1 else "ok"
if mode == "fail":
    sys.exit(3)
out = {"sources": [{"title": "t", "url": u, "summary": "agent summary of " + u, "keyPoints": ["point"]}
                   for u in urls] + [{"title": "x", "url": "http://evil.example/", "summary": "s", "keyPoints": []}],
       "overallInsights": ["insight"]}
open(os.environ["OUTPUT_FILE"], "w").write("garbage" if mode == "garbage" else json.dumps(out))
'''

PAGES = [{"url": f"http://127.0.0.3/p{i}.html", "title": f"P{i}",
          "text": f"Page {i} explains how the global interpreter lock protects interpreter state. " * 5}
         for i in range(3)]


async def _summarize(tmp_path, mode: str) -> Notes:
    sandbox = LocalSandbox(tmp_path / "sb")
    sid = await sandbox.create()
    try:
        await sandbox.write_file(sid, "standin_agent.py", STANDIN_AGENT)  # the agent in the sandbox image
        agent = load_agent_config({"DR_AGENT_BASE_URL": "http://127.0.0.1:9/agent", "DR_AGENT_TOKEN": "agent-secret",
                                   "DR_AGENT_MODEL": "janus-router",
                                   "DR_AGENT_COMMAND": f"python3 standin_agent.py {mode}"})
        store = ArtifactStore(tmp_path / "artifacts")
        deps = Deps(settings=Settings(), sandbox=sandbox, artifacts=store, search_provider=lambda n: None,
                    agent=agent)
        out = await ActivityEnvironment().run(ReportActivities(deps).summarize, SummarizeInput(
            question="What is the global interpreter lock?", pages_ref=store.put_json("wf/pages.json", PAGES),
            hits=[], source_limit=2, workflow_id="wf", sandbox_id=sid))
        assert "agent-secret" not in (await sandbox.read_file(sid, "agent/run-agent.sh")).decode()
        return Notes.model_validate(store.get_json(out.notes_ref))
    finally:
        await sandbox.terminate(sid)


async def test_agent_summary_runs_in_the_sandbox(tmp_path):
    notes = await _summarize(tmp_path, "ok")
    assert notes.method == "agent:janus-router"
    assert len(notes.sources) == 2  # the summary source limit
    assert all(n.summary == f"agent summary of {n.url}" for n in notes.sources)
    assert all("evil" not in n.url for n in notes.sources)  # only input URLs survive


@pytest.mark.parametrize("mode", ["fail", "garbage"])
async def test_agent_failure_is_a_typed_non_retryable_error(tmp_path, mode):
    with pytest.raises(ApplicationError) as info:
        await _summarize(tmp_path, mode)
    assert info.value.type == "AgentSummaryFailed" and info.value.non_retryable
