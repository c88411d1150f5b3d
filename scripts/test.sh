#!/usr/bin/env bash
# Installs what is missing, configures, builds and runs the whole test suite
# on the host (CPU) preset. Extra arguments go to ctest, e.g.
#   scripts/test.sh -R 'data:'      scripts/test.sh -LE e2e
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=scripts/lib/ensure-packages.sh
source scripts/lib/ensure-packages.sh
lockstep_prepare_host_build

echo "==> [3/4] build (cmake --build --preset host -j 2)"
cmake --build --preset host -j 2

echo "==> [4/4] test (ctest --preset host -j 2${*:+ $*})"
ctest --preset host -j 2 "$@"
