#!/usr/bin/env python3
"""Headless-browser crawler that runs INSIDE a sandbox as a single file.

    python crawler.py input.json                 crawl, see the input keys in DEFAULTS
    python crawler.py --verify [--executable P]  check that the browser launches

Standalone on purpose: only the stdlib, playwright and trafilatura (no `deep_research`
imports), because it is copied into a sandbox workspace and run there.

Talks to the outside through files and stdout only:
  * `__PROGRESS__{json}` lines on stdout (stage browser / crawl),
  * the output JSON, rewritten atomically after every finished page (partial output survives),
  * the alive file (unix time, refreshed every ~2 s) and the done marker (written last).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import time
from collections import deque
from urllib.parse import urlsplit, urlunsplit

try:  # a missing extractor must not kill the crawl: fall back to innerText
    import trafilatura
except Exception:  # pragma: no cover - depends on the sandbox image
    trafilatura = None

DEFAULTS = {
    "seeds": [],
    "max_pages": 20,
    "max_depth": 2,
    "max_links_per_page": 20,
    "max_pages_per_host": 5,
    "max_duration_s": 120.0,
    "max_chars": 20000,
    "concurrency": 3,
    "executable": "",
    "output": "crawl_output.json",
    "done_marker": "crawl.done",
    "alive_file": "crawl.alive",
    "block_resources": True,
}
BROWSER_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
]
BLOCKED_TYPES = {"image", "font", "media"}  # stylesheets stay: layout drives lazy loading
NETWORKIDLE_S, SCROLL_MAX_ITER, SCROLL_MAX_S, SCROLL_GROW_WAIT_MS = 3.0, 25, 12.0, 600
PAGE_INFO_JS = """() => {
  const m = document.querySelector('meta[name="description" i], meta[property="og:description"]');
  return {
    description: m ? (m.getAttribute('content') || '') : '',
    links: Array.from(document.querySelectorAll('a[href]'), a => a.href),
    text: document.body ? document.body.innerText : '',
  };
}"""
HEIGHT_JS = "() => document.documentElement ? document.documentElement.scrollHeight : 0"


def progress(**fields) -> None:
    print("__PROGRESS__" + json.dumps(fields), flush=True)


def write_atomic(path: str, data: str) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(data)
    os.replace(tmp, path)


def strip_fragment(url: str) -> str:
    return urlunsplit(urlsplit(url)._replace(fragment=""))


def normalize(url: str) -> str:
    """Key for the seen-set: no fragment, lowercase scheme/host, no trailing slash but root."""
    parts = urlsplit(url)
    path = parts.path or "/"
    if path != "/":
        path = path.rstrip("/") or "/"
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), path, parts.query, ""))


def host_key(url: str) -> str:
    """hostname:port with the scheme's default port filled in."""
    parts = urlsplit(url)
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme.lower(), 0)
    return f"{(parts.hostname or '').lower()}:{port}"


def describe(exc: BaseException) -> str:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


async def close_quietly(closable) -> None:
    try:
        await asyncio.wait_for(closable.close(), timeout=10)
    except BaseException:
        pass


def extract_text(html: str, url: str) -> str:
    if trafilatura is None:
        return ""
    try:
        return trafilatura.extract(
            html, url=url, include_comments=False, include_tables=True, favor_recall=True
        ) or ""
    except Exception:
        return ""


