#!/usr/bin/env bash
# Installs everything the tests need, then runs format check, lint, type check and the whole test suite, on the
# newest framework releases the extras admit. Arguments go to pytest. The writer tests on the oldest releases are a
# step of their own (scripts/run-oldest-tests.sh), which .ci/run runs after this one.
. "$(dirname "$0")/_venv.sh" dev
# The writers run on the newest releases of their frameworks that the extras admit, so that a new release that
# breaks one fails here, not for a user: a .venv holding older ones (or missing one) gets them installed.
# MANIFEST_COMMITTER_FRAMEWORKS=installed tests what is installed instead (no index to ask, say).
if [ "${MANIFEST_COMMITTER_FRAMEWORKS:-newest}" != installed ]; then
  newest="$(python scripts/frameworks.py newest)"
  # shellcheck disable=SC2086  # one pin a word
  if ! python scripts/frameworks.py check $newest; then
    echo "== pip install $newest"
    # shellcheck disable=SC2086
    python -m pip install --quiet --disable-pip-version-check -e ".[dev]" $newest 2>&1 | grep -v '^WARNING: Location' || true
    # shellcheck disable=SC2086
    python scripts/frameworks.py check $newest
  fi
  echo "== frameworks: $newest"
fi
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
# The multi-host marker tests simulate hosts with network namespaces (`ip netns`, as root): iproute2.
command -v ip >/dev/null || { echo "== apt-get install iproute2"; apt-get update -qq && apt-get install -y -qq iproute2 >/dev/null; }
. scripts/_tmpdir.sh
echo "== ruff format --check"; ruff format --check .
echo "== ruff check"; ruff check .
echo "== mypy --strict"; mypy
echo "== pytest"; python -m pytest "$@"
