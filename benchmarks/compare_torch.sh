#!/usr/bin/env bash
# lockstep's train_throughput against the PyTorch peer (../shared/peers/
# torch_seed_model.py, Debian's python3-torch) on the same model, alternating
# in each round so both see the same machine; medians over ROUNDS (default 3).
# Prints key=value lines last:
#   ratio_vs_torch_b128    lockstep 1 replica / torch 1 thread, batch 128
#   ratio_vs_torch_b1024   best lockstep setting / best torch setting, batch 1024
#   weak_scaling           2 replicas at 128 each / (2 x 1 replica at 128 on one BLAS thread)
#   weak_scaling_ceiling   two independent 1-replica processes at once, their summed
#                          samples/s / (2 x 1 replica alone): what the cores give two
#                          replicas that never communicate nor wait, the bound on weak_scaling
# usage: benchmarks/compare_torch.sh [BUILD_DIR]   (default build/host)
set -euo pipefail
cd "$(dirname "$0")/.."
source benchmarks/compare_common.sh  # median, samples_per_s
build=${1:-build/host}
rounds=${ROUNDS:-3}
peer=${PEER:-../shared/peers/torch_seed_model.py}
bench="$build/benchmarks/train_throughput"
[[ -x $bench ]] || { echo "error: $bench not built (cmake --build --preset host)" >&2; exit 2; }
[[ -f $peer ]] || { echo "error: the torch peer $peer is missing" >&2; exit 2; }
/usr/bin/python3 -c 'import torch' 2>/dev/null || { echo "error: python3-torch is missing: apt-get install python3-torch" >&2; exit 2; }

ours() { "$bench" "$@" | samples_per_s; }
torch() { /usr/bin/python3 "$peer" 1 "$1" "$2" | sed -n 's/.*samples\/s=\([0-9]*\).*/\1/p'; }

declare -A runs
for ((round = 1; round <= rounds; round++)); do
  runs[l1_128]+=" $(ours --replicas 1 --batch-size 128 --steps 469)"
  runs[t1_128]+=" $(torch 128 1)"
  runs[l1_1024]+=" $(ours --replicas 1 --batch-size 1024 --steps 59)"
  runs[l2_1024]+=" $(ours --replicas 2 --batch-size 1024 --steps 59)"
  runs[t1_1024]+=" $(torch 1024 1)"
  runs[t2_1024]+=" $(torch 1024 2)"
  # Weak scaling: both on a 60,000-sample data set, 4 epochs each, so that
  # a passing hiccup of this shared machine weighs less on either.
  runs[l1_128_1t]+=" $(ours --replicas 1 --batch-size 128 --steps 469 --epochs 4 --blas-threads 1)"
  runs[l2_256]+=" $(ours --replicas 2 --batch-size 256 --steps 235 --epochs 4)"
  pair=$(mktemp)
  for _ in 1 2; do ours --replicas 1 --batch-size 128 --steps 469 --epochs 4 --blas-threads 1 --mfu no >>"$pair" & done
  wait
  runs[pair_128_1t]+=" $(awk '{s += $1} END {print s}' "$pair")"
  rm -f "$pair"
  echo "round $round done" >&2
done
declare -A m
for key in "${!runs[@]}"; do
  # shellcheck disable=SC2086
  m[$key]=$(median ${runs[$key]})
  echo "$key samples_per_s runs:${runs[$key]} median=${m[$key]}"
done
best_l=$((m[l1_1024] > m[l2_1024] ? m[l1_1024] : m[l2_1024]))
best_t=$((m[t1_1024] > m[t2_1024] ? m[t1_1024] : m[t2_1024]))
awk -v a="${m[l1_128]}" -v b="${m[t1_128]}" -v c="$best_l" -v d="$best_t" -v e="${m[l2_256]}" -v f="${m[l1_128_1t]}" \
  -v g="${m[pair_128_1t]}" 'BEGIN { printf "ratio_vs_torch_b128=%.3f ratio_vs_torch_b1024=%.3f weak_scaling=%.3f weak_scaling_ceiling=%.3f\n", a / b, c / d, e / (2 * f), g / (2 * f) }'
