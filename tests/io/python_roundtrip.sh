#!/usr/bin/env bash
# Weight files between lockstep and Python's safetensors, both ways: Python
# reads what lockstep wrote (Keras' names, shapes, values, metadata), writes
# the values doubled under the same names, and lockstep loads that file.
# The Python is tests/lib/reader_python.sh's; exit 77 (ctest: skipped) where
# it cannot import safetensors and numpy.
set -euo pipefail
tool=$1
# shellcheck source=tests/lib/reader_python.sh
source "$(dirname "$0")/../lib/reader_python.sh"
require_modules safetensors.numpy numpy
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$tool" write "$dir/ours.safetensors"
"$python" - "$dir/ours.safetensors" "$dir/theirs.safetensors" <<'PY'
import sys
import numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file, save_file
ours, theirs = sys.argv[1], sys.argv[2]
t = load_file(ours)
expected = {"dense/kernel": (3, 2), "dense/bias": (2,), "batch_normalization/gamma": (2,),
            "batch_normalization/beta": (2,), "batch_normalization/moving_mean": (2,),
            "batch_normalization/moving_variance": (2,)}
assert {k: v.shape for k, v in t.items()} == expected, {k: v.shape for k, v in t.items()}
assert all(v.dtype == np.float32 for v in t.values())
assert np.array_equal(t["dense/kernel"].ravel(), np.arange(6, dtype=np.float32) / 8)
assert np.array_equal(t["batch_normalization/moving_variance"], np.array([3, 4], dtype=np.float32))
with safe_open(ours, "np") as f:
    assert f.metadata()["format"] == "lockstep", f.metadata()
save_file({k: (v * 2).astype(np.float32) for k, v in t.items()}, theirs)
print("python read lockstep's file and wrote", theirs)
PY
"$tool" check "$dir/theirs.safetensors" 2
echo "lockstep read python's file"
