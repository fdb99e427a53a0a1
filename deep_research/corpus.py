"""Serve a folder of HTML pages over loopback, so the crawler and the local index have a corpus.

The default corpus is the Debian Python documentation (`PYTHON_DOCS`); its `_static` folder holds
symlinks (jquery.js, underscore.js), which are followed: `SimpleHTTPRequestHandler` opens the
translated path with `open()`, which resolves symlinks.

    python -m deep_research.corpus --root /usr/share/doc/python3.11/html --host 127.0.0.2 --port 8765
"""

from __future__ import annotations

import argparse
import functools
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

PYTHON_DOCS = Path("/usr/share/doc/python3.11/html")
DEFAULT_HOST = "127.0.0.2"
DEFAULT_PORT = 8765


class _QuietHandler(SimpleHTTPRequestHandler):
    """Static file handler without the per-request stderr log line."""

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def serve_directory(
    root: Path, host: str = DEFAULT_HOST, port: int = 0
) -> tuple[ThreadingHTTPServer, str]:
    """Serve `root` at http://host:port/ from a daemon thread; port 0 picks a free port.

    Returns the server and its base URL (ending in "/"). Stop it with
    `server.shutdown(); server.server_close()`.
    """
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"corpus root {root} is not a directory")
    handler = functools.partial(_QuietHandler, directory=str(root))
    server = _Server((host, port), handler)
    bound_host, bound_port = server.server_address[:2]
    if ":" in str(bound_host):  # IPv6 literal
        bound_host = f"[{bound_host}]"
    base_url = f"http://{bound_host}:{bound_port}/"
    thread = threading.Thread(
        target=server.serve_forever, name=f"corpus-{bound_port}", daemon=True
    )
    thread.start()
    return server, base_url


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m deep_research.corpus", description="Serve a folder of HTML over loopback."
    )
    parser.add_argument("--root", type=Path, default=PYTHON_DOCS, help=f"folder to serve (default {PYTHON_DOCS})")
    parser.add_argument("--host", default=DEFAULT_HOST, help=f"address to bind (default {DEFAULT_HOST})")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0 = any free port)")
    args = parser.parse_args(argv)
    server, base_url = serve_directory(args.root, args.host, args.port)
    print(f"serving {args.root} at {base_url}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
        server.server_close()


if __name__ == "__main__":
    main()
