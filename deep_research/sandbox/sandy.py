"""Remote sandboxes over the Sandy HTTP API (seed 000, "Sandy Client Library").

Endpoints (the seed names them; the JSON shapes are ours, and `deep_research/sandbox/server.py`
serves exactly these):

| call | request | response |
| --- | --- | --- |
| create | `POST /api/sandboxes` `{"priority":1,"preemptable":false,"flavor":"agent-ready","ttlSeconds":N,"labels":{}}` | `{"sandboxId"}` |
| status | `GET /api/sandboxes/{id}` | `{"sandboxId","state","createdAt","expiresAt","workspace","processes"}` |
| terminate | `POST /api/sandboxes/{id}/terminate` | `{"terminated": bool}` |
| exec | `POST /api/sandboxes/{id}/exec` `{"command","timeoutSeconds","background","env"}` | `{"exitCode","stdout","stderr","timedOut","pid"}` |
| write | `POST /api/sandboxes/{id}/files/write` `{"path","contentBase64"}` | `{"written": bytes}` |
| read | `GET /api/sandboxes/{id}/files/read?path=` | `{"contentBase64","size"}` |
| list | `GET /api/sandboxes/{id}/files/list?path=` | `{"files":[{"path","size","isDir"}]}` |
| extend | `POST /api/sandboxes/{id}/extend` `{"ttlSeconds"}` | `{"expiresAt"}` |

Errors are `{"error": "..."}` with an HTTP status. The seed's rules decide what is retryable:
5xx, 429 and an "Upstream error" body -> SandboxUnavailable (retryable); 404 -> SandboxNotFound;
any other 4xx -> SandboxRejected (not retryable); connection errors and timeouts -> retryable.

This client NEVER retries (no loop here, no transport retries): Temporal's retry policies in
deep_research/policies.py are the one retry layer, so the attempts and backoff a user sees in the
workflow history are exactly the seed's. The API key is sent as a bearer token and never appears
in an error message or a log line.
"""

from __future__ import annotations

import asyncio
import base64
import json as jsonlib
from typing import Any

import httpx
import structlog

from deep_research.sandbox.base import (
    ExecResult,
    FileEntry,
    Sandbox,
    SandboxError,
    SandboxNotFound,
    SandboxStatus,
    SandboxUnavailable,
)

log = structlog.get_logger(__name__)

REQUEST_TIMEOUT_S = 600.0  # the seed's 10-minute request timeout
# Sandbox configuration of the seed ("Sandbox Configuration"): fast allocation, never reclaimed.
CREATE_BODY = {"priority": 1, "preemptable": False, "flavor": "agent-ready"}
ERROR_BODY_CHARS = 300


class SandboxRejected(SandboxError):
    """The API refused the request (4xx other than 404/429: bad request, bad key): retrying cannot help."""

    retryable = False


