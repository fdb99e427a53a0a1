"""The sandbox crawler script (deep_research/crawler/crawler.py) against a real local web site.

Real Chromium, real HTTP: a generated multi-host site is served on 127.0.0.2/3/4 (one
ThreadingHTTPServer per address, ephemeral ports) and the crawler runs as a subprocess,
exactly as it runs inside a sandbox. The site lives in this module (a `tests/site.py` would
shadow the stdlib `site` module).

Site layout, the same on every host:
    /            links to /p1../p4 (same host), to the other hosts' / and to a mailto:
    /pN          links to /, to /deepN#section (reachable only at depth 2) and to another host
    /deepN       leaf
    /slow        sleeps SLOW_S seconds before answering (duration cap)
    /img.png     image, /font.woff2 web font (both must be blocked by the crawler)
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[1]
CRAWLER = ROOT / "deep_research" / "crawler" / "crawler.py"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)"
)

A, B, C = ADDRESSES = ("127.0.0.2", "127.0.0.3", "127.0.0.4")
NAV = "NAVBOILERPLATE Home About Contact Login"
FOOTER = "FOOTERBOILERPLATE Copyright Example Corp All rights reserved"
SLOW_S = 15.0
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)


# --------------------------------------------------------------------------- the test site


def marker(address: str, path: str) -> str:
    return f"ARTICLEMARK-{address.replace('.', '-')}-{path.strip('/') or 'root'}"


class Site:
    def __init__(self) -> None:
        self.servers: list[ThreadingHTTPServer] = []
        self.base: dict[str, str] = {}
        self.requests: list[tuple[str, str]] = []  # (address, path)
        self.lock = threading.Lock()

    def start(self) -> "Site":
        for address in ADDRESSES:
            server = ThreadingHTTPServer((address, 0), self._handler(address))
            server.daemon_threads = True
            self.servers.append(server)
            self.base[address] = f"http://{address}:{server.server_address[1]}"
            threading.Thread(target=server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        for server in self.servers:
            server.shutdown()
            server.server_close()

    def url(self, address: str, path: str = "/") -> str:
        return self.base[address] + path

    def reset(self) -> None:
        with self.lock:
            self.requests.clear()

    def requested(self) -> list[tuple[str, str]]:
        with self.lock:
            return list(self.requests)

    def page(self, address: str, path: str) -> str:
        others = [a for a in ADDRESSES if a != address]
        if path == "/":
            links = [f"/p{i}" for i in range(1, 5)] + [self.url(a) for a in others]
            links.append("mailto:someone@example.com")
        elif path.startswith("/p"):
            links = ["/", f"/deep{path[2:]}#section", self.url(others[0], path)]
        else:
            links = ["/"]
        mark = marker(address, path)
        body = " ".join(
            f"{mark} paragraph {i}: the zebra quantum lighthouse report explains in detail how "
            "careful research on durable workflows produces reliable, cited answers."
            for i in range(6)
        )
        anchors = "".join(f'<li><a href="{href}">link {href}</a></li>' for href in links)
        return f"""<!doctype html><html><head><meta charset="utf-8">