class Crawler:
    def __init__(self, cfg: dict):
        self.cfg = cfg
        self.started = time.time()
        self.deadline = time.monotonic() + float(cfg["max_duration_s"])
        self.queue: deque[tuple[str, int]] = deque()
        self.seen: set[str] = set()
        self.scheduled_per_host: dict[str, int] = {}
        self.attempted = 0
        self.active = 0
        self.total_shown = 0
        self.cond = asyncio.Condition()
        self.pages: list[dict] = []
        self.errors: list[dict] = []
        self.blocked = 0
        self.timed_out = False
        self.cancelled = False
        self.browser_version = ""
        for seed in cfg["seeds"]:
            url = seed.get("url", "") if isinstance(seed, dict) else str(seed)
            self.enqueue(strip_fragment(url), 0)

    # ------------------------------------------------------------------ scheduling
    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def enqueue(self, url: str, depth: int) -> bool:
        if urlsplit(url).scheme.lower() not in ("http", "https"):
            return False
        key, host = normalize(url), host_key(url)
        if key in self.seen or self.scheduled_per_host.get(host, 0) >= self.cfg["max_pages_per_host"]:
            return False
        self.seen.add(key)
        self.scheduled_per_host[host] = self.scheduled_per_host.get(host, 0) + 1
        self.queue.append((url, depth))
        return True

    async def next_job(self) -> tuple[str, int, int] | None:
        async with self.cond:
            while True:
                if self.attempted >= self.cfg["max_pages"] or self.cancelled:
                    return None
                if self.remaining() <= 0:
                    self.timed_out = self.timed_out or bool(self.queue or self.active)
                    return None
                if self.queue:
                    url, depth = self.queue.popleft()
                    self.attempted += 1
                    self.active += 1
                    return url, depth, self.attempted
                if self.active == 0:
                    return None
                await self.cond.wait()

    async def job_done(self) -> None:
        async with self.cond:
            self.active -= 1
            self.cond.notify_all()

    def total(self) -> int:
        self.total_shown = max(self.total_shown, min(self.cfg["max_pages"], len(self.seen)))
        return self.total_shown

    # ------------------------------------------------------------------ one page
    async def on_route(self, route) -> None:
        try:
            if route.request.resource_type in BLOCKED_TYPES:
                self.blocked += 1
                await route.abort()
            else:
                await route.continue_()
        except Exception:
            pass  # page or context closed under us

    async def auto_scroll(self, page) -> None:
        """Scroll to the bottom only while the document keeps growing (lazy content)."""
        stop_at = time.monotonic() + min(SCROLL_MAX_S, max(0.0, self.remaining()))
        for _ in range(SCROLL_MAX_ITER):
            wait_ms = min(SCROLL_GROW_WAIT_MS, (stop_at - time.monotonic()) * 1000)
            if wait_ms <= 0:
                return
            height = await page.evaluate(HEIGHT_JS)
            await page.evaluate("h => window.scrollTo(0, h)", height)
            try:
                await page.wait_for_function(f"() => ({HEIGHT_JS})() > {int(height)}", timeout=wait_ms)
            except Exception:
                return  # height stopped changing

    async def fetch(self, page, url: str, depth: int) -> dict:
        nav_ms = max(1000.0, min(30.0, self.remaining()) * 1000)
        response = await page.goto(url, wait_until="domcontentloaded", timeout=nav_ms)
        try:
            idle_s = min(NETWORKIDLE_S, self.remaining())
            if idle_s > 0:
                await page.wait_for_load_state("networkidle", timeout=idle_s * 1000)
        except Exception:
            pass  # busy pages never go idle; what has loaded is good enough
        await self.auto_scroll(page)
        final_url, title = page.url, await page.title()
        info = await page.evaluate(PAGE_INFO_JS)
        html = await page.content()
        text = await asyncio.to_thread(extract_text, html, final_url) or info.get("text") or ""
        links = self.collect_links(info.get("links") or [])
        if depth + 1 < self.cfg["max_depth"]:
            self.enqueue_links(final_url, links, depth + 1)
        return {
            "url": url, "final_url": final_url, "title": title,
            "description": info.get("description") or "",
            "text": text[: self.cfg["max_chars"]], "depth": depth,
            "status": response.status if response is not None else None,
            "links_found": len(links),
        }

    @staticmethod
    def collect_links(hrefs: list[str]) -> list[str]:
        links: dict[str, None] = {}
        for href in hrefs:
            if isinstance(href, str) and urlsplit(href).scheme.lower() in ("http", "https"):
                links.setdefault(strip_fragment(href), None)
        return list(links)

    def enqueue_links(self, page_url: str, links: list[str], depth: int) -> None:
        host, added = host_key(page_url), 0
        for link in links:
            if added >= self.cfg["max_links_per_page"]:
                break
            if host_key(link) == host and self.enqueue(link, depth):
                added += 1

    async def worker(self, context) -> None:
        page = await context.new_page()
        try:
            while (job := await self.next_job()) is not None:
                url, depth, n = job
                progress(stage="crawl", status="running", current=n, total=self.total(), url=url)
                try:
                    self.pages.append(await self.fetch(page, url, depth))
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    self.errors.append({"url": url, "error": describe(exc)})
                    progress(stage="crawl", status="error", url=url, message=describe(exc))
                    await close_quietly(page)  # a crashed or wedged tab: start the next one fresh
                    page = await context.new_page()
                finally:
                    self.write_output()
                    await self.job_done()
        finally:
            await close_quietly(page)

    # ------------------------------------------------------------------ whole crawl
    def snapshot(self) -> dict:
        out = {
            "pages": self.pages, "errors": self.errors, "timed_out": self.timed_out,
            "blocked_requests": self.blocked,
            "started_at": self.started, "finished_at": time.time(),
            "browser_version": self.browser_version,
            "extractor": "trafilatura" if trafilatura is not None else "innerText",
        }
        if self.cancelled:
            out["cancelled"] = True
        return out

    def write_output(self) -> None:
        write_atomic(self.cfg["output"], json.dumps(self.snapshot(), ensure_ascii=False))

    def finish(self, error: str = "") -> None:
        self.write_output()
        marker = {"pages": len(self.pages), "timed_out": self.timed_out}
        if self.cancelled:
            marker["cancelled"] = True
        if error:
            marker["error"] = error
        write_atomic(self.cfg["done_marker"], json.dumps(marker))

    async def keep_alive(self) -> None:
        while True:
            write_atomic(self.cfg["alive_file"], f"{time.time():.3f}\n")
            await asyncio.sleep(2.0)

    async def crawl(self, pw) -> None:
        progress(stage="browser", status="running", message="Launching browser")
        browser = await pw.chromium.launch(
            headless=True, args=BROWSER_ARGS, executable_path=self.cfg["executable"] or None
        )
        workers: list[asyncio.Task] = []
        try:
            self.browser_version = browser.version
            progress(stage="browser", status="complete", version=self.browser_version)
            context = await browser.new_context(service_workers="block", ignore_https_errors=True)
            if self.cfg["block_resources"]:
                await context.route("**/*", self.on_route)
            n = max(1, min(int(self.cfg["concurrency"]), self.cfg["max_pages"]))
            workers = [asyncio.create_task(self.worker(context)) for _ in range(n)]
            _, pending = await asyncio.wait(workers, timeout=max(0.0, self.remaining()))
            self.timed_out = self.timed_out or bool(pending)  # deadline: cancel in-flight pages
        finally:
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            await close_quietly(browser)


