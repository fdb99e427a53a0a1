"""Artifact store: page contents and notes travel between activities by reference, not in history.

A reference is `artifact:<relative path>`. The local store is a directory on the worker host; a
deployment with workers on several hosts points DR_DATA_DIR at a shared volume.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

PREFIX = "artifact:"


class ArtifactStore:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def _path(self, ref: str) -> Path:
        if not ref.startswith(PREFIX):
            raise ValueError(f"not an artifact reference: {ref!r}")
        rel = ref[len(PREFIX):]
        path = (self.root / rel).resolve()
        if self.root.resolve() not in path.parents:
            raise ValueError(f"artifact reference escapes the store: {ref!r}")
        return path

    def put_json(self, key: str, value: Any) -> str:
        """Store `value` under `key` (e.g. "<workflow-id>/pages.json") atomically; return its reference."""
        ref = PREFIX + key
        path = self._path(ref)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(value, fh, ensure_ascii=False)
        os.replace(tmp, path)
        return ref

    def get_json(self, ref: str) -> Any:
        with self._path(ref).open(encoding="utf-8") as fh:
            return json.load(fh)
