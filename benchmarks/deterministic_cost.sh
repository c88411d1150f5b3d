#!/usr/bin/env bash
# What the deterministic mode costs (core/determinism.hpp): train_throughput
# on the MLP in the default mode and with Deterministic{U} for several unit
# counts, for the issue's two settings: 1 replica at batch 128 and 2 replicas
# at batch 1024.
# On the host each setting and mode is one `train_throughput --paired ROUNDS`
# process (default 30 rounds): the mode and the default mode take turns in
# one process, one epoch each, and the key is the median of the rounds'
# ratios. This machine's speed drifts by tens of percent within seconds;
# pairs a fraction of a second apart see the same machine where processes
# run one after the other did not (docs/benchmarks.md).
# Units: UNITS (default "rows 2 4 24", on cuda "2 4 24"): rows is the
# row-order scheme (Deterministic::in_row_order(), no units, host only); 2 covers 1
# and 2 replicas, 4 also 4, and 24 covers 1, 2, 3, 4, 6 and 8 (the tests' set).
# BACKEND=cuda measures train_throughput_cuda on one GPU instead (BUILD_DIR
# default build/cuda), at batch 128 and 1024, both modes with
# ReductionToOneDevice (the deterministic mode refuses NCCL), in ROUNDS
# (default 5) interleaved rounds of separate processes, medians.
# Prints key=value lines last:
#   <setting>_u<U>   samples/s of Deterministic{U} / the default mode (1.00: free; the goal: at least 0.90)
#   <setting>_rows   the same for the row-order scheme
# usage: [BACKEND=host|cuda] [ROUNDS=N] [UNITS="..."] benchmarks/deterministic_cost.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
source benchmarks/compare_common.sh  # median, samples_per_s, key_ratio
backend=${BACKEND:-host}
rounds=${ROUNDS:-}
[[ -n $rounds ]] || { rounds=30; [[ $backend == cuda ]] && rounds=5; }
# The row-order scheme runs on host replicas only.
default_units="rows 2 4 24"
[[ $backend == cuda ]] && default_units="2 4 24"
read -r -a units <<<"${UNITS:-$default_units}"
# name: the train_throughput flags of a setting
declare -A settings
case $backend in
  host)
    build=${1:-build/host}
    bench="$build/benchmarks/train_throughput"
    # One epoch of 60,000 samples a turn.
    settings=([r1_b128]="--replicas 1 --batch-size 128 --steps 469 --epochs 1"
              [r2_b1024]="--replicas 2 --batch-size 1024 --steps 59 --epochs 1")
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
# The key of a setting's unit count: <setting>_u<U>, or <setting>_rows.
key_of() { if [[ $2 == rows ]]; then echo "$1_rows"; else echo "$1_u$2"; fi; }
[[ -x $bench ]] || { echo "error: $bench not built (cmake --build $build --target $(basename "$bench"))" >&2; exit 2; }
if [[ $backend == host ]]; then
  out=""
  for name in $(printf '%s\n' "${!settings[@]}" | sort); do
    for u in "${units[@]}"; do
      # shellcheck disable=SC2086
      result=$("$bench" ${settings[$name]} --deterministic "$u" --paired "$rounds" | tail -1)
      echo "$name deterministic units=$u rounds=$rounds $result"
      out+="$(key_of "$name" "$u")=$(sed -n 's/.*ratio=\([0-9.]*\).*/\1/p' <<<"$result") "
    done
  done
  echo "${out% }"
  exit 0
fi
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
    out+=$(key_ratio "$(key_of "$name" "$u")" "$m" "$base")
  done
done
echo "${out% }"
