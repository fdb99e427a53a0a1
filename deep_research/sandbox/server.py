"""Our Sandy API server: the endpoints of seed 000 over the local (bubblewrap) sandbox.

One command starts it (the token comes from the environment, never from the command line):

    SANDY_SERVER_TOKEN=secret python -m deep_research.sandbox.server --host 127.0.0.1 --port 8787 --root DIR

Workers on any machine then use `DR_SANDBOX_PROVIDER=sandy SANDY_BASE_URL=http://host:8787
SANDY_API_KEY=secret`. Sandboxes live on this host (state on disk under --root, so a restarted server
over the same root finds them and their processes again) and outlive any worker. Every sandbox gets
an expiry (the request's `ttlSeconds`, else --default-ttl) and a reaper terminates expired ones.
The JSON shapes are documented in deep_research/sandbox/sandy.py (the client).

Built on the standard library (ThreadingHTTPServer) to add no dependency: one thread per
connection parses HTTP, and every sandbox operation runs as a coroutine of LocalSandbox on one
asyncio loop in a background thread (LocalSandbox's per-sandbox locks are loop-bound).

Fault injection, for tests and demos (`POST /admin/faults` with a JSON object, or CLI flags):
- `warmup_502: N`  the next N warmup calls (`GET /api/sandboxes/{id}` and exec `true`) answer 502
  "Upstream error" (a sandbox still starting);
- `create_429: N`  the next N creations answer 429;
- `truncate_reads: B`  files/read returns at most B bytes (a files API that truncates large files);
- `fail_chunked_reads: true`  exec of a `dd if=` chunked read fails (to reach the `cat` fallback);
- `slow_ms: M`  every API request waits M ms first;
- `kill_sandbox_after_s: S`  the sandbox of the next background exec (the crawler) dies S s later;
- `reset: true`  clears faults and counters first.
`GET /admin/faults` returns the faults and counters of what was injected; `GET /admin/sandboxes`
lists every sandbox with its state; `POST /admin/sandboxes/{id}/kill` terminates one (it "dies").
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hmac
import json
import os
import re
import signal
import socket
import sys
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, fields
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import structlog

from deep_research.sandbox.base import SandboxError, SandboxNotFound
from deep_research.sandbox.local import LocalSandbox

log = structlog.get_logger(__name__)

DEFAULT_TTL_S = 3600
REAP_INTERVAL_S = 5.0
MAX_BODY = 64 << 20
OP_TIMEOUT_S = 900.0  # beyond any exec timeout (the client's request timeout is 600 s)
FLAVORS = ("agent-ready",)
TOKEN_ENV = "SANDY_SERVER_TOKEN"


@dataclass
class Faults:
    warmup_502: int = 0
    create_429: int = 0
    truncate_reads: int = 0
    fail_chunked_reads: bool = False
    slow_ms: int = 0
    kill_sandbox_after_s: float = 0.0


class HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


_SANDBOX = r"/api/sandboxes/(?P<id>[A-Za-z0-9_.-]+)"
ROUTES: list[tuple[str, re.Pattern, str]] = [
    ("POST", re.compile(r"/api/sandboxes"), "create"),
    ("GET", re.compile(_SANDBOX), "status"),
    ("POST", re.compile(_SANDBOX + "/terminate"), "terminate"),
    ("POST", re.compile(_SANDBOX + "/exec"), "exec"),
    ("POST", re.compile(_SANDBOX + "/extend"), "extend"),
    ("POST", re.compile(_SANDBOX + "/files/write"), "write"),
    ("GET", re.compile(_SANDBOX + "/files/read"), "read"),
    ("GET", re.compile(_SANDBOX + "/files/list"), "list"),
    ("GET", re.compile(r"/admin/faults"), "get_faults"),
    ("POST", re.compile(r"/admin/faults"), "set_faults"),
    ("GET", re.compile(r"/admin/sandboxes"), "admin_list"),
    ("POST", re.compile(r"/admin/sandboxes/(?P<id>[A-Za-z0-9_.-]+)/kill"), "admin_kill"),
]


class SandyServer:
    """The server; `start()` runs it in background threads (tests), `serve_forever()` in the foreground."""

    def __init__(self, root: Path, token: str, *, host: str = "127.0.0.1", port: int = 0,
                 default_ttl_s: int = DEFAULT_TTL_S, reap_interval_s: float = REAP_INTERVAL_S,
                 ro_binds: tuple[str, ...] | None = None, use_bwrap: bool | None = None,
                 faults: Faults | None = None) -> None:
        if not token:
            raise ValueError(f"the sandbox server needs a bearer token ({TOKEN_ENV})")
        # The crawler runs on this server's interpreter: keep its environment visible inside.
        self.sandbox = LocalSandbox(root, use_bwrap=use_bwrap,
                                    ro_binds=[sys.prefix] if ro_binds is None else list(ro_binds))
        self._token = token.encode()
        self.default_ttl_s = default_ttl_s
        self.reap_interval_s = reap_interval_s
        self.faults = faults or Faults()
        self.counters: Counter[str] = Counter()
        self.create_requests: dict[str, dict] = {}  # sandbox id -> the create body (priority, flavor...)
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._loop_thread = threading.Thread(target=self._loop.run_forever, name="sandy-loop", daemon=True)
        self._http = _HTTPServer((host, port), _Handler)
        self._http.app = self
        self._http_thread: threading.Thread | None = None
        self._reaper: Any = None

    @property
    def url(self) -> str:
        host, port = self._http.server_address[:2]
        return f"http://{host}:{port}"

    # ------------------------------------------------------------------ running
    def _start_loop(self) -> None:
        self._loop_thread.start()
        self._reaper = asyncio.run_coroutine_threadsafe(self._reap_forever(), self._loop)

    def start(self) -> str:
        self._start_loop()
        self._http_thread = threading.Thread(target=self._http.serve_forever, kwargs={"poll_interval": 0.1},
                                             name="sandy-http", daemon=True)
        self._http_thread.start()
        log.info("sandy_server.started", url=self.url, root=str(self.sandbox.root))
        return self.url

    def serve_forever(self) -> None:
        self._start_loop()
        log.info("sandy_server.started", url=self.url, root=str(self.sandbox.root))
        try:
            self._http.serve_forever(poll_interval=0.2)
        finally:
            self._close()

    def stop(self) -> None:
        """Stop serving (sandboxes stay: state is on disk, a new server over the root finds them)."""
        self._http.shutdown()
        self._close()

    def _close(self) -> None:
        self._http.close_connections()
        self._http.server_close()
        if self._loop.is_running():
            try:
                asyncio.run_coroutine_threadsafe(_cancel_tasks(), self._loop).result(10)
            except Exception as exc:  # stopping anyway
                log.warning("sandy_server.stop_tasks_failed", error=str(exc))
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._loop_thread.join(5)
            if not self._loop.is_running():
                self._loop.close()
        log.info("sandy_server.stopped", url=self.url)

    def run(self, coro: Any, timeout: float = OP_TIMEOUT_S) -> Any:
        """Run a coroutine on the sandbox loop from a handler thread."""
        if self._loop.is_closed() or not self._loop.is_running():
            coro.close()
            raise HttpError(503, "server is stopping")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    async def _reap_forever(self) -> None:
        while True:
            try:
                reaped = await self.sandbox.reap_expired()
                if reaped:
                    with self._lock:
                        self.counters["reaped"] += len(reaped)
            except Exception as exc:  # the reaper must outlive a bad state file
                log.warning("sandy_server.reap_failed", error=str(exc))
            await asyncio.sleep(self.reap_interval_s)

    async def _kill_later(self, sandbox_id: str, delay_s: float) -> None:
        await asyncio.sleep(delay_s)
        if await self.sandbox.terminate(sandbox_id):
            with self._lock:
                self.counters["killed"] += 1
            log.warning("sandy_server.fault_killed_sandbox", sandbox_id=sandbox_id)

    # ------------------------------------------------------------------ requests
    def authorized(self, header: str | None) -> bool:
        if not header or not header.startswith("Bearer "):
            return False
        return hmac.compare_digest(header[len("Bearer "):].strip().encode(), self._token)

    def _take(self, name: str) -> bool:
        """Consume one injected fault of a counted kind; True if this request gets it."""
        with self._lock:
            left = getattr(self.faults, name)
            if left > 0:
                setattr(self.faults, name, left - 1)
                self.counters[name] += 1
                return True
        return False

    def handle(self, method: str, path: str, query: dict[str, str], body: dict) -> tuple[int, dict]:
        for route_method, pattern, action in ROUTES:
            match = pattern.fullmatch(path)
            if match and route_method == method:
                break
        else:
            raise HttpError(405 if any(p.fullmatch(path) for _, p, _ in ROUTES) else 400,
                            f"no endpoint {method} {path}")
        sandbox_id = match.groupdict().get("id")
        with self._lock:
            self.counters[f"requests.{action}"] += 1
            slow_ms = self.faults.slow_ms
        if slow_ms and path.startswith("/api/"):
            time.sleep(slow_ms / 1000)
        return 200, getattr(self, f"_do_{action}")(sandbox_id, query, body)

    def _do_create(self, _id: Any, _q: dict, body: dict) -> dict:
        if self._take("create_429"):
            raise HttpError(429, "capacity exhausted, try again later (injected fault)")
        flavor = body.get("flavor", "agent-ready")
        if flavor not in FLAVORS:
            raise HttpError(400, f"unknown flavor {flavor!r} (known: {', '.join(FLAVORS)})")
        ttl = int(body.get("ttlSeconds") or self.default_ttl_s)
        if ttl <= 0:
            raise HttpError(400, "ttlSeconds must be positive")
        labels = {str(k): str(v) for k, v in (body.get("labels") or {}).items()}
        sandbox_id = self.run(self.sandbox.create(ttl_s=ttl, labels=labels))
        with self._lock:
            self.create_requests[sandbox_id] = dict(body)
        return {"sandboxId": sandbox_id}

    def _do_status(self, sandbox_id: str, _q: dict, _b: dict) -> dict:
        if self._take("warmup_502"):
            raise HttpError(502, "Upstream error: sandbox is starting (injected fault)")
        return self._status_json(sandbox_id)

    def _status_json(self, sandbox_id: str) -> dict:
        st = self.run(self.sandbox.status(sandbox_id))
        return {"sandboxId": st.sandbox_id, "state": st.state, "createdAt": st.created_at,
                "expiresAt": st.expires_at, "workspace": st.workspace, "processes": st.processes}

    def _do_terminate(self, sandbox_id: str, _q: dict, _b: dict) -> dict:
        return {"terminated": self.run(self.sandbox.terminate(sandbox_id))}

    def _do_extend(self, sandbox_id: str, _q: dict, body: dict) -> dict:
        ttl = body.get("ttlSeconds")
        if not isinstance(ttl, (int, float)) or ttl <= 0:
            raise HttpError(400, "ttlSeconds must be a positive number")
        self.run(self.sandbox.extend(sandbox_id, int(ttl)))
        return {"expiresAt": self.run(self.sandbox.status(sandbox_id)).expires_at}

    def _do_exec(self, sandbox_id: str, _q: dict, body: dict) -> dict:
        command = body.get("command")
        if not isinstance(command, str) or not command:
            raise HttpError(400, "command must be a non-empty string")
        if command.strip() == "true" and self._take("warmup_502"):
            raise HttpError(502, "Upstream error: sandbox is starting (injected fault)")
        if "dd if=" in command and self.faults.fail_chunked_reads:
            with self._lock:
                self.counters["fail_chunked_reads"] += 1
            return {"exitCode": 1, "stdout": "", "stderr": "dd: injected fault", "timedOut": False, "pid": None}
        background = bool(body.get("background"))
        env = {str(k): str(v) for k, v in (body.get("env") or {}).items()}
        timeout_s = float(body.get("timeoutSeconds") or 60.0)
        result = self.run(self.sandbox.exec(sandbox_id, command, timeout_s=timeout_s, background=background,
                                            env=env))
        if background:
            with self._lock:
                kill_after, self.faults.kill_sandbox_after_s = self.faults.kill_sandbox_after_s, 0.0
            if kill_after > 0:
                asyncio.run_coroutine_threadsafe(self._kill_later(sandbox_id, kill_after), self._loop)
        return {"exitCode": result.exit_code, "stdout": result.stdout, "stderr": result.stderr,
                "timedOut": result.timed_out, "pid": result.pid}

    def _do_write(self, sandbox_id: str, _q: dict, body: dict) -> dict:
        if not isinstance(body.get("path"), str) or not body["path"]:
            raise HttpError(400, "path is required")
        try:
            data = base64.b64decode(body["contentBase64"], validate=True)
        except (KeyError, TypeError, ValueError):
            raise HttpError(400, "contentBase64 (base64) is required") from None
        self.run(self.sandbox.write_file(sandbox_id, str(body["path"]), data))
        return {"written": len(data)}

    def _do_read(self, sandbox_id: str, query: dict, _b: dict) -> dict:
        if not query.get("path"):
            raise HttpError(400, "path is required")
        data = self.run(self.sandbox.read_file(sandbox_id, query["path"]))
        limit = self.faults.truncate_reads
        if limit and len(data) > limit:
            data = data[:limit]
            with self._lock:
                self.counters["truncate_reads"] += 1
        return {"contentBase64": base64.b64encode(data).decode(), "size": len(data)}

    def _do_list(self, sandbox_id: str, query: dict, _b: dict) -> dict:
        entries = self.run(self.sandbox.list_files(sandbox_id, query.get("path") or "."))
        return {"files": [{"path": e.path, "size": e.size, "isDir": e.is_dir} for e in entries]}

    # ------------------------------------------------------------------ admin
    def _do_get_faults(self, *_: Any) -> dict:
        with self._lock:
            return {"faults": asdict(self.faults), "counters": dict(self.counters)}

    def _do_set_faults(self, _id: Any, _q: dict, body: dict) -> dict:
        known = {f.name: f.type for f in fields(Faults)}
        unknown = set(body) - set(known) - {"reset"}
        if unknown:
            raise HttpError(400, f"unknown faults {sorted(unknown)} (known: {sorted(known)})")
        with self._lock:
            if body.get("reset"):
                self.faults = Faults()
                self.counters.clear()
            for name, value in body.items():
                if name != "reset":
                    setattr(self.faults, name, type(getattr(Faults(), name))(value))
        return self._do_get_faults()

    def _do_admin_list(self, *_: Any) -> dict:
        return {"sandboxes": self.list_sandboxes()}

    def _do_admin_kill(self, sandbox_id: str, _q: dict, _b: dict) -> dict:
        killed = self.run(self.sandbox.terminate(sandbox_id))
        if killed:
            with self._lock:
                self.counters["killed"] += 1
        return {"terminated": killed}

    def list_sandboxes(self) -> list[dict]:
        """Every sandbox under the root with its state (tests assert none is left running)."""
        out = []
        for state_file in sorted(self.sandbox.root.glob("*/state.json")):
            try:
                state = json.loads(state_file.read_text())
                status = self._status_json(state["id"])
            except (OSError, ValueError, KeyError, SandboxError):
                continue
            status["labels"] = state.get("labels", {})
            status["workspaceExists"] = (state_file.parent / "workspace").exists()
            status["request"] = self.create_requests.get(state["id"])
            out.append(status)
        return out


async def _cancel_tasks() -> None:
    """Cancel the reaper and in-flight operations (a foreground exec kills its process group)."""
    tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    app: SandyServer

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._conns: set[socket.socket] = set()
        self._conns_lock = threading.Lock()
        super().__init__(*args, **kwargs)

    def track(self, sock: socket.socket, add: bool) -> None:
        with self._conns_lock:
            (self._conns.add if add else self._conns.discard)(sock)

    def close_connections(self) -> None:
        """Drop keep-alive connections too, so a stopped server really stops answering."""
        with self._conns_lock:
            conns, self._conns = list(self._conns), set()
        for sock in conns:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the crawl polls every 1.2 s
    server: _HTTPServer

    def setup(self) -> None:
        super().setup()
        self.server.track(self.request, True)

    def finish(self) -> None:
        self.server.track(self.request, False)
        super().finish()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass  # no per-request stderr lines; errors are logged below

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        self._dispatch("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._dispatch("POST")

    def _dispatch(self, method: str) -> None:
        app = self.server.app
        parts = urlsplit(self.path)
        try:
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                raise HttpError(413, "request body too large")
            raw = self.rfile.read(length) if length else b""
            if parts.path == "/healthz":
                self._send(200, {"ok": True})
                return
            if not app.authorized(self.headers.get("Authorization")):
                raise HttpError(401, "missing or wrong bearer token")
            try:
                body = json.loads(raw) if raw else {}
            except ValueError:
                raise HttpError(400, "body is not JSON") from None
            if not isinstance(body, dict):
                raise HttpError(400, "body must be a JSON object")
            query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
            status, payload = app.handle(method, parts.path, query, body)
        except HttpError as exc:
            status, payload = exc.status, {"error": str(exc)}
        except SandboxNotFound as exc:
            status, payload = 404, {"error": str(exc)}
        except SandboxError as exc:
            status, payload = (503 if exc.retryable else 400), {"error": f"{type(exc).__name__}: {exc}"}
        except Exception as exc:  # a bug here must not kill the connection thread silently
            log.exception("sandy_server.error", path=parts.path)
            status, payload = 500, {"error": f"internal error: {type(exc).__name__}"}
        self._send(status, payload)

    def _send(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            self.close_connection = True


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m deep_research.sandbox.server",
                                     description=f"Sandy API server over local sandboxes (token: ${TOKEN_ENV})")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8787)
    parser.add_argument("--root", type=Path, default=Path(".data") / "sandy-sandboxes")
    parser.add_argument("--default-ttl", type=int, default=DEFAULT_TTL_S, help="expiry (s) when create gives none")
    parser.add_argument("--reap-interval", type=float, default=REAP_INTERVAL_S)
    for f in fields(Faults):
        default = getattr(Faults(), f.name)
        flag = f"--{f.name.replace('_', '-')}"
        if isinstance(default, bool):
            parser.add_argument(flag, action="store_true", help="fault injection (see module doc)")
        else:
            parser.add_argument(flag, type=type(default), default=default, help="fault injection (see module doc)")
    args = parser.parse_args(argv)
    from deep_research.logging import configure_logging

    configure_logging()
    token = os.environ.get(TOKEN_ENV, "")
    if not token:
        parser.error(f"set {TOKEN_ENV}: the server refuses to run without a bearer token")
    faults = Faults(**{f.name: getattr(args, f.name) for f in fields(Faults)})
    server = SandyServer(args.root, token, host=args.host, port=args.port, default_ttl_s=args.default_ttl,
                         reap_interval_s=args.reap_interval, faults=faults)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server._http.shutdown).start())
    print(f"sandy server listening on {server.url} (root {server.sandbox.root})", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
