"""A loopback server that speaks the wire format of each web search provider.

One `ThreadingHTTPServer` on 127.0.0.1 (ephemeral port), one path prefix per provider:

| provider | endpoint here | auth checked |
| --- | --- | --- |
| searxng | GET  /searxng/search?q=&format=json | none (403 unless format=json) |
| serper | POST /serper/search {"q", "num"} | X-API-KEY |
| tavily | POST /tavily/search {"query", "max_results", ...} | Authorization: Bearer, or api_key in the body |
| brave | GET  /brave/res/v1/web/search?q=&count= | X-Subscription-Token |

The response bodies follow the example responses of each provider's public API documentation
(field names, nesting, extra fields the client must ignore). `mode[provider]` switches a provider
to: "ok", "empty", "429" (Retry-After: 7), "429-date" (Retry-After as an HTTP date), "503",
"500", "401" (as if the key were wrong), "malformed" (an HTML error page with status 200),
"shape" (JSON of the wrong shape). `results[provider]` replaces the canned results with a list
of {"url", "title", "snippet"}. Every request is recorded; `max_in_flight` counts concurrency.
"""

from __future__ import annotations

import json
import threading
import time
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

KEYS = {"serper": "serper-secret-key-123", "tavily": "tvly-secret-key-456", "brave": "BSA-secret-key-789"}
PROVIDERS = ("searxng", "serper", "tavily", "brave")

# Canned results: the same pages spelled differently by different providers (tracking
# parameters, trailing slash, host case, fragments), so merges have something to collapse.
CANNED: dict[str, list[dict[str, str]]] = {
    "searxng": [
        {"url": "https://docs.python.org/3/library/asyncio.html",
         "title": "asyncio — Asynchronous I/O — Python 3.12 documentation",
         "snippet": "asyncio is a library to write concurrent code using the async/await syntax."},
        {"url": "https://realpython.com/async-io-python/",
         "title": "Async IO in Python: A Complete Walkthrough – Real Python",
         "snippet": "This tutorial will give you a firm grasp of Python's approach to async IO."},
        {"url": "https://stackoverflow.com/questions/49005651/how-does-asyncio-actually-work",
         "title": "How does asyncio actually work? - Stack Overflow",
         "snippet": "This question is motivated by my another question: How to await in cdef?"},
    ],
    "serper": [
        {"url": "https://docs.python.org/3/library/asyncio.html?utm_source=google&utm_medium=serp",
         "title": "asyncio — Asynchronous I/O — Python 3.12 documentation",
         "snippet": "asyncio is used as a foundation for multiple Python asynchronous frameworks."},
        {"url": "https://RealPython.com/async-io-python",
         "title": "Async IO in Python: A Complete Walkthrough",
         "snippet": "Async IO is a concurrent programming design that has received dedicated support in Python."},
        {"url": "https://superfastpython.com/python-asyncio/",
         "title": "Python Asyncio: The Complete Guide - Super Fast Python",
         "snippet": "Asyncio allows us to use asynchronous programming with coroutine-based concurrency."},
    ],
    "tavily": [
        {"url": "https://docs.python.org/3/library/asyncio-task.html#coroutines",
         "title": "Coroutines and Tasks — Python 3.12 documentation",
         "snippet": "This section outlines high-level asyncio APIs to work with coroutines and Tasks."},
        {"url": "https://realpython.com/async-io-python/?fbclid=IwAR0abc",
         "title": "Async IO in Python: A Complete Walkthrough",
         "snippet": "Async IO is a concurrent programming design."},
    ],
    "brave": [
        {"url": "https://docs.python.org/3/library/asyncio.html#module-asyncio",
         "title": "asyncio — Asynchronous I/O",
         "snippet": "<strong>asyncio</strong> is a library to write <strong>concurrent</strong> code using the async/await syntax."},
        {"url": "https://www.geeksforgeeks.org/asyncio-in-python/",
         "title": "asyncio in Python - GeeksforGeeks",
         "snippet": "<strong>Asyncio</strong> is a Python library that is used for concurrent programming &amp; more."},
    ],
}


def _searxng(query: str, results: list[dict[str, str]]) -> dict[str, Any]:
    return {
        "query": query,
        "number_of_results": 0,
        "results": [
            {
                "url": r["url"], "title": r["title"], "content": r["snippet"],
                "engine": "duckduckgo",
                "parsed_url": list(urlsplit(r["url"])) + [""],
                "template": "default.html", "engines": ["duckduckgo", "brave"],
                "positions": [i + 1, i + 2], "score": round(4.0 / (i + 1), 3),
                "category": "general", "publishedDate": None, "thumbnail": "",
            }
            for i, r in enumerate(results)
        ],
        "answers": [], "corrections": [], "infoboxes": [],
        "suggestions": [f"{query} tutorial", f"{query} example", query] if results else [],
        "unresponsive_engines": [],
    }