async def run(cfg: dict) -> int:
    from playwright.async_api import async_playwright

    crawler = Crawler(cfg)
    main_task = asyncio.current_task()
    loop = asyncio.get_running_loop()

    def on_signal() -> None:
        crawler.cancelled = crawler.timed_out = True
        main_task.cancel()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal)
    alive = asyncio.create_task(crawler.keep_alive())
    code, error = 0, ""
    try:
        async with async_playwright() as pw:
            await crawler.crawl(pw)
    except asyncio.CancelledError:
        code = 143
    except Exception as exc:
        code, error = 1, describe(exc)
        crawler.errors.append({"url": "", "error": error})
        stage = "crawl" if crawler.browser_version else "browser"  # launch failed?
        progress(stage=stage, status="error", url="", message=error)
    finally:
        alive.cancel()
    crawler.finish(error)
    if code == 0:
        progress(stage="crawl", status="complete", message="Crawl complete", pages=len(crawler.pages))
    return code


async def verify(executable: str) -> int:
    try:
        from playwright.async_api import async_playwright

        async with async_playwright() as pw:
            browser = await pw.chromium.launch(
                headless=True, args=BROWSER_ARGS, executable_path=executable or None, timeout=60000
            )
            page = await browser.new_page()
            await page.goto("data:text/html,<title>ok</title><p>ok</p>")
            assert await page.title() == "ok", "blank page did not render"
            version = browser.version
            await browser.close()
        print("__VERIFY__" + json.dumps({"ok": True, "version": version}), flush=True)
        return 0
    except Exception as exc:
        print("__VERIFY__" + json.dumps({"ok": False, "error": describe(exc)}), flush=True)
        return 1


def load_config(path: str) -> dict:
    with open(path, encoding="utf-8") as f:
        cfg = {**DEFAULTS, **{k: v for k, v in json.load(f).items() if v is not None}}
    for key in ("max_pages", "max_depth", "max_links_per_page", "max_pages_per_host", "max_chars"):
        cfg[key] = int(cfg[key])
    return cfg


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("input", nargs="?", help="input JSON path")
    parser.add_argument("--verify", action="store_true", help="only check that the browser launches")
    parser.add_argument("--executable", default="", help="browser path for --verify")
    args = parser.parse_args(argv)
    if args.verify:
        return asyncio.run(verify(args.executable))
    if not args.input:
        parser.error("input JSON path is required")
    return asyncio.run(run(load_config(args.input)))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