<title>Title {mark}</title><meta name="description" content="Description of {mark}">
<style>@font-face {{ font-family: TestFont; src: url(/font.woff2) format("woff2"); }}
body {{ font-family: TestFont, sans-serif; }}</style></head>
<body><header><nav><a href="/">{NAV}</a></nav></header>
<main><article><h1>Heading {mark}</h1><img src="/img.png" alt="picture" width="10" height="10">
<p>{body}</p><p>{body}</p></article><aside><ul>{anchors}</ul></aside></main>
<footer><p>{FOOTER}</p></footer></body></html>"""

    def _handler(self, address: str):
        site = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                path = self.path.split("?")[0]
                with site.lock:
                    site.requests.append((address, path))
                try:
                    if path == "/img.png":
                        self._send(200, "image/png", PNG)
                    elif path == "/font.woff2":
                        self._send(200, "font/woff2", b"wOF2" + b"\0" * 64)
                    elif path in ("/", "/slow") or path.startswith(("/p", "/deep")):
                        if path == "/slow":
                            time.sleep(SLOW_S)
                        self._send(200, "text/html; charset=utf-8", site.page(address, path).encode())
                    else:
                        self._send(404, "text/plain", b"not found")
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the crawler gave up on this request

            def _send(self, status: int, ctype: str, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        return Handler


# --------------------------------------------------------------------------- helpers


class Run:
    def __init__(self, proc, out_dir: Path, requests, elapsed: float):
        self.returncode, self.stdout, self.stderr = proc.returncode, proc.stdout, proc.stderr
        self.out_dir, self.requests, self.elapsed = out_dir, requests, elapsed
        self.output = json.loads((out_dir / "out.json").read_text())
        self.pages = self.output["pages"]
        self.progress = [
            json.loads(line[len("__PROGRESS__"):])
            for line in self.stdout.splitlines()
            if line.startswith("__PROGRESS__")
        ]

    def paths(self) -> set[tuple[str, str]]:
        return {(urlsplit(p["url"]).hostname, urlsplit(p["url"]).path) for p in self.pages}


def config(out_dir: Path, seeds: list[str], **overrides) -> Path:
    cfg = {
        "seeds": [{"url": u, "title": "", "snippet": ""} for u in seeds],
        "max_pages": 20, "max_depth": 1, "max_links_per_page": 20, "max_pages_per_host": 20,
        "max_duration_s": 30, "max_chars": 5000, "concurrency": 3, "executable": CHROMIUM,
        "output": str(out_dir / "out.json"), "done_marker": str(out_dir / "done.json"),
        "alive_file": str(out_dir / "alive"), "block_resources": True, **overrides,
    }
    path = out_dir / "input.json"
    path.write_text(json.dumps(cfg))
    return path


def crawl(site: Site, out_dir: Path, seeds: list[str], **overrides) -> Run:
    out_dir.mkdir(parents=True, exist_ok=True)
    site.reset()
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, str(CRAWLER), str(config(out_dir, seeds, **overrides))],
        capture_output=True, text=True, timeout=60, cwd=out_dir,
    )
    run = Run(proc, out_dir, site.requested(), time.monotonic() - started)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return run


@pytest.fixture(scope="module")
def site():
    s = Site().start()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def depth2(site, tmp_path_factory) -> Run:
    """One depth-2 crawl from A's root, shared by several tests (saves browser launches)."""
    return crawl(site, tmp_path_factory.mktemp("depth2"), [site.url(A)], max_depth=2)


# --------------------------------------------------------------------------- tests


def test_depth_one_crawls_only_seeds(site, tmp_path):
    dead = "http://127.0.0.5:9/nothing-listens-here"  # connection refused: an error, not a stop
    seeds = [site.url(A), dead, site.url(B, "/p1"), site.url(A, "/#same-page-again")]
    run = crawl(site, tmp_path, seeds, max_depth=1, concurrency=2)
    assert run.paths() == {(A, "/"), (B, "/p1")}
    assert {p["depth"] for p in run.pages} == {0}
    assert [e["url"] for e in run.output["errors"]] == [dead]
    assert any(e["status"] == "error" and e["url"] == dead for e in run.progress)
    assert run.output["timed_out"] is False and run.progress[-1]["status"] == "complete"
    html = [r for r in run.requests if not r[1].endswith((".png", ".woff2"))]
    assert sorted(html) == sorted([(A, "/"), (B, "/p1")])


def test_depth_two_follows_same_host_links_only(depth2):
    assert depth2.paths() == {(A, "/")} | {(A, f"/p{i}") for i in range(1, 5)}
    assert {p["url"]: p["depth"] for p in depth2.pages}[depth2.pages[0]["url"]] == 0
    assert sorted(p["depth"] for p in depth2.pages) == [0, 1, 1, 1, 1]
    # never another host, never depth 2 (/deepN), neither fetched nor requested
    assert {addr for addr, _ in depth2.requests} == {A}
    assert not any(path.startswith("/deep") for _, path in depth2.requests)
    root = next(p for p in depth2.pages if p["depth"] == 0)
    assert root["links_found"] == 7  # nav "/" + 4 same-host + 2 other hosts; mailto: dropped
    assert root["status"] == 200 and root["final_url"] == root["url"]


def test_page_and_host_caps(site, tmp_path):
    run = crawl(
        site, tmp_path, [site.url(A), site.url(B)], max_depth=2, max_pages=5, max_pages_per_host=3
    )
    attempted = len(run.pages) + len(run.output["errors"])
    assert attempted == 5
    per_host = Counter(urlsplit(p["url"]).hostname for p in run.pages)
    assert max(per_host.values()) <= 3 and set(per_host) == {A, B}
    html = Counter(a for a, path in run.requests if not path.endswith((".png", ".woff2")))
    assert sum(html.values()) == 5 and max(html.values()) <= 3


