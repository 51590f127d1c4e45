#!/usr/bin/env bash
# Runs the main job on the embedded default: a multi-process, partitioned write committed to ./example-output.
. "$(dirname "$0")/_venv.sh"
python examples/multi_task_write.py "$@"
