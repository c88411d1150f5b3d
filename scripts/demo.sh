#!/usr/bin/env bash
# Installs what is missing, builds the Fashion-MNIST example and trains it on
# two host replicas for 10 epochs. Extra arguments go to the example and,
# coming last, override the defaults, e.g.
#   scripts/demo.sh --epochs 2      scripts/demo.sh --replicas 4 --seed 1
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=scripts/lib/ensure-packages.sh
source scripts/lib/ensure-packages.sh
lockstep_prepare_host_build

echo "==> [3/4] build (cmake --build --preset host --target fashion_mnist)"
cmake --build --preset host --target fashion_mnist

echo "==> [4/4] run (fashion_mnist --replicas 2 --epochs 10${*:+ $*})"
exec build/host/examples/fashion_mnist --replicas 2 --epochs 10 "$@"
