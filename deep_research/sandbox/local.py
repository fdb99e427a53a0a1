"""Local sandbox provider: one workspace directory per sandbox, commands under bubblewrap.

Layout: `<root>/<id>/workspace` (the only writable place for commands) and `<root>/<id>/state.json`
(written atomically). Everything needed to find a sandbox and its background processes again lives
on disk, so a restarted worker (a new LocalSandbox over the same root) carries on where the old one
stopped. Background processes are remembered by pid, process group and kernel start time (field 22
of /proc/<pid>/stat) so a reused pid is never mistaken for ours.

Under bubblewrap the host is mounted read-only, /tmp and /dev/shm are private, the workspace is
bound at its own absolute path, and pid/ipc namespaces are unshared (the network is not: the crawler
fetches pages from loopback servers). Without bwrap commands run as plain subprocesses (no
isolation; a warning is logged). Commands get a minimal environment, not the worker's (which holds
API keys): PATH, locale, HOME=workspace, TMPDIR=/tmp, plus the `env` passed to exec.
"""

from __future__ import annotations

from collections.abc import Sequence

import asyncio
import json
import os
import secrets
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import structlog

from deep_research.sandbox.base import (
    ExecResult,
    FileEntry,
    Sandbox,
    SandboxError,
    SandboxNotFound,
    SandboxStatus,
)

log = structlog.get_logger(__name__)

OUTPUT_CAP = 1 << 20  # bytes of stdout / stderr kept per foreground command
TIMEOUT_EXIT_CODE = 124  # exit_code of a foreground command killed on timeout (as timeout(1))
TERM_GRACE_S = 1.0
_PASS_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ")


class SandboxPathError(SandboxError):
    """A path escapes the workspace (`..`, absolute path elsewhere, symlink pointing out)."""

    retryable = False


