"""Recorded workflow histories replay against today's workflow code without non-determinism errors.

The histories in tests/histories/ were recorded from real runs (the end-to-end test writes a fresh
one when DR_RECORD_HISTORIES=1). A change to the workflow that would break running researches
fails here; such a change needs workflow.patched() or a new workflow version.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from workflows.research import ResearchWorkflow

HISTORIES = sorted((Path(__file__).parent / "histories").glob("*.json"))


def test_there_are_recorded_histories():
    assert len(HISTORIES) >= 3, "record histories with DR_RECORD_HISTORIES=1 pytest tests/test_e2e.py tests/test_workflow.py"


@pytest.mark.parametrize("path", HISTORIES, ids=[p.stem for p in HISTORIES])
async def test_recorded_history_replays(path: Path):
    history = WorkflowHistory.from_json(path.stem, path.read_text())
    replayer = Replayer(workflows=[ResearchWorkflow], data_converter=pydantic_data_converter)
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, result.replay_failure
