"""Sandbox lifecycle steps: create, warmup check, terminate."""

from __future__ import annotations

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.deps import Deps, sandbox_errors
from deep_research.logging import activity_logger
from deep_research.models import (
    CreateSandboxInput,
    CreateSandboxOutput,
    ExtendSandboxInput,
    SandboxInput,
    TerminateOutput,
)


class SandboxLifecycleActivities:
    def __init__(self, deps: Deps) -> None:
        self.deps = deps

    @activity.defn(name="create_sandbox")
    async def create_sandbox(self, inp: CreateSandboxInput) -> CreateSandboxOutput:
        with sandbox_errors():
            sandbox_id = await self.deps.sandbox.create(ttl_s=inp.ttl_s, labels={"workflow_id": inp.workflow_id})
        activity_logger().info("sandbox created", sandbox_id=sandbox_id, provider=self.deps.sandbox.name)
        return CreateSandboxOutput(sandbox_id=sandbox_id, provider=self.deps.sandbox.name)

    @activity.defn(name="warmup_sandbox")
    async def warmup_sandbox(self, inp: SandboxInput) -> None:
        """One warmup attempt: the sandbox reports running and runs `true`."""
        with sandbox_errors():
            status = await self.deps.sandbox.status(inp.sandbox_id)
            if status.state == "terminated":
                raise ApplicationError(f"sandbox {inp.sandbox_id} is terminated", type="SandboxNotFound",
                                       non_retryable=True)
            if status.state != "running":  # still starting: the next warmup attempt may find it ready
                raise ApplicationError(f"sandbox {inp.sandbox_id} is {status.state}", type="SandboxUnavailable")
            result = await self.deps.sandbox.exec(inp.sandbox_id, "true", timeout_s=20)
        if result.exit_code != 0:
            raise ApplicationError(f"exec 'true' exited {result.exit_code}: {result.stderr[:300]}",
                                   type="SandboxUnavailable")

    @activity.defn(name="extend_sandbox")
    async def extend_sandbox(self, inp: ExtendSandboxInput) -> None:
        """Move the sandbox's server-side expiry after the research's deadline was extended."""
        with sandbox_errors():
            await self.deps.sandbox.extend(inp.sandbox_id, inp.ttl_s)
        activity_logger().info("sandbox expiry extended", sandbox_id=inp.sandbox_id, ttl_s=inp.ttl_s)

    @activity.defn(name="terminate_sandbox")
    async def terminate_sandbox(self, inp: SandboxInput) -> TerminateOutput:
        with sandbox_errors():
            existed = await self.deps.sandbox.terminate(inp.sandbox_id)
        activity_logger().info("sandbox terminated", sandbox_id=inp.sandbox_id, existed=existed)
        return TerminateOutput(terminated=True, detail="terminated" if existed else "already gone")
