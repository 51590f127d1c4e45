#!/usr/bin/env bash
# The writer tests on the oldest releases of the frameworks that the extras admit (pyproject.toml's lower bounds
# of pyspark, pyarrow, polars, dask and ray; everything else as pip resolves it), in an environment of their own:
# .venv-oldest/ (MANIFEST_COMMITTER_OLDEST_VENV), made and kept up to date here. .ci/run runs this as its own step
# after scripts/run-tests.sh; alone: bash scripts/run-oldest-tests.sh [pytest arguments instead of the writer tests].
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
MAIN="${MANIFEST_COMMITTER_VENV:-$ROOT/.venv}"
OLDEST="${MANIFEST_COMMITTER_OLDEST_VENV:-$ROOT/.venv-oldest}"
PYTHON="${PYTHON:-python3}"
# Every writer in every format and save mode, Polars' and pyarrow's own tests; on local disk and memory (the
# emulators' tests run in the whole suite, on the newest releases).
WRITER_TESTS=(tests/writing tests/test_polars.py tests/test_arrow.py -m "not azure and not gcs and not s3")
# The project's environment reads the bounds (scripts/frameworks.py needs `packaging`).
if [ ! -x "$MAIN/bin/python" ]; then (. scripts/_venv.sh dev); fi
oldest="$("$MAIN/bin/python" scripts/frameworks.py oldest)"
echo "== writers on the oldest releases: $oldest"
if [ ! -x "$OLDEST/bin/python" ]; then
  echo "Creating virtual environment in $OLDEST"
  "$PYTHON" -m venv "$OLDEST"
  "$OLDEST/bin/python" -m pip install --quiet --upgrade pip
fi
# shellcheck disable=SC2086  # one pin a word
"$OLDEST/bin/python" -m pip install --quiet --disable-pip-version-check -e ".[dev]" $oldest 2>&1 \
  | grep -v '^WARNING: Location' || true
# shellcheck disable=SC2086
"$OLDEST/bin/python" scripts/frameworks.py check $oldest
. scripts/_tmpdir.sh
if [ $# -gt 0 ]; then "$OLDEST/bin/python" -m pytest "$@"; else "$OLDEST/bin/python" -m pytest "${WRITER_TESTS[@]}"; fi
