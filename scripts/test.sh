#!/usr/bin/env bash
# Installs what is missing, configures and builds the host (CPU) preset; where
# nvcc is found, compiles every CUDA example, benchmark and test (the cuda
# preset) and runs the gpu tests, which report as skipped on a machine without
# a GPU; then runs the whole host test suite. The host suite runs last and the
# script ends with one line of totals over both, so the last word is about the
# tests that ran here, not about gpu tests that were skipped. Extra arguments
# go to the host ctest, e.g.
#   scripts/test.sh -R 'data:'      scripts/test.sh -LE e2e
# LOCKSTEP_SKIP_CUDA=1 leaves the CUDA build out. Where nvcc is found, the
# rehearsal of the GPU node's check (scripts/gpu-rehearsal.sh) runs after the
# host tests, before the totals; LOCKSTEP_SKIP_REHEARSAL=1 leaves it out. Where
# it runs and no GPU is visible, the cuda preset builds only the CUDA targets
# that need MPI (lockstep_cuda_mpi): the rehearsal compiles every other one
# with nvcc and starts its tests, and compiling them twice cost CI 4-5 minutes.
# After the host tests come the host tests again under sanitizers
# (scripts/sanitize.sh: ASan+UBSan, then TSan, in build/asan and build/tsan)
# and the fuzzers of the file readers (scripts/fuzz.sh: libFuzzer, 60 s per
# target, FUZZ_SECONDS to change); any report fails the script, and neither
# is counted in the totals. LOCKSTEP_SKIP_SANITIZERS=1 and LOCKSTEP_SKIP_FUZZ=1
# leave them out.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=scripts/lib/ensure-packages.sh
source scripts/lib/ensure-packages.sh
# Each stage's seconds are printed after it, so that a slow CI run shows where
# its time went (the whole run is meant to stay under 40 minutes).
mark=$SECONDS
took() { echo "==> $1: $((SECONDS - mark)) s"; mark=$SECONDS; }
lockstep_prepare_host_build
lockstep_ensure_python_readers
took "packages and configure"

echo "==> [3/4] build (cmake --build --preset host -j 2)"
cmake --build --preset host -j 2
took "host build"

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

cuda=0 rehearse=0
if [[ ${LOCKSTEP_SKIP_CUDA:-0} != 1 ]] && { command -v nvcc >/dev/null 2>&1 || [[ -x /usr/local/cuda/bin/nvcc ]]; }; then
  command -v nvcc >/dev/null 2>&1 || export PATH=/usr/local/cuda/bin:$PATH
  cuda=1
  [[ ${LOCKSTEP_SKIP_REHEARSAL:-0} == 1 ]] || rehearse=1
fi
if ((!cuda)); then
  if [[ ${LOCKSTEP_SKIP_CUDA:-0} == 1 ]]; then
    echo "==> cuda: skipped (LOCKSTEP_SKIP_CUDA=1)"
  else
    echo "==> cuda: nvcc not found, the CUDA backend was not compiled"
  fi
else
  echo "==> [cuda 1/3] configure (cmake --preset cuda)"
  cmake --preset cuda
  if ((rehearse)) && ! nvidia-smi -L >/dev/null 2>&1; then
    # No GPU: the rehearsal below builds every target the node builds (all but
    # those that need MPI) and starts each gpu test, so here only the rest.
    echo "==> [cuda 2/3] compile the CUDA targets that need MPI (--target lockstep_cuda_mpi); the rehearsal compiles the others"
    cmake --build --preset cuda --target lockstep_cuda_mpi
    echo "==> [cuda 3/3] their gpu tests (ctest --preset cuda -L gpu -L mpi): skipped where no GPU is visible"
    ctest --preset cuda -L gpu -L mpi | tee "$logs/gpu.log"
  else
    echo "==> [cuda 2/3] compile every CUDA target with nvcc (cmake --build --preset cuda --target lockstep_cuda_all)"
    cmake --build --preset cuda --target lockstep_cuda_all
    echo "==> [cuda 3/3] gpu tests (ctest --preset cuda -L gpu): skipped where no GPU is visible"
    ctest --preset cuda -L gpu | tee "$logs/gpu.log"
  fi
  took "cuda build and gpu tests"
fi

echo "==> [4/4] host tests (ctest --preset host -j 2${*:+ $*})"
ctest --preset host -j 2 "$@" | tee "$logs/host.log"
took "host tests"

if [[ ${LOCKSTEP_SKIP_SANITIZERS:-0} == 1 ]]; then
  echo "==> sanitizers: skipped (LOCKSTEP_SKIP_SANITIZERS=1)"
else
  echo "==> sanitizers (scripts/sanitize.sh): the host tests under ASan+UBSan and under TSan"
  scripts/sanitize.sh
  took "sanitizers"
fi
if [[ ${LOCKSTEP_SKIP_FUZZ:-0} == 1 ]]; then
  echo "==> fuzz: skipped (LOCKSTEP_SKIP_FUZZ=1)"
else
  echo "==> fuzz (scripts/fuzz.sh): libFuzzer on the IDX, CSV and safetensors readers, ${FUZZ_SECONDS:-60} s each"
  scripts/fuzz.sh
  took "fuzz"
fi

# The GPU node's check, rehearsed on a stand-in for the node (set -e stops the
# script where it fails). Its gpu tests' ctest output joins the totals below.
if ((rehearse)); then
  echo "==> gpu rehearsal (scripts/gpu-rehearsal.sh): gpu-check.sh --prepare, then gpu-check.sh on a stand-in for the GPU node"
  scripts/gpu-rehearsal.sh
  # Its gpu tests count in the totals like the cuda preset's.
  cp build/gpu-rehearsal/out/gpu-tests.txt "$logs/gpu-rehearsal.log"
  took "gpu rehearsal"
elif ((cuda)); then
  echo "==> gpu rehearsal: skipped (LOCKSTEP_SKIP_REHEARSAL=1)"
else
  echo "==> gpu rehearsal: skipped (no CUDA build here)"
fi

echo "==> scripts/test.sh: $SECONDS s in all"
# Totals over every ctest run above, from ctest's own closing lines:
# "N% tests passed, F tests failed out of T" (newer ctest, pip's in the
# rehearsal: "100% tests passed out of T" when none failed), then one
# "(Skipped)" line per skipped test. (set -o pipefail has already stopped the
# script on a failure.)
awk '/tests failed out of/ { failed += $4; total += $NF }
     /tests passed out of/ { total += $NF }
     /\(Skipped\)$/ { skipped++ }
     END { printf "lockstep: %d passed, %d failed, %d skipped\n", total - failed - skipped, failed, skipped }' \
  "$logs"/*.log
