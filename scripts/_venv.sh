# Sourced by the scripts: create the project's virtual environment once and install what the caller needs.
# Usage: . scripts/_venv.sh [EXTRA]   (EXTRA: a pip extra such as "dev")
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${MANIFEST_COMMITTER_VENV:-$ROOT/.venv}"
PYTHON="${PYTHON:-python3}"
if [ ! -x "$VENV/bin/python" ]; then
  echo "Creating virtual environment in $VENV"
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --upgrade pip
fi
# shellcheck disable=SC1091
. "$VENV/bin/activate"
SPEC="$ROOT"
if [ -n "${1:-}" ]; then SPEC="$ROOT[$1]"; fi
echo "Installing manifest-committer${1:+[$1]} (editable) into $VENV"
python -m pip install --quiet --disable-pip-version-check -e "$SPEC" 2>&1 | grep -v '^WARNING: Location' || true
python -c "import manifest_committer" || { echo "installation failed" >&2; exit 1; }
cd "$ROOT"