def _proc_stat(pid: int) -> tuple[str, int, int] | None:
    """(state, pgid, start time) of a process from /proc/<pid>/stat, or None if it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    fields = raw[raw.rindex(")") + 2 :].split()  # fields[0] is field 3 (state)
    return fields[0], int(fields[2]), int(fields[19])


def _is_alive(proc: dict[str, Any]) -> bool:
    st = _proc_stat(proc["pid"])
    return st is not None and st[0] not in ("Z", "X") and st[2] == proc["start_time"]


class LocalSandbox(Sandbox):
    """Sandboxes as directories on this machine; see the module docstring."""

    name = "local"

    def __init__(self, root: Path, *, use_bwrap: bool | None = None, ro_binds: Sequence[str] = ()) -> None:
        """`ro_binds`: host paths shown read-only inside even where the sandbox hides them (a
        virtualenv under /tmp, which the sandbox replaces with a private tmpfs)."""
        self.root = Path(root).resolve()
        self.ro_binds = [str(Path(p).resolve()) for p in ro_binds if Path(p).exists()]
        self.root.mkdir(parents=True, exist_ok=True)
        self._bwrap = shutil.which("bwrap")
        if use_bwrap is None:
            use_bwrap = self._bwrap is not None
            if not use_bwrap:
                log.warning("sandbox.bwrap_missing", detail="commands run WITHOUT isolation")
        elif use_bwrap and self._bwrap is None:
            raise SandboxError("use_bwrap=True but bwrap is not installed")
        self.use_bwrap = use_bwrap
        self._locks: dict[str, asyncio.Lock] = {}
        self._children: dict[int, subprocess.Popen[bytes]] = {}  # background children of ours

    # ------------------------------------------------------------------ state on disk
    def _dir(self, sandbox_id: str) -> Path:
        if not sandbox_id or "/" in sandbox_id or sandbox_id.startswith("."):
            raise SandboxNotFound(f"invalid sandbox id {sandbox_id!r}")
        return self.root / sandbox_id

    def _load(self, sandbox_id: str) -> dict[str, Any]:
        try:
            return json.loads((self._dir(sandbox_id) / "state.json").read_text())
        except FileNotFoundError:
            raise SandboxNotFound(f"sandbox {sandbox_id} not found") from None

    def _save(self, state: dict[str, Any]) -> None:
        path = self._dir(state["id"]) / "state.json"
        tmp = path.with_name(f".state.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        tmp.write_text(json.dumps(state, indent=1))
        os.replace(tmp, path)

    def _running(self, sandbox_id: str) -> dict[str, Any]:
        state = self._load(sandbox_id)
        if state["state"] != "running":
            raise SandboxNotFound(f"sandbox {sandbox_id} is terminated")
        return state

    def _lock(self, sandbox_id: str) -> asyncio.Lock:
        return self._locks.setdefault(sandbox_id, asyncio.Lock())

    def _workspace(self, sandbox_id: str) -> Path:
        return self._dir(sandbox_id) / "workspace"

    # ------------------------------------------------------------------ lifecycle
    async def create(self, *, ttl_s: int | None = None, labels: dict[str, str] | None = None) -> str:
        sandbox_id = f"lsb-{secrets.token_hex(6)}"
        self._workspace(sandbox_id).mkdir(parents=True)
        now = time.time()
        self._save({
            "id": sandbox_id,
            "created_at": now,
            "expires_at": now + ttl_s if ttl_s else None,
            "labels": dict(labels or {}),
            "state": "running",
            "processes": [],
        })
        log.info("sandbox.created", sandbox_id=sandbox_id, bwrap=self.use_bwrap, ttl_s=ttl_s)
        return sandbox_id

    async def status(self, sandbox_id: str) -> SandboxStatus:
        state = self._load(sandbox_id)
        live = sum(_is_alive(p) for p in state["processes"]) if state["state"] == "running" else 0
        return SandboxStatus(
            sandbox_id=sandbox_id,
            state=state["state"],
            created_at=state["created_at"],
            expires_at=state["expires_at"],
            workspace=str(self._workspace(sandbox_id)),
            processes=live,
        )

    async def terminate(self, sandbox_id: str) -> bool:
        """Kill all processes and remove the workspace (state.json stays, marked terminated).

        Returns True if this call terminated a running sandbox, False if the id is unknown or the
        sandbox was already terminated. Never raises for those cases; safe to call repeatedly.
        """
        try:
            self._load(sandbox_id)
        except SandboxNotFound:
            return False
        async with self._lock(sandbox_id):
            state = self._load(sandbox_id)
            was_running = state["state"] == "running"
            ws = self._workspace(sandbox_id)
            if was_running:
                await self._kill_all(state, ws)
                state["state"] = "terminated"
                state["terminated_at"] = time.time()
                self._save(state)
            if ws.exists():  # also finishes a terminate that crashed before the removal
                await asyncio.to_thread(shutil.rmtree, ws, ignore_errors=True)
        if was_running:
            log.info("sandbox.terminated", sandbox_id=sandbox_id)
        return was_running

    async def extend(self, sandbox_id: str, ttl_s: int) -> None:
        """expires_at = max(expires_at, now + ttl_s) in state.json; see Sandbox.extend."""
        async with self._lock(sandbox_id):
            state = self._running(sandbox_id)
            if state.get("expires_at") is None:
                return
            state["expires_at"] = max(state["expires_at"], time.time() + ttl_s)
            self._save(state)
        log.info("sandbox.extended", sandbox_id=sandbox_id, expires_at=state["expires_at"])

    async def reap_expired(self) -> list[str]:
        """Terminate every running sandbox whose expires_at has passed; return their ids."""
        reaped = []
        now = time.time()
        for state_file in sorted(self.root.glob("*/state.json")):
            try:
                state = json.loads(state_file.read_text())
            except (OSError, ValueError):
                continue
            expires = state.get("expires_at")
            if state.get("state") == "running" and expires is not None and expires < now:
                if await self.terminate(state["id"]):
                    reaped.append(state["id"])
        if reaped:
            log.info("sandbox.reaped_expired", sandbox_ids=reaped)
        return reaped

    async def _kill_all(self, state: dict[str, Any], ws: Path) -> None:
        groups = []
        for proc in state["processes"]:
            st = _proc_stat(proc["pid"])
            if st is not None and st[2] != proc["start_time"]:
                continue  # pid reused: our group is gone (a live pgid is never handed out again)
            groups.append(proc["pgid"])
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pgid in groups:
                _signal(os.killpg, pgid, sig)
            if sig == signal.SIGTERM and groups:
                deadline = time.monotonic() + TERM_GRACE_S
                while time.monotonic() < deadline and any(_is_alive(p) for p in state["processes"]):
                    await asyncio.sleep(0.05)
        # Backstop: anything whose working directory is inside the workspace (escaped groups).
        for _ in range(3):
            stray = [pid for pid in _pids_with_cwd_in(ws) if pid != os.getpid()]
            if not stray:
                break
            for pid in stray:
                _signal(os.kill, pid, signal.SIGKILL)
            await asyncio.sleep(0.05)
        for proc in state["processes"]:  # reap our own children so they do not linger as zombies
            child = self._children.pop(proc["pid"], None)
            if child is not None:
                child.poll()

    # ------------------------------------------------------------------ commands
    def _argv(self, ws: Path, command: str, *, foreground: bool) -> list[str]:
        if not self.use_bwrap:
            return ["/bin/sh", "-c", command]
        w = str(ws)
        argv = [self._bwrap or "bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
                "--tmpfs", "/tmp", "--tmpfs", "/dev/shm"]
        for path in self.ro_binds:
            argv += ["--ro-bind", path, path]
        argv += ["--bind", w, w, "--chdir", w, "--unshare-pid", "--unshare-ipc", "--setenv", "HOME", w]
        if foreground:
            argv.append("--die-with-parent")
        return [*argv, "/bin/sh", "-c", command]

    @staticmethod
    def _env(ws: Path, extra: dict[str, str] | None) -> dict[str, str]:
        env = {k: os.environ[k] for k in _PASS_ENV if k in os.environ}
        env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
        env.update(HOME=str(ws), TMPDIR="/tmp")
        env.update(extra or {})
        return env

    async def exec(
        self,
        sandbox_id: str,
        command: str,
        *,
        timeout_s: float = 60.0,
        background: bool = False,
        env: dict[str, str] | None = None,
    ) -> ExecResult:
        self._running(sandbox_id)
        ws = self._workspace(sandbox_id)
        argv = self._argv(ws, command, foreground=not background)
        if background:
            return await self._exec_background(sandbox_id, ws, argv, self._env(ws, env), command)
        proc = await asyncio.create_subprocess_exec(
            *argv, cwd=ws, env=self._env(ws, env), start_new_session=True,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        out, err = bytearray(), bytearray()
        readers = [asyncio.create_task(_drain(proc.stdout, out)),
                   asyncio.create_task(_drain(proc.stderr, err))]
        timed_out = False
        try:
            # Poll the exit status: proc.wait() would also wait for the pipes, which a leftover
            # child (`sleep 100 &`) keeps open.
            deadline = time.monotonic() + timeout_s
            delay = 0.005
            while proc.returncode is None:
                if time.monotonic() >= deadline:
                    timed_out = True
                    break
                await asyncio.sleep(min(delay, max(deadline - time.monotonic(), 0)))
                delay = min(delay * 2, 0.05)
        finally:
            # On timeout/cancellation, and for leftovers of a finished command (as bwrap's pid
            # namespace would): kill the whole group. Its id cannot be reused while members live.
            _signal(os.killpg, proc.pid, signal.SIGKILL)
            waiter = asyncio.ensure_future(proc.wait())
            _, pending = await asyncio.wait([*readers, waiter], timeout=2.0)
            for task in pending:
                task.cancel()
        code = TIMEOUT_EXIT_CODE if timed_out else proc.returncode
        return ExecResult(exit_code=code, timed_out=timed_out,
                          stdout=out.decode(errors="replace"), stderr=err.decode(errors="replace"))

    async def _exec_background(
        self, sandbox_id: str, ws: Path, argv: list[str], env: dict[str, str], command: str
    ) -> ExecResult:
        async with self._lock(sandbox_id):
            state = self._running(sandbox_id)
            proc = subprocess.Popen(
                argv, cwd=ws, env=env, start_new_session=True, close_fds=True,
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )
            self._children[proc.pid] = proc
            st = _proc_stat(proc.pid)
            state["processes"].append({
                "pid": proc.pid,
                "pgid": proc.pid,  # start_new_session: the command leads its own group
                "start_time": st[2] if st else 0,
                "command": command,
                "started_at": time.time(),
            })
            self._save(state)
        log.info("sandbox.background_started", sandbox_id=sandbox_id, pid=proc.pid)
        return ExecResult(exit_code=0, pid=proc.pid)

    # ------------------------------------------------------------------ files
    def _path(self, sandbox_id: str, path: str) -> Path:
        self._running(sandbox_id)
        ws = self._workspace(sandbox_id).resolve()
        target = (ws / path).resolve()  # absolute `path` replaces ws; symlinks are followed
        if not target.is_relative_to(ws):
            raise SandboxPathError(f"path {path!r} is outside the workspace")
        return target

    async def write_file(self, sandbox_id: str, path: str, content: bytes | str) -> None:
        target = self._path(sandbox_id, path)
        if target == self._workspace(sandbox_id).resolve():
            raise SandboxPathError("cannot write to the workspace directory itself")
        data = content.encode() if isinstance(content, str) else content
        target.parent.mkdir(parents=True, exist_ok=True)
        await asyncio.to_thread(target.write_bytes, data)

    async def read_file(self, sandbox_id: str, path: str) -> bytes:
        target = self._path(sandbox_id, path)
        try:
            return await asyncio.to_thread(target.read_bytes)
        except (FileNotFoundError, IsADirectoryError) as exc:
            raise SandboxPathError(f"cannot read {path!r}: {exc.strerror}") from None

    async def list_files(self, sandbox_id: str, path: str = ".") -> list[FileEntry]:
        base = self._path(sandbox_id, path)
        if not base.is_dir():
            raise SandboxPathError(f"{path!r} is not a directory")
        entries = []
        for dirpath, dirnames, filenames in os.walk(base):  # does not descend into symlinked dirs
            for name in sorted(dirnames) + sorted(filenames):
                full = Path(dirpath) / name
                is_dir = full.is_dir() and not full.is_symlink()
                size = 0 if is_dir else full.lstat().st_size
                entries.append(FileEntry(path=str(full.relative_to(base)), size=size, is_dir=is_dir))
        return sorted(entries, key=lambda e: e.path)


async def _drain(stream: asyncio.StreamReader | None, buf: bytearray) -> None:
    """Read a stream to EOF, keeping at most OUTPUT_CAP bytes (the rest is discarded)."""
    if stream is None:
        return
    while chunk := await stream.read(65536):
        if len(buf) < OUTPUT_CAP:
            buf.extend(chunk[: OUTPUT_CAP - len(buf)])


def _signal(kill: Any, target: int, sig: int) -> None:
    """os.kill / os.killpg, ignoring targets that are already gone."""
    try:
        kill(target, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _pids_with_cwd_in(ws: Path) -> list[int]:
    found = []
    prefix = str(ws)
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            cwd = os.readlink(f"/proc/{entry.name}/cwd")
        except OSError:
            continue
        if cwd == prefix or cwd.startswith(prefix + "/"):
            found.append(int(entry.name))
    return found
