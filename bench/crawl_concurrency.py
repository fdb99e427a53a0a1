"""Crawl throughput: several pages at once in one browser vs one at a time, measured in one run.

    .venv/bin/python bench/crawl_concurrency.py [--pages 16] [--rounds 2]

Serves the Python docs on loopback, runs the in-sandbox crawler (as a plain subprocess, so the
sandbox's own overhead is not in the numbers) over the same seed pages with concurrency 1 (the
baseline) and 3 (what the crawl activity uses), and prints pages per second and the ratio.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from deep_research.corpus import PYTHON_DOCS, serve_directory  # noqa: E402

CRAWLER = ROOT / "deep_research" / "crawler" / "crawler.py"
SEEDS = ["library/subprocess.html", "library/pathlib.html", "library/asyncio-task.html", "library/sqlite3.html",
         "library/typing.html", "library/enum.html", "library/statistics.html", "reference/datamodel.html",
         "reference/compound_stmts.html", "glossary.html", "tutorial/classes.html", "howto/logging.html",
         "library/os.html", "library/json.html", "library/re.html", "library/functools.html"]


def crawl(base: str, pages: int, concurrency: int, work: Path) -> tuple[float, int]:
    cfg = {"seeds": [{"url": base + s, "title": s, "snippet": ""} for s in SEEDS[:pages]],
           "max_pages": pages, "max_depth": 1, "max_links_per_page": 0, "max_pages_per_host": pages,
           "max_duration_s": 300, "max_chars": 12000, "concurrency": concurrency,
           "executable": shutil.which("chromium") or "", "output": str(work / "out.json"),
           "done_marker": str(work / "done.json"), "alive_file": str(work / "alive")}
    (work / "in.json").write_text(json.dumps(cfg))
    started = time.perf_counter()
    subprocess.run([sys.executable, str(CRAWLER), str(work / "in.json")], check=True, stdout=subprocess.DEVNULL)
    elapsed = time.perf_counter() - started
    return elapsed, len(json.loads((work / "out.json").read_text())["pages"])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    server, base = serve_directory(PYTHON_DOCS, "127.0.0.2", 0)
    try:
        results: dict[int, list[float]] = {1: [], 3: []}
        with tempfile.TemporaryDirectory() as tmp:
            for _ in range(args.rounds):
                for concurrency in (1, 3):  # interleaved so drift hits both alike
                    elapsed, fetched = crawl(base, args.pages, concurrency, Path(tmp))
                    results[concurrency].append(fetched / elapsed)
        base_rate, fast_rate = max(results[1]), max(results[3])
        print(f"concurrency 1 (baseline): {base_rate:.2f} pages/s")
        print(f"concurrency 3           : {fast_rate:.2f} pages/s")
        print(f"ratio                   : {fast_rate / base_rate:.2f}x")
    finally:
        server.shutdown()
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
