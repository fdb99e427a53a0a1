"""LocalSandbox against real processes (no mocks): isolation, timeouts, background, re-discovery."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import sys
import time
from pathlib import Path

import pytest

# The project is not pip-installed in the venv and pytest has no `pythonpath` setting yet.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from deep_research.sandbox.base import SandboxError, SandboxNotFound
from deep_research.sandbox.local import LocalSandbox, SandboxPathError, _pids_with_cwd_in, _proc_stat

HAVE_BWRAP = shutil.which("bwrap") is not None
needs_bwrap = pytest.mark.skipif(not HAVE_BWRAP, reason="bubblewrap (bwrap) is not installed")
MODES = [pytest.param(True, id="bwrap", marks=needs_bwrap), pytest.param(False, id="plain")]


@pytest.fixture
async def root(tmp_path: Path):
    """A sandbox root; afterwards every sandbox under it is terminated, even if the test failed."""
    root = tmp_path / "sandboxes"
    yield root
    cleaner = LocalSandbox(root, use_bwrap=False)
    for state_file in root.glob("*/state.json"):
        await cleaner.terminate(state_file.parent.name)


@pytest.fixture(params=MODES)
def sb(root: Path, request: pytest.FixtureRequest) -> LocalSandbox:
    return LocalSandbox(root, use_bwrap=request.param)


@pytest.fixture
def bsb(root: Path) -> LocalSandbox:
    if not HAVE_BWRAP:
        pytest.skip("bubblewrap (bwrap) is not installed")
    return LocalSandbox(root, use_bwrap=True)


def alive(pid: int) -> bool:
    st = _proc_stat(pid)
    return st is not None and st[0] not in ("Z", "X")


def group_members(pgid: int) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = _proc_stat(int(entry))
            if st is not None and st[1] == pgid and st[0] not in ("Z", "X"):
                pids.append(int(entry))
    return pids


async def wait_for(cond, timeout: float = 3.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        await asyncio.sleep(0.05)
    return cond()


# ---------------------------------------------------------------------------- isolation (bwrap)
@needs_bwrap
async def test_cannot_write_outside_workspace(bsb: LocalSandbox, tmp_path: Path):
    sid = await bsb.create()
    outside = tmp_path / "outside"
    outside.mkdir()
    marker = f"/dr_outside_{secrets.token_hex(4)}"
    for target in (marker, str(outside / "x"), "/work/main/dr_outside_x"):
        res = await bsb.exec(sid, f"touch {target}")
        assert res.exit_code != 0, target
        assert not Path(target).exists()


@needs_bwrap
async def test_tmp_is_private_and_workspace_writable(bsb: LocalSandbox):
    sid = await bsb.create()
    ws = (await bsb.status(sid)).workspace
    name = f"dr_private_{secrets.token_hex(4)}"
    res = await bsb.exec(sid, f"echo hi > /tmp/{name} && cat /tmp/{name} && pwd && echo $HOME")
    assert res.exit_code == 0, res.stderr
    assert res.stdout.split() == ["hi", ws, ws]
    assert not Path("/tmp", name).exists()
    res = await bsb.exec(sid, "mkdir -p d && echo data > d/out.txt")
    assert res.exit_code == 0, res.stderr
    assert await bsb.read_file(sid, "d/out.txt") == b"data\n"
    assert Path(ws, "d", "out.txt").exists()  # same absolute path inside and outside


# ---------------------------------------------------------------------------- foreground
@pytest.mark.parametrize("use_bwrap", MODES)
async def test_foreground_timeout_kills_whole_group(root: Path, use_bwrap: bool):
    sb = LocalSandbox(root, use_bwrap=use_bwrap)
    sid = await sb.create()
    ws = Path((await sb.status(sid)).workspace)
    t0 = time.monotonic()
    res = await sb.exec(sid, "sleep 100 & echo $! > child.pid; echo started; sleep 100", timeout_s=1)
    assert time.monotonic() - t0 < 5
    assert res.timed_out and res.exit_code == 124
    assert "started" in res.stdout
    assert await wait_for(lambda: not _pids_with_cwd_in(ws))  # the `sleep 100 &` child too
    if not use_bwrap:  # under bwrap the recorded pid is namespace-local
        assert not alive(int((ws / "child.pid").read_text()))


async def test_foreground_result_env_and_leftovers(sb: LocalSandbox, monkeypatch):
    monkeypatch.setenv("DR_TEST_SECRET", "leak")
    sid = await sb.create()
    ws = Path((await sb.status(sid)).workspace)
    t0 = time.monotonic()
    res = await sb.exec(
        sid, 'echo "$FOO|$HOME|$DR_TEST_SECRET|$(pwd)"; echo oops >&2; sleep 100 & exit 3',
        env={"FOO": "bar"}, timeout_s=10,
    )
    assert time.monotonic() - t0 < 3  # a leftover child neither blocks nor survives the call
    assert (res.exit_code, res.timed_out) == (3, False)
    assert res.stdout.strip() == f"bar|{ws}||{ws}"  # worker env (secrets) is not inherited
    assert res.stderr == "oops\n"
    assert await wait_for(lambda: not _pids_with_cwd_in(ws))


async def test_output_is_capped(sb: LocalSandbox):
    sid = await sb.create()
    res = await sb.exec(sid, "head -c 3000000 /dev/zero | tr '\\0' a")
    assert res.exit_code == 0
    assert len(res.stdout) == 1 << 20


# ---------------------------------------------------------------------------- background
async def test_background_survives_and_terminate_kills_it(sb: LocalSandbox):
    sid = await sb.create()
    ws = Path((await sb.status(sid)).workspace)
    res = await sb.exec(sid, "(sleep 0.3; echo alive > alive.txt) & sleep 100 & sleep 100",
                        background=True)
    assert res.pid and res.exit_code == 0
    assert await wait_for(lambda: (ws / "alive.txt").exists())  # ran after exec returned
    status = await sb.status(sid)
    assert status.state == "running" and status.processes == 1
    assert len(group_members(res.pid)) >= 2  # the command and its children, one group

    assert await sb.terminate(sid) is True
    assert not alive(res.pid)
    assert group_members(res.pid) == []
    assert not ws.exists()
    status = await sb.status(sid)
    assert status.state == "terminated" and status.processes == 0


async def test_rediscovery_by_new_instance(root: Path):
    use_bwrap = HAVE_BWRAP
    first = LocalSandbox(root, use_bwrap=use_bwrap)
    sid = await first.create(labels={"run": "r1"})
    res = await first.exec(sid, "exec sleep 100", background=True)
    await first.write_file(sid, "notes/a.txt", "hello")

    second = LocalSandbox(root, use_bwrap=use_bwrap)  # a restarted worker
    status = await second.status(sid)
    assert status.state == "running" and status.processes == 1
    assert await second.read_file(sid, "notes/a.txt") == b"hello"
    assert json.loads((root / sid / "state.json").read_text())["labels"] == {"run": "r1"}
    assert await second.terminate(sid) is True
    assert await wait_for(lambda: not alive(res.pid))
    assert (await first.status(sid)).state == "terminated"


# ---------------------------------------------------------------------------- files
async def test_files_and_path_escapes(sb: LocalSandbox, tmp_path: Path):
    sid = await sb.create()
    ws = Path((await sb.status(sid)).workspace)
    await sb.write_file(sid, "a/b/c.txt", "xyz")
    await sb.write_file(sid, str(ws / "top.bin"), b"\x00\x01")
    assert await sb.read_file(sid, str(ws / "a/b/c.txt")) == b"xyz"
    listing = {e.path: (e.size, e.is_dir) for e in await sb.list_files(sid)}
    assert listing == {"a": (0, True), "a/b": (0, True), "a/b/c.txt": (3, False),
                       "top.bin": (2, False)}
    assert [e.path for e in await sb.list_files(sid, "a")] == ["b", "b/c.txt"]

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("s")
    (ws / "link").symlink_to(outside)
    bad = [
        sb.read_file(sid, "../state.json"),
        sb.read_file(sid, "/etc/passwd"),
        sb.read_file(sid, "link/secret"),
        sb.write_file(sid, "link/new", "x"),
        sb.write_file(sid, "../../evil", "x"),
        sb.list_files(sid, ".."),
        sb.list_files(sid, "link"),
    ]
    for coro in bad:
        with pytest.raises(SandboxPathError) as info:
            await coro
        assert info.value.retryable is False and isinstance(info.value, SandboxError)
    assert not (outside / "new").exists()
    assert "link" in {e.path for e in await sb.list_files(sid)}  # listed, not followed


# ---------------------------------------------------------------------------- lifecycle
async def test_unknown_and_terminated_ids(root: Path):
    sb = LocalSandbox(root, use_bwrap=False)
    for coro in (sb.status("lsb-000000000000"), sb.exec("lsb-000000000000", "true"),
                 sb.read_file("lsb-000000000000", "x"), sb.write_file("lsb-nope", "x", "y"),
                 sb.list_files("../etc")):
        with pytest.raises(SandboxNotFound):
            await coro
    assert await sb.terminate("lsb-000000000000") is False
    assert await sb.terminate("..") is False

    sid = await sb.create()
    assert sid.startswith("lsb-") and len(sid) == 16
    assert await sb.terminate(sid) is True
    assert await sb.terminate(sid) is False  # idempotent, never raises
    assert (await sb.status(sid)).state == "terminated"
    for coro in (sb.exec(sid, "true"), sb.exec(sid, "true", background=True),
                 sb.read_file(sid, "x"), sb.write_file(sid, "x", "y"), sb.list_files(sid)):
        with pytest.raises(SandboxNotFound):
            await coro


async def test_reap_expired(root: Path):
    sb = LocalSandbox(root, use_bwrap=False)
    expired = await sb.create(ttl_s=60)
    fresh = await sb.create(ttl_s=3600)
    forever = await sb.create()
    res = await sb.exec(expired, "exec sleep 100", background=True)
    state_file = root / expired / "state.json"
    state = json.loads(state_file.read_text())
    state["expires_at"] = time.time() - 1  # as if the ttl had passed
    state_file.write_text(json.dumps(state))

    assert await sb.reap_expired() == [expired]
    assert not alive(res.pid)
    assert (await sb.status(expired)).state == "terminated"
    assert (await sb.status(fresh)).state == "running"
    assert (await sb.status(forever)).state == "running"
    assert await sb.reap_expired() == []


async def test_cancelled_exec_kills_group(sb: LocalSandbox):
    sid = await sb.create()
    ws = Path((await sb.status(sid)).workspace)
    task = asyncio.create_task(sb.exec(sid, "sleep 100 & sleep 100", timeout_s=60))
    assert await wait_for(lambda: len(_pids_with_cwd_in(ws)) >= 2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await wait_for(lambda: not _pids_with_cwd_in(ws))


async def test_missing_bwrap_falls_back_with_warning(root: Path, monkeypatch):
    from structlog.testing import capture_logs

    monkeypatch.setattr("deep_research.sandbox.local.shutil.which", lambda name: None)
    with capture_logs() as logs:
        sb = LocalSandbox(root)
    assert sb.use_bwrap is False
    assert any(e["log_level"] == "warning" for e in logs)
    sid = await sb.create()
    res = await sb.exec(sid, "echo plain")
    assert (res.exit_code, res.stdout) == (0, "plain\n")


@needs_bwrap
async def test_ro_binds_show_hidden_host_paths_read_only(root: Path, tmp_path: Path):
    shown = tmp_path / "venv-like"
    shown.mkdir()
    (shown / "lib.txt").write_text("visible")
    plain, bound = LocalSandbox(root, use_bwrap=True), LocalSandbox(root, use_bwrap=True, ro_binds=[shown])
    sid = await bound.create()
    try:
        # tmp_path lives under /tmp, which the sandbox replaces with a private tmpfs...
        assert (await plain.exec(sid, f"cat {shown}/lib.txt")).exit_code != 0
        # ...unless the worker binds it in, read-only.
        res = await bound.exec(sid, f"cat {shown}/lib.txt")
        assert res.exit_code == 0 and res.stdout == "visible"
        assert (await bound.exec(sid, f"touch {shown}/new")).exit_code != 0
        assert not (shown / "new").exists()
    finally:
        await bound.terminate(sid)
