#!/usr/bin/env bash
# Installs everything the tests need, then runs format check, lint, type check and the whole test suite.
. "$(dirname "$0")/_venv.sh" dev
echo "== ruff format --check"; ruff format --check .
echo "== ruff check"; ruff check .
echo "== mypy --strict"; mypy
echo "== pytest"; python -m pytest "$@"