def test_images_and_fonts_blocked(site, depth2, tmp_path):
    assert not [r for r in depth2.requests if r[1] in ("/img.png", "/font.woff2")]
    assert depth2.output["blocked_requests"] >= len(depth2.pages)
    # control: the same page does fetch them when blocking is off
    run = crawl(site, tmp_path, [site.url(A)], block_resources=False)
    assert (A, "/img.png") in run.requests and (A, "/font.woff2") in run.requests
    assert run.output["blocked_requests"] == 0


def test_progress_lines(depth2):
    events = depth2.progress
    assert events[0] == {"stage": "browser", "status": "running", "message": "Launching browser"}
    assert events[1]["stage"] == "browser" and events[1]["status"] == "complete"
    running = [e for e in events if e["stage"] == "crawl" and e["status"] == "running"]
    assert [e["current"] for e in running] == list(range(1, len(depth2.pages) + 1))
    totals = [e["total"] for e in running]
    assert totals == sorted(totals) and totals[-1] == len(depth2.pages)
    assert all(e["current"] <= e["total"] for e in running)
    assert events[-1] == {
        "stage": "crawl", "status": "complete", "message": "Crawl complete", "pages": 5
    }


def test_main_content_extraction(depth2):
    root = next(p for p in depth2.pages if p["depth"] == 0)
    mark = marker(A, "/")
    assert mark in root["text"] and "zebra quantum lighthouse" in root["text"]
    assert NAV.split()[0] not in root["text"] and FOOTER.split()[0] not in root["text"]
    assert root["title"] == f"Title {mark}"
    assert root["description"] == f"Description of {mark}"
    assert len(root["text"]) <= 5000
    assert depth2.output["browser_version"]
    done = json.loads((depth2.out_dir / "done.json").read_text())
    assert done == {"pages": 5, "timed_out": False}
    assert abs(float((depth2.out_dir / "alive").read_text()) - time.time()) < 120


def test_max_chars_truncates(site, tmp_path):
    run = crawl(site, tmp_path, [site.url(C)], max_chars=100)
    assert len(run.pages[0]["text"]) == 100


def test_timeout_leaves_partial_output(site, tmp_path):
    seeds = [site.url(A, "/p1"), site.url(A, "/p2"), site.url(A, "/slow")]
    run = crawl(site, tmp_path, seeds, max_duration_s=6)
    assert run.output["timed_out"] is True
    assert run.paths() == {(A, "/p1"), (A, "/p2")}
    assert run.elapsed < SLOW_S  # the slow page was cancelled at the deadline
    assert json.loads((tmp_path / "done.json").read_text()) == {"pages": 2, "timed_out": True}
    assert run.progress[-1]["status"] == "complete"


def test_sigterm_writes_partial_output(site, tmp_path):
    seeds = [site.url(B, "/p1"), site.url(B, "/slow")]
    site.reset()
    proc = subprocess.Popen(
        [sys.executable, str(CRAWLER), str(config(tmp_path, seeds, max_duration_s=30))],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
    )
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:  # wait until /p1 is done and /slow is in flight
            out = tmp_path / "out.json"
            if out.exists() and json.loads(out.read_text())["pages"] and (B, "/slow") in site.requested():
                break
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    output = json.loads((tmp_path / "out.json").read_text())
    assert output["cancelled"] is True and output["timed_out"] is True
    assert [urlsplit(p["url"]).path for p in output["pages"]] == ["/p1"]
    assert json.loads((tmp_path / "done.json").read_text())["cancelled"] is True
    assert proc.returncode != 0


def test_verify_ok_with_chromium(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(CRAWLER), "--verify", "--executable", CHROMIUM],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("__VERIFY__"))
    result = json.loads(line[len("__VERIFY__"):])
    assert proc.returncode == 0 and result["ok"] is True and result["version"], proc.stderr


def test_verify_fails_with_bogus_executable(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(CRAWLER), "--verify", "--executable", str(tmp_path / "no-browser")],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("__VERIFY__"))
    result = json.loads(line[len("__VERIFY__"):])
    assert proc.returncode == 1 and result["ok"] is False and result["error"]


def test_crawler_is_standalone():
    source = CRAWLER.read_text()
    assert "deep_research" not in "\n".join(
        ln for ln in source.splitlines() if ln.startswith(("import", "from"))
    )
    assert os.access(CRAWLER, os.R_OK)
