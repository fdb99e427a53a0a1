#!/usr/bin/env bash
# Installs what the project needs on a fresh Debian machine: Debian packages (chromium, bubblewrap,
# python3.11-doc) and a virtualenv with the project. Idempotent; quick when all is there.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
[ -d /usr/share/doc/python3.11/html ] || need+=(python3.11-doc)
command -v make >/dev/null 2>&1 || need+=(make)
if [ ${#need[@]} -gt 0 ]; then
  echo "[bootstrap] installing Debian packages: ${need[*]}" >&2
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ] || [ pyproject.toml -nt .venv/.installed ]; then
  echo "[bootstrap] creating .venv with the project" >&2
  [ -x .venv/bin/python ] || "$PY" -m venv .venv
  .venv/bin/pip install -q --disable-pip-version-check -e '.[test]'
  touch .venv/.installed
fi