def _serper(query: str, num: int, results: list[dict[str, str]]) -> dict[str, Any]:
    organic = [
        {"title": r["title"], "link": r["url"], "snippet": r["snippet"], "position": i + 1,
         **({"sitelinks": [{"title": "Coroutines and Tasks",
                            "link": "https://docs.python.org/3/library/asyncio-task.html"}]} if i == 0 else {}),
         **({"date": "Jan 5, 2024"} if i == 1 else {})}
        for i, r in enumerate(results[:num])
    ]
    body: dict[str, Any] = {
        "searchParameters": {"q": query, "type": "search", "num": num, "engine": "google"},
        "organic": organic,
        "credits": 1,
    }
    if results:
        body["knowledgeGraph"] = {"title": "Python", "type": "Programming language"}
        body["peopleAlsoAsk"] = [{"question": f"What is {query} used for?", "snippet": "...",
                                  "title": "Python docs", "link": results[0]["url"]}]
        body["relatedSearches"] = [{"query": f"{query} vs threading"}, {"query": f"{query} gather"}]
    return body


def _tavily(query: str, max_results: int, raw: bool, results: list[dict[str, str]]) -> dict[str, Any]:
    return {
        "query": query,
        "follow_up_questions": None,
        "answer": None,
        "images": [],
        "results": [
            {"title": r["title"], "url": r["url"], "content": r["snippet"],
             "score": round(0.98 - i * 0.1, 5),
             "raw_content": (f"{r['title']}\n\n{r['snippet']} " + "More text. " * 3000) if raw else None}
            for i, r in enumerate(results[:max_results])
        ],
        "response_time": 1.09,
        "request_id": "123e4567-e89b-12d3-a456-426614174111",
    }


def _brave(query: str, count: int, results: list[dict[str, str]]) -> dict[str, Any]:
    return {
        "type": "search",
        "query": {"original": query, "show_strict_warning": False, "altered": f"{query} python" if results else None,
                  "is_navigational": False, "is_news_breaking": False, "spellcheck_off": True,
                  "country": "us", "bad_results": False, "should_fallback": False,
                  "postal_code": "", "city": "", "header_country": "", "more_results_available": True,
                  "state": ""},
        "mixed": {"type": "mixed", "main": [{"type": "web", "index": i, "all": False}
                                            for i in range(len(results[:count]))], "top": [], "side": []},
        "web": {
            "type": "search",
            "results": [
                {"title": r["title"], "url": r["url"], "is_source_local": False, "is_source_both": False,
                 "description": r["snippet"], "page_age": "2024-01-05T00:00:00",
                 "profile": {"name": urlsplit(r["url"]).hostname, "url": r["url"],
                             "long_name": urlsplit(r["url"]).hostname, "img": ""},
                 "language": "en", "family_friendly": True, "type": "search_result",
                 "subtype": "generic", "is_live": False,
                 "meta_url": {"scheme": "https", "netloc": urlsplit(r["url"]).hostname,
                              "hostname": urlsplit(r["url"]).hostname, "favicon": "", "path": ""},
                 "age": "January 5, 2024"}
                for r in results[:count]
            ],
            "family_friendly": True,
        },
    }