class SandySandbox(Sandbox):
    """A `Sandbox` whose sandboxes live on a Sandy API server (see the module docstring)."""

    name = "sandy"

    def __init__(self, base_url: str, api_key: str, *, timeout_s: float = REQUEST_TIMEOUT_S) -> None:
        if not base_url:
            raise ValueError("SandySandbox needs a base URL")
        self.base_url = base_url.rstrip("/")
        self._api_key = api_key
        self.timeout_s = timeout_s
        self._client: httpx.AsyncClient | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:  # never show the key
        return f"SandySandbox({self.base_url!r})"

    def _http(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:  # a pool is bound to its loop
            self._client = httpx.AsyncClient(
                base_url=self.base_url,
                headers={"Authorization": f"Bearer {self._api_key}"},
                timeout=httpx.Timeout(self.timeout_s),
                transport=httpx.AsyncHTTPTransport(retries=0),  # Temporal retries, not us
                follow_redirects=False,
            )
            self._client_loop = loop
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def _call(self, method: str, path: str, *, json: Any = None, params: dict | None = None) -> dict:
        what = f"{method} {path}"
        try:
            response = await self._http().request(method, path, json=json, params=params)
        except httpx.TimeoutException as exc:
            raise SandboxUnavailable(f"{what}: timed out ({type(exc).__name__})") from None
        except httpx.TransportError as exc:
            raise SandboxUnavailable(f"{what}: {type(exc).__name__}: {exc}") from None
        if response.is_success:
            try:
                body = response.json()
            except ValueError:
                raise SandboxUnavailable(f"{what}: malformed JSON response") from None
            if not isinstance(body, dict):
                raise SandboxUnavailable(f"{what}: unexpected response {str(body)[:ERROR_BODY_CHARS]}")
            return body
        raise _error(what, response.status_code, response.text)

    # ------------------------------------------------------------------ lifecycle
    async def create(self, *, ttl_s: int | None = None, labels: dict[str, str] | None = None) -> str:
        body: dict[str, Any] = {**CREATE_BODY, "labels": dict(labels or {})}
        if ttl_s:
            body["ttlSeconds"] = int(ttl_s)
        out = await self._call("POST", "/api/sandboxes", json=body)
        sandbox_id = out.get("sandboxId")
        if not sandbox_id:
            raise SandboxUnavailable("POST /api/sandboxes: no sandboxId in the response")
        log.info("sandbox.created", sandbox_id=sandbox_id, provider="sandy", ttl_s=ttl_s)
        return sandbox_id

    async def status(self, sandbox_id: str) -> SandboxStatus:
        out = await self._call("GET", f"/api/sandboxes/{sandbox_id}")
        return SandboxStatus(
            sandbox_id=out.get("sandboxId", sandbox_id),
            state=out["state"],
            created_at=out["createdAt"],
            expires_at=out.get("expiresAt"),
            workspace=out["workspace"],
            processes=out.get("processes", 0),
        )

    async def terminate(self, sandbox_id: str) -> bool:
        try:
            out = await self._call("POST", f"/api/sandboxes/{sandbox_id}/terminate")
        except SandboxNotFound:
            return False  # idempotent, as the interface says
        return bool(out.get("terminated"))

    async def extend(self, sandbox_id: str, ttl_s: int) -> None:
        await self._call("POST", f"/api/sandboxes/{sandbox_id}/extend", json={"ttlSeconds": int(ttl_s)})

    # ------------------------------------------------------------------ commands and files
    async def exec(
        self,
        sandbox_id: str,
        command: str,
        *,
        timeout_s: float = 60.0,
        background: bool = False,
        env: dict[str, str] | None = None,
    ) -> ExecResult:
        out = await self._call("POST", f"/api/sandboxes/{sandbox_id}/exec", json={
            "command": command, "timeoutSeconds": timeout_s, "background": background, "env": dict(env or {}),
        })
        return ExecResult(exit_code=out["exitCode"], stdout=out.get("stdout", ""), stderr=out.get("stderr", ""),
                          timed_out=bool(out.get("timedOut")), pid=out.get("pid"))

    async def write_file(self, sandbox_id: str, path: str, content: bytes | str) -> None:
        data = content.encode() if isinstance(content, str) else content
        await self._call("POST", f"/api/sandboxes/{sandbox_id}/files/write",
                         json={"path": path, "contentBase64": base64.b64encode(data).decode()})

    async def read_file(self, sandbox_id: str, path: str) -> bytes:
        out = await self._call("GET", f"/api/sandboxes/{sandbox_id}/files/read", params={"path": path})
        try:
            return base64.b64decode(out["contentBase64"], validate=True)
        except (KeyError, ValueError, TypeError):
            raise SandboxUnavailable(f"files/read {path!r}: malformed content") from None

    async def list_files(self, sandbox_id: str, path: str = ".") -> list[FileEntry]:
        out = await self._call("GET", f"/api/sandboxes/{sandbox_id}/files/list", params={"path": path})
        return [FileEntry(path=f["path"], size=f.get("size", 0), is_dir=bool(f.get("isDir")))
                for f in out.get("files", [])]


def _error(what: str, status: int, text: str) -> SandboxError:
    """The seed's retry rules as typed errors."""
    detail = text.strip()
    try:
        parsed = jsonlib.loads(detail)
        if isinstance(parsed, dict) and parsed.get("error"):
            detail = str(parsed["error"])
    except ValueError:
        pass
    message = f"{what}: HTTP {status}: {detail[:ERROR_BODY_CHARS]}"
    if status >= 500 or status == 429 or "Upstream error" in text:
        return SandboxUnavailable(message)
    if status == 404:
        return SandboxNotFound(message)
    return SandboxRejected(message)
