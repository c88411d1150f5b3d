#!/usr/bin/env bash
# lockstep's event files read by TensorBoard's own reader: tensorboard_writer
# trains a small model with the TensorBoard callback into a fresh log
# directory and says what it must hold; tensorboard_reader.py reads it with
# EventAccumulator and compares. The Python is tests/lib/reader_python.sh's;
# exit 77 (ctest: skipped) where it cannot import tensorboard.
set -euo pipefail
writer=$1
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/lib/reader_python.sh
source "$here/../lib/reader_python.sh"
require_modules tensorboard
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$writer" "$dir/logs" "$dir/expected.json"
"$python" "$here/tensorboard_reader.py" "$dir/logs" "$dir/expected.json"