class _Handler(BaseHTTPRequestHandler):
    server: "_Server"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def do_GET(self) -> None:  # noqa: N802
        self._handle("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._handle("POST")

    def _send(self, status: int, body: Any, headers: dict[str, str] | None = None,
              content_type: str = "application/json") -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test)

    def _handle(self, method: str) -> None:
        fake: FakeSearchServer = self.server.fake
        parts = urlsplit(self.path)
        provider, _, rest = parts.path.lstrip("/").partition("/")
        params = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        body: dict[str, Any] = {}
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            try:
                body = json.loads(self.rfile.read(length))
            except ValueError:
                body = {}
        with fake.lock:
            fake.requests.append({"provider": provider, "method": method, "path": "/" + rest,
                                  "params": params, "body": body, "headers": dict(self.headers.items())})
            fake.in_flight += 1
            fake.max_in_flight = max(fake.max_in_flight, fake.in_flight)
        try:
            if fake.delay_s:
                time.sleep(fake.delay_s)
            self._answer(fake, provider, "/" + rest, method, params, body)
        finally:
            with fake.lock:
                fake.in_flight -= 1

    def _answer(self, fake: "FakeSearchServer", provider: str, path: str, method: str,
                params: dict[str, str], body: dict[str, Any]) -> None:
        routes = {"searxng": ("GET", "/search"), "serper": ("POST", "/search"),
                  "tavily": ("POST", "/search"), "brave": ("GET", "/res/v1/web/search")}
        if routes.get(provider) != (method, path):
            return self._send(404, {"error": "not found"})
        mode = fake.mode.get(provider, "ok")
        # Authentication first, as the real services do.
        if provider == "serper" and (self.headers.get("X-API-KEY") != KEYS["serper"] or mode == "401"):
            return self._send(403, {"message": "Unauthorized.", "statusCode": 403})
        if provider == "tavily":
            bearer = self.headers.get("Authorization", "")
            if (bearer != f"Bearer {KEYS['tavily']}" and body.get("api_key") != KEYS["tavily"]) or mode == "401":
                return self._send(401, {"detail": {"error": "Unauthorized: missing or invalid API key."}})
        if provider == "brave" and (self.headers.get("X-Subscription-Token") != KEYS["brave"] or mode == "401"):
            return self._send(422, {"type": "ErrorResponse", "error": {
                "id": "c1e2a3b4", "status": 422, "code": "SUBSCRIPTION_TOKEN_INVALID",
                "detail": "The provided subscription token is invalid.", "meta": {"component": "authentication"}},
                "time": 1700000000})
        if provider == "searxng" and params.get("format") != "json":
            return self._send(403, b"<html><body>403 Forbidden</body></html>", content_type="text/html")
        if provider == "searxng" and mode == "401":
            return self._send(401, b"Unauthorized", content_type="text/plain")
        if mode == "429":
            headers = {"Retry-After": "7"}
            if provider == "brave":
                headers = {"X-RateLimit-Limit": "1, 15000", "X-RateLimit-Remaining": "0, 14000",
                           "X-RateLimit-Reset": "7, 1419704"}
            return self._send(429, {"message": "Too many requests"}, headers)
        if mode == "429-date":
            return self._send(429, {"message": "Too many requests"},
                              {"Retry-After": formatdate(time.time() + 30, usegmt=True)})
        if mode == "503":
            return self._send(503, b"Service Unavailable", {"Retry-After": "3"}, content_type="text/plain")
        if mode == "500":
            return self._send(500, b"Internal Server Error", content_type="text/plain")
        if mode == "malformed":
            return self._send(200, b"<html><body>502 Bad Gateway</body></html>", content_type="text/html")
        if mode == "shape":
            return self._send(200, {"results": "not a list", "web": {"results": "no"}, "organic": 3})
        if mode == "bad-request":
            return self._send(400, {"message": f"Not enough credits for key {KEYS.get(provider, '')}",
                                    "statusCode": 400})
        results = [] if mode == "empty" else fake.results.get(provider, CANNED[provider])
        if provider == "searxng":
            if mode == "unresponsive":
                payload = _searxng(params.get("q", ""), [])
                payload["unresponsive_engines"] = [["google", "timeout"], ["brave", "CAPTCHA"]]
                return self._send(200, payload)
            return self._send(200, _searxng(params.get("q", ""), results))
        if provider == "serper":
            return self._send(200, _serper(body.get("q", ""), int(body.get("num", 10)), results))
        if provider == "tavily":
            return self._send(200, _tavily(body.get("query", ""), int(body.get("max_results", 5)),
                                           bool(body.get("include_raw_content")), results))
        return self._send(200, _brave(params.get("q", ""), int(params.get("count", 20)), results))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    fake: "FakeSearchServer"


class FakeSearchServer:
    def __init__(self, host: str = "127.0.0.1") -> None:
        self.lock = threading.Lock()
        self.mode: dict[str, str] = {}
        self.results: dict[str, list[dict[str, str]]] = {}
        self.requests: list[dict[str, Any]] = []
        self.delay_s = 0.0
        self.in_flight = 0
        self.max_in_flight = 0
        self._server = _Server((host, 0), _Handler)
        self._server.fake = self
        self.url = f"http://{host}:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True, name="fake-search")

    def start(self) -> "FakeSearchServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def base_url(self, provider: str) -> str:
        return f"{self.url}/{provider}"

    def env(self, **extra: str) -> dict[str, str]:
        """Worker environment pointing every provider here, with the right keys."""
        return {
            "SEARXNG_URL": self.base_url("searxng"),
            "SERPER_URL": self.base_url("serper"), "SERPER_API_KEY": KEYS["serper"],
            "TAVILY_URL": self.base_url("tavily"), "TAVILY_API_KEY": KEYS["tavily"],
            "BRAVE_URL": self.base_url("brave"), "BRAVE_API_KEY": KEYS["brave"],
            "DR_SEARCH_TIMEOUT_S": "5",
            **extra,
        }

    def reset(self) -> None:
        deadline = time.monotonic() + 5
        while self.in_flight and time.monotonic() < deadline:  # requests a client gave up on
            time.sleep(0.02)
        with self.lock:
            self.mode.clear()
            self.results.clear()
            self.requests.clear()
            self.delay_s = 0.0
            self.max_in_flight = 0
