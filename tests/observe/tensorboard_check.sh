#!/usr/bin/env bash
# lockstep's event files read by TensorBoard's own reader: tensorboard_writer
# trains a small model with the TensorBoard callback into a fresh log
# directory and says what it must hold; tensorboard_reader.py reads it with
# EventAccumulator and compares. The Python is $LOCKSTEP_PYTHON (default
# python3); exit 77 (ctest: skipped) where it cannot import tensorboard.
set -euo pipefail
writer=$1
here=$(cd "$(dirname "$0")" && pwd)
python=${LOCKSTEP_PYTHON:-python3}
if ! command -v "$python" >/dev/null 2>&1; then
  echo "skipped: no $python (set LOCKSTEP_PYTHON to a Python that has tensorboard)"
  exit 77
fi
if ! "$python" -c 'import tensorboard' 2>/dev/null; then
  echo "skipped: $python cannot import tensorboard (pip install tensorboard, or set LOCKSTEP_PYTHON)"
  exit 77
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$writer" "$dir/logs" "$dir/expected.json"
"$python" "$here/tensorboard_reader.py" "$dir/logs" "$dir/expected.json"
