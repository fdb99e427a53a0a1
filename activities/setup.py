"""Setup steps inside the sandbox: the crawler runtime, the browser, and the seed's fallback install.

Preinstalled first (the worker-configured interpreter and system Chromium), then the fallback of
seed 000: system deps with apt-get (3 tries 20 s apart, by Temporal's APT_RETRY), Playwright's own
Chromium in the workspace, and a second launch test.
"""

from __future__ import annotations

import asyncio
import json
import shlex
from pathlib import Path

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.deps import Deps, sandbox_errors
from deep_research.logging import activity_logger
from deep_research.models import CRAWL_DIR, InstallOutput, SandboxInput, VerifyInput, VerifyOutput
from deep_research.sandbox.base import ExecResult

CRAWLER_SOURCE = Path(__file__).resolve().parent.parent / "deep_research" / "crawler" / "crawler.py"
CRAWLER_PATH = f"{CRAWL_DIR}/crawler.py"
RUNTIME_MODULES = "playwright, trafilatura"
LOCAL_VENV = ".crawler-venv"
LOCAL_BROWSERS = "ms-playwright"
# Seed 000: system dependencies of Chromium.
APT_PACKAGES = ("libnss3 libnspr4 libdbus-1-3 libatk1.0-0 libatk-bridge2.0-0 libcups2 libdrm2 libxkbcommon0 "
                "libatspi2.0-0 libxcomposite1 libxdamage1 libxfixes3 libxrandr2 libgbm1 libasound2")


async def exec_with_heartbeat(deps: Deps, sandbox_id: str, command: str, *, timeout_s: float,
                              env: dict[str, str] | None = None) -> ExecResult:
    """A long exec, heartbeating every second: Temporal sees it alive and can deliver a cancel."""
    task = asyncio.create_task(deps.sandbox.exec(sandbox_id, command, timeout_s=timeout_s, env=env))
    while True:
        done, _ = await asyncio.wait({task}, timeout=1)
        if done:
            return task.result()
        activity.heartbeat(command[:80])


class SetupActivities:
    def __init__(self, deps: Deps) -> None:
        self.deps = deps

    async def _workspace(self, sandbox_id: str) -> str:
        return (await self.deps.sandbox.status(sandbox_id)).workspace

    @activity.defn(name="install_runtime")
    async def install_runtime(self, inp: SandboxInput) -> InstallOutput:
        """The crawler's Python runtime: preinstalled interpreter first, else a venv in the workspace."""
        log = activity_logger()
        python = self.deps.settings.sandbox_python
        check = f"{shlex.quote(python)} -c {shlex.quote('import ' + RUNTIME_MODULES)}"
        with sandbox_errors():
            await self.deps.sandbox.write_file(inp.sandbox_id, CRAWLER_PATH, CRAWLER_SOURCE.read_bytes())
            result = await self.deps.sandbox.exec(inp.sandbox_id, check, timeout_s=60)
            if result.exit_code == 0:
                return InstallOutput(python=python, method="preinstalled")
            log.warning("preinstalled runtime unusable; installing", stderr=result.stderr[-300:])
            workspace = await self._workspace(inp.sandbox_id)
            venv_python = f"{workspace}/{LOCAL_VENV}/bin/python"
            install = (f"python3 -m venv {LOCAL_VENV} && {LOCAL_VENV}/bin/pip install -q playwright trafilatura lxml_html_clean"
                       f" && {shlex.quote(venv_python)} -c {shlex.quote('import ' + RUNTIME_MODULES)}")
            result = await exec_with_heartbeat(self.deps, inp.sandbox_id, install, timeout_s=540)
        if result.exit_code != 0:
            # pip failing in a fresh venv fails again: the workflow's snippet fallback decides.
            raise ApplicationError(f"crawler runtime install failed ({result.exit_code}): {result.stderr[-500:]}",
                                   type="InstallFailed", non_retryable=True)
        return InstallOutput(python=venv_python, method="installed")

    @activity.defn(name="verify_browser")
    async def verify_browser(self, inp: VerifyInput) -> VerifyOutput:
        """Launch the browser once inside the sandbox (the seed's 'Verifying' state)."""
        executable = "" if inp.use_local_install else self.deps.settings.chromium
        command = f"{shlex.quote(inp.python)} {CRAWLER_PATH} --verify"
        env = None
        if executable:
            command += f" --executable {shlex.quote(executable)}"
        with sandbox_errors():
            if inp.use_local_install:
                env = {"PLAYWRIGHT_BROWSERS_PATH": f"{await self._workspace(inp.sandbox_id)}/{LOCAL_BROWSERS}"}
            result = await self.deps.sandbox.exec(inp.sandbox_id, command, timeout_s=75, env=env)
        verdict = _verify_line(result.stdout)
        if result.exit_code != 0 or not verdict.get("ok"):
            reason = verdict.get("error") or result.stderr[-500:] or f"exit {result.exit_code}"
            # A browser that cannot launch will not launch on a retry: the workflow's fallback decides.
            raise ApplicationError(f"browser launch failed: {reason}", type="BrowserLaunchFailed", non_retryable=True)
        activity_logger().info("browser launched", executable=executable, version=verdict.get("version"))
        return VerifyOutput(executable=executable, method="local-install" if inp.use_local_install else "preinstalled")

    @activity.defn(name="install_system_deps")
    async def install_system_deps(self, inp: SandboxInput) -> None:
        """apt-get the browser's system deps; dpkg lock contention is retried by APT_RETRY."""
        command = f"DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends {APT_PACKAGES}"
        with sandbox_errors():
            result = await exec_with_heartbeat(self.deps, inp.sandbox_id, command, timeout_s=540)
        if result.exit_code == 0:
            return
        output = result.stdout[-300:] + result.stderr[-500:]
        if "Could not get lock" in output or "dpkg was interrupted" in output:
            raise ApplicationError(f"apt-get busy: {output}", type="AptLocked")
        # Read-only host, not root, no apt: retrying cannot help.
        raise ApplicationError(f"apt-get failed ({result.exit_code}): {output}", type="InstallImpossible",
                               non_retryable=True)

    @activity.defn(name="install_browser")
    async def install_browser(self, inp: VerifyInput) -> None:
        """Playwright's own Chromium, into the workspace."""
        with sandbox_errors():
            workspace = await self._workspace(inp.sandbox_id)
            env = {"PLAYWRIGHT_BROWSERS_PATH": f"{workspace}/{LOCAL_BROWSERS}"}
            result = await exec_with_heartbeat(self.deps, inp.sandbox_id,
                                               f"{shlex.quote(inp.python)} -m playwright install chromium",
                                               timeout_s=540, env=env)
        if result.exit_code != 0:
            raise ApplicationError(f"playwright install chromium failed: {result.stderr[-500:]}",
                                   type="InstallFailed", non_retryable=True)


def _verify_line(stdout: str) -> dict:
    for line in stdout.splitlines():
        if line.startswith("__VERIFY__"):
            try:
                return json.loads(line[len("__VERIFY__"):])
            except json.JSONDecodeError:
                return {}
    return {}
