"""Worker-side configuration, read from the environment once at start-up.

Workflow code never reads this (determinism); activities and the CLI do. Secrets (API keys)
live here and nowhere else: they are never put into workflow inputs, results or logs.
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parent.parent


def _find_chromium() -> str:
    for candidate in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(candidate)
        if path:
            return path
    return "/usr/bin/chromium"


@dataclass(frozen=True)
class Settings:
    temporal_address: str = "localhost:7233"
    temporal_namespace: str = "default"
    task_queue: str = "deep-research"
    data_dir: Path = PROJECT_DIR / ".data"
    sandbox_provider: str = "local"
    search_provider: str = "local"
    search_index: Path = PROJECT_DIR / ".data" / "index.sqlite"
    chromium: str = field(default_factory=_find_chromium)
    # Interpreter that runs the crawler inside a local sandbox: the worker's own (it has
    # playwright and trafilatura), i.e. the "preinstalled" runtime of the seed.
    sandbox_python: str = sys.executable
    # Remote sandboxes (DR_SANDBOX_PROVIDER=sandy): the Sandy API and its key (kept out of repr/logs).
    sandy_base_url: str = ""
    sandy_api_key: str = field(default="", repr=False)

    @property
    def artifact_dir(self) -> Path:
        return self.data_dir / "artifacts"

    @property
    def sandbox_root(self) -> Path:
        return self.data_dir / "sandboxes"


def load_settings(env: dict[str, str] | None = None) -> Settings:
    env = dict(os.environ if env is None else env)
    data_dir = Path(env.get("DR_DATA_DIR", str(PROJECT_DIR / ".data"))).resolve()
    return Settings(
        temporal_address=env.get("TEMPORAL_ADDRESS", "localhost:7233"),
        temporal_namespace=env.get("TEMPORAL_NAMESPACE", "default"),
        task_queue=env.get("DR_TASK_QUEUE", "deep-research"),
        data_dir=data_dir,
        sandbox_provider=env.get("DR_SANDBOX_PROVIDER", "local"),
        search_provider=env.get("DR_SEARCH_PROVIDER", "local"),
        search_index=Path(env.get("DR_SEARCH_INDEX", str(data_dir / "index.sqlite"))),
        chromium=env.get("DR_CHROMIUM") or _find_chromium(),
        sandbox_python=env.get("DR_SANDBOX_PYTHON", sys.executable),
        sandy_base_url=env.get("SANDY_BASE_URL", ""),
        sandy_api_key=env.get("SANDY_API_KEY", ""),
    )
