"""A scriptable OpenAI-compatible server on loopback, speaking the real wire format.

`POST /v1/chat/completions`: a non-streamed `chat.completion` JSON body, or (with `"stream": true`)
Server-Sent Events of `chat.completion.chunk` objects over chunked transfer encoding, a final
usage chunk when `stream_options.include_usage` is set, then `data: [DONE]`.

Each model has a queue of behaviours (`ok`, `status`, `invalid_json`, `cut_stream_after`, `slow`,
`no_usage`); an empty queue answers `default_text`. Every request is recorded (model, messages,
headers, body) so tests can check what was sent, e.g. that the key only travels in Authorization.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import defaultdict, deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Behaviour:
    kind: str  # "ok", "status", "cut"
    text: str = ""
    status: int = 200
    retry_after: float | None = None
    error_message: str = ""
    cut_after: int = 0
    delay_s: float = 0.0
    usage: bool = True
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    chunk_chars: int = 8


def ok(text: str, *, prompt_tokens: int | None = None, completion_tokens: int | None = None,
       chunk_chars: int = 8) -> Behaviour:
    return Behaviour("ok", text=text, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                     chunk_chars=chunk_chars)


def no_usage(text: str) -> Behaviour:
    return Behaviour("ok", text=text, usage=False)


def status(code: int, retry_after: float | None = None, message: str = "") -> Behaviour:
    return Behaviour("status", status=code, retry_after=retry_after, error_message=message)


def invalid_json(text: str = '{"sources": [{"title": "x", "url": oops') -> Behaviour:
    return Behaviour("ok", text=text)


def cut_stream_after(n_chunks: int, text: str = "The stream starts fine and then the connection drops.") -> Behaviour:
    return Behaviour("cut", text=text, cut_after=n_chunks, chunk_chars=8)


def slow(delay_s: float, text: str = "slow answer") -> Behaviour:
    return Behaviour("ok", text=text, delay_s=delay_s)


@dataclass
class RecordedRequest:
    path: str
    model: str
    messages: list[dict]
    headers: dict[str, str]  # names lowercased
    body: dict
    raw: str
    stream: bool


@dataclass
class FakeOpenAI:
    default_text: str = "Hello from the fake model."
    scripts: dict[str, deque[Behaviour]] = field(default_factory=lambda: defaultdict(deque))
    requests: list[RecordedRequest] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    port: int = 0

    def script(self, model: str, *behaviours: Behaviour) -> None:
        with self.lock:
            self.scripts[model].extend(behaviours)

    def next_behaviour(self, model: str) -> Behaviour:
        with self.lock:
            queue = self.scripts.get(model)
            return queue.popleft() if queue else ok(self.default_text)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def models_requested(self) -> list[str]:
        return [r.model for r in self.requests]


def _usage_json(b: Behaviour, messages: list[dict]) -> dict:
    prompt = b.prompt_tokens if b.prompt_tokens is not None else \
        sum(len(str(m.get("content", ""))) for m in messages) // 4 + 1
    completion = b.completion_tokens if b.completion_tokens is not None else len(b.text) // 4 + 1
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _handler(fake: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:  # quiet
            pass

        def _json(self, code: int, payload: dict, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(payload).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        def do_POST(self) -> None:  # noqa: N802
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
            if self.path.rstrip("/") != "/v1/chat/completions":
                self._json(404, {"error": {"message": f"no route {self.path}", "type": "invalid_request_error"}})
                return
            body = json.loads(raw)
            model = body.get("model", "")
            messages = body.get("messages", [])
            stream = bool(body.get("stream"))
            with fake.lock:
                fake.requests.append(RecordedRequest(self.path, model, messages, {k.lower(): v for k, v in self.headers.items()},
                                                     body, raw, stream))
            b = fake.next_behaviour(model)
            if b.delay_s:
                time.sleep(b.delay_s)
            if b.kind == "status":
                kinds = {429: "rate_limit_exceeded", 401: "invalid_api_key", 500: "server_error"}
                headers = {"Retry-After": str(b.retry_after)} if b.retry_after is not None else {}
                message = b.error_message or f"fake error {b.status}"
                self._json(b.status, {"error": {"message": message, "type": kinds.get(b.status, "error"),
                                                "code": kinds.get(b.status)}}, headers)
                return
            cid = f"chatcmpl-fake{len(fake.requests)}"
            created = int(time.time())
            if not stream:
                if b.kind == "cut":  # promise a body, send half of it, close
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", "100000")
                    self.end_headers()
                    self.wfile.write(b'{"id": "' + cid.encode() + b'", "object": "chat.comp')
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)
                    self.close_connection = True
                    return
                payload = {
                    "id": cid, "object": "chat.completion", "created": created, "model": model,
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": b.text},
                                 "finish_reason": "stop"}],
                }
                if b.usage:
                    payload["usage"] = _usage_json(b, messages)
                self._json(200, payload)
                return

            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()

            def event(obj: dict | str) -> None:
                data = obj if isinstance(obj, str) else json.dumps(obj)
                self._chunk(f"data: {data}\n\n".encode())

            def chunk(delta: dict, finish: str | None = None) -> dict:
                return {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

            pieces = [b.text[i:i + b.chunk_chars] for i in range(0, len(b.text), b.chunk_chars)] or [""]
            event(chunk({"role": "assistant", "content": ""}))
            for n, piece in enumerate(pieces):
                if b.kind == "cut" and n >= b.cut_after:
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)  # no terminating chunk: a cut stream
                    self.close_connection = True
                    return
                event(chunk({"content": piece}))
            event(chunk({}, "stop"))
            if b.usage and (body.get("stream_options") or {}).get("include_usage"):
                event({"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                       "choices": [], "usage": _usage_json(b, messages)})
            event("[DONE]")
            self._chunk(b"")  # end of chunked body

    return Handler


class FakeOpenAIServer:
    """`with FakeOpenAIServer() as fake:` runs the server in a thread on 127.0.0.1, port 0."""

    def __init__(self, default_text: str = "Hello from the fake model.") -> None:
        self.fake = FakeOpenAI(default_text=default_text)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self.fake))
        self._server.daemon_threads = True
        self.fake.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fake-openai", daemon=True)

    def __enter__(self) -> FakeOpenAI:
        self._thread.start()
        return self.fake

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
