#!/usr/bin/env bash
# What the deterministic mode costs (core/determinism.hpp): train_throughput
# on the MLP in the default mode and with Deterministic{U} for several unit
# counts, in interleaved rounds so that every mode sees the same machine;
# medians over ROUNDS (default 5), for the issue's two settings: 1 replica at
# batch 128 and 2 replicas at batch 1024.
# Units: UNITS (default "rows 2 4 24", on cuda "2 4 24"): rows is the
# row-order scheme (Deterministic::in_row_order(), no units, host only); 2 covers 1
# and 2 replicas, 4 also 4, and 24 covers 1, 2, 3, 4, 6 and 8 (the tests' set).
# BACKEND=cuda measures train_throughput_cuda on one GPU instead (BUILD_DIR
# default build/cuda), at batch 128 and 1024, both modes with
# ReductionToOneDevice (the deterministic mode refuses NCCL).
# Prints key=value lines last:
#   <setting>_u<U>   samples/s of Deterministic{U} / the default mode (1.00: free; the goal: at least 0.90)
#   <setting>_rows   the same for the row-order scheme
# usage: [BACKEND=host|cuda] benchmarks/deterministic_cost.sh [BUILD_DIR]   (default build/host, build/cuda)
set -euo pipefail
cd "$(dirname "$0")/.."
source benchmarks/compare_common.sh  # median, samples_per_s, key_ratio
backend=${BACKEND:-host}
rounds=${ROUNDS:-5}
# The row-order scheme runs on host replicas only.
default_units="rows 2 4 24"
[[ $backend == cuda ]] && default_units="2 4 24"
read -r -a units <<<"${UNITS:-$default_units}"
# name: the train_throughput flags of a setting (about 2 s a run on the host)
declare -A settings
case $backend in
  host)
    build=${1:-build/host}
    bench="$build/benchmarks/train_throughput"
    settings=([r1_b128]="--replicas 1 --batch-size 128 --steps 469 --epochs 2"
              [r2_b1024]="--replicas 2 --batch-size 1024 --steps 59 --epochs 4")
    ;;
  cuda)
    build=${1:-build/cuda}
    bench="$build/benchmarks/train_throughput_cuda"
    common="--backend cuda --collective one_device --replicas 1"
    settings=([gpu1_b128]="$common --batch-size 128 --steps 469 --epochs 2"
              [gpu1_b1024]="$common --batch-size 1024 --steps 59 --epochs 4")
    ;;
  *) echo "error: BACKEND='$backend', expected host or cuda" >&2; exit 2 ;;
esac
[[ -x $bench ]] || { echo "error: $bench not built (cmake --build $build --target $(basename "$bench"))" >&2; exit 2; }
declare -A runs
for ((round = 1; round <= rounds; round++)); do
  for name in "${!settings[@]}"; do
    for u in 0 "${units[@]}"; do
      flags=""
      [[ $u == 0 ]] || flags="--deterministic $u"
      # shellcheck disable=SC2086
      line=$("$bench" ${settings[$name]} --mfu no $flags | tail -1)
      runs[${name}_u$u]+=" $(samples_per_s <<<"$line")"
    done
  done
  echo "round $round done" >&2
done
out=""
for name in $(printf '%s\n' "${!settings[@]}" | sort); do
  # shellcheck disable=SC2086
  base=$(median ${runs[${name}_u0]})
  echo "$name default samples_per_s runs:${runs[${name}_u0]} median=$base"
  for u in "${units[@]}"; do
    # shellcheck disable=SC2086
    m=$(median ${runs[${name}_u$u]})
    echo "$name deterministic units=$u samples_per_s runs:${runs[${name}_u$u]} median=$m"
    key=${name}_u$u
    [[ $u == rows ]] && key=${name}_rows
    out+=$(key_ratio "$key" "$m" "$base")
  done
done
echo "${out% }"
