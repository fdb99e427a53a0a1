"""Start a research worker: `python worker.py` (settings from the environment, see README)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from typing import Callable, Sequence

import structlog
from temporalio.client import Client
from temporalio.worker import Worker
from datetime import timedelta

from activities import all_activities
from activities.deps import Deps
from deep_research.artifacts import ArtifactStore
from deep_research.config import Settings, load_settings
from deep_research.llm import load_llm_config
from deep_research.llm.agent import load_agent_config
from deep_research.logging import configure_logging
from deep_research.sandbox.base import Sandbox
from deep_research.search.base import SearchProvider
from deep_research.temporal_client import connect
from workflows.research import ResearchWorkflow

log = structlog.get_logger("worker")
HEARTBEAT_THROTTLE = timedelta(seconds=1)


class ConfigurationError(Exception):
    retryable = False


def make_sandbox(settings: Settings) -> Sandbox:
    if settings.sandbox_provider == "local":
        from deep_research.sandbox.local import LocalSandbox

        # The crawler runs on the worker's own interpreter: keep its environment visible inside.
        return LocalSandbox(settings.sandbox_root, ro_binds=[sys.prefix])
    if settings.sandbox_provider == "sandy":
        from deep_research.sandbox.sandy import SandySandbox

        # Remote sandboxes (deep_research/sandbox/server.py or any Sandy API); the client never
        # retries, Temporal's policies do. DR_SANDBOX_PYTHON must name the interpreter on that host.
        for var, value in (("SANDY_BASE_URL", settings.sandy_base_url), ("SANDY_API_KEY", settings.sandy_api_key)):
            if not value:
                raise ConfigurationError(f"DR_SANDBOX_PROVIDER=sandy needs {var} in the worker's environment")
        return SandySandbox(settings.sandy_base_url, settings.sandy_api_key)
    raise ConfigurationError(f"unknown sandbox provider {settings.sandbox_provider!r} (known: local, sandy)")


def make_search_factory(settings: Settings) -> Callable[[str | None], SearchProvider]:
    """Providers by name from the registry / dynamic loader of deep_research.search.factory."""
    from deep_research.search.factory import make_search_factory as registry_factory

    return registry_factory(settings)


def build_deps(settings: Settings) -> Deps:
    return Deps(
        settings=settings,
        sandbox=make_sandbox(settings),
        artifacts=ArtifactStore(settings.artifact_dir),
        search_provider=make_search_factory(settings),
        llm=load_llm_config(os.environ),
        agent=load_agent_config(os.environ),
    )


def build_worker(client: Client, settings: Settings, *, deps: Deps | None = None,
                 activities: Sequence[Callable] | None = None, task_queue: str | None = None) -> Worker:
    """The one worker definition, shared by production and tests (tests may swap activities)."""
    if activities is None:
        activities = all_activities(deps or build_deps(settings))
    return Worker(
        client,
        task_queue=task_queue or settings.task_queue,
        workflows=[ResearchWorkflow],
        activities=list(activities),
        # Heartbeats are how a running activity learns it was cancelled; the SDK's default throttle
        # (30 s without a heartbeat timeout) would leave a cancelled step running that long.
        default_heartbeat_throttle_interval=HEARTBEAT_THROTTLE,
        max_heartbeat_throttle_interval=HEARTBEAT_THROTTLE,
    )


async def main() -> None:
    configure_logging()
    settings = load_settings()
    deps = build_deps(settings)
    reap = getattr(deps.sandbox, "reap_expired", None)
    if reap is not None:
        expired = await reap()
        if expired:
            log.info("expired sandboxes terminated", sandboxes=expired)
    client = await connect(settings)
    worker = build_worker(client, settings, deps=deps)
    log.info("worker started", task_queue=settings.task_queue, address=settings.temporal_address,
             sandbox=settings.sandbox_provider, search=settings.search_provider,
             llm=deps.llm.describe() if deps.llm else "not configured: extractive reports")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with worker:
        await stop.wait()
    log.info("worker stopped")


if __name__ == "__main__":
    asyncio.run(main())
