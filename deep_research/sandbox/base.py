"""The sandbox interface every provider implements (local today, remote Sandy API next).

Mirrors the Sandy API of seed 000: create, status, exec, write/read/list files, terminate.
Errors are typed so activities can tell Temporal what is worth retrying.
"""

from __future__ import annotations

import abc
from typing import Literal

from pydantic import BaseModel


class SandboxError(Exception):
    """A sandbox operation failed; `retryable` says whether trying again can help."""

    retryable: bool = True


class SandboxNotFound(SandboxError):
    """The sandbox does not exist (never created, or terminated and removed)."""

    retryable = False


class SandboxUnavailable(SandboxError):
    """The sandbox exists but cannot serve yet (still starting, 502/503/429 from a remote API)."""

    retryable = True


class ExecResult(BaseModel):
    exit_code: int
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    pid: int | None = None  # set for background commands


class SandboxStatus(BaseModel):
    sandbox_id: str
    state: Literal["running", "terminated"]
    created_at: float
    expires_at: float | None = None
    workspace: str  # absolute path of the workspace inside the sandbox
    processes: int = 0  # live processes started by exec(background=True)


class FileEntry(BaseModel):
    path: str  # relative to the listed directory
    size: int
    is_dir: bool


class Sandbox(abc.ABC):
    """A place to run untrusted work: one workspace, commands, files, and a guaranteed end."""

    name: str = "abstract"

    @abc.abstractmethod
    async def create(self, *, ttl_s: int | None = None, labels: dict[str, str] | None = None) -> str:
        """Create a sandbox and return its id."""

    @abc.abstractmethod
    async def status(self, sandbox_id: str) -> SandboxStatus:
        """Raise SandboxNotFound if unknown or removed."""

    @abc.abstractmethod
    async def exec(
        self,
        sandbox_id: str,
        command: str,
        *,
        timeout_s: float = 60.0,
        background: bool = False,
        env: dict[str, str] | None = None,
    ) -> ExecResult:
        """Run a shell command in the workspace.

        Foreground: wait up to timeout_s, kill the command's whole process group on timeout and
        return timed_out=True. Background: start it detached (it outlives this call and the worker)
        and return at once with its pid; terminate() still kills it.
        """

    @abc.abstractmethod
    async def write_file(self, sandbox_id: str, path: str, content: bytes | str) -> None:
        """Write a file; a relative path is relative to the workspace."""

    @abc.abstractmethod
    async def read_file(self, sandbox_id: str, path: str) -> bytes:
        """Read a file; a relative path is relative to the workspace."""

    @abc.abstractmethod
    async def list_files(self, sandbox_id: str, path: str = ".") -> list[FileEntry]:
        """List a directory recursively."""

    @abc.abstractmethod
    async def terminate(self, sandbox_id: str) -> bool:
        """Kill every process of the sandbox and remove it. True if it existed. Idempotent."""

    async def extend(self, sandbox_id: str, ttl_s: int) -> None:
        """Move the sandbox's expiry (its server-side backstop) to at least now + ttl_s.

        Idempotent (safe under Temporal retries): the expiry becomes max(current expiry,
        now + ttl_s), so it is never shortened; a sandbox created without an expiry keeps none.
        Raises SandboxNotFound if the sandbox is unknown or terminated. The default does nothing:
        for a provider without expiries there is nothing to move.
        """
        return None
