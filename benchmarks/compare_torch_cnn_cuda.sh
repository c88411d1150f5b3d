#!/usr/bin/env bash
# lockstep's train_throughput_cuda --model cnn (cuDNN) against PyTorch on the
# same GPU, the same CNN (Keras' simple MNIST convnet) and the same synthetic
# data (benchmarks/peers/torch_cnn.py --device cuda: model and data set on the
# GPU, eager steps, as a PyTorch user writes it), one GPU, batch 128 and 1024,
# alternating in each round; medians over ROUNDS (default 3). For a GPU node
# (scripts/gpu-check.sh builds build/cuda first); the python3 there must hold a
# CUDA build of torch.
# Prints key=value lines last:
#   lockstep_bB_samples_per_s, torch_bB_samples_per_s   medians, batch B
#   ratio_vs_torch_bB                                   lockstep / torch
#
# usage: benchmarks/compare_torch_cnn_cuda.sh [BUILD_DIR]   (default build/cuda)
# Environment: ROUNDS (3), SAMPLES per run (60032: 469 batches of 128), PYTHON (python3).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=benchmarks/compare_common.sh
source benchmarks/compare_common.sh
build=${1:-build/cuda}
rounds=${ROUNDS:-3}
samples=${SAMPLES:-60032}
py=${PYTHON:-python3}
bench=$build/benchmarks/train_throughput_cuda
[[ -x $bench ]] || { echo "error: $bench not built (cmake --build $build --target train_throughput_cuda)" >&2; exit 2; }
[[ $rounds =~ ^[1-9][0-9]*$ && $samples =~ ^[1-9][0-9]*$ ]] ||
  { echo "error: ROUNDS='$rounds' and SAMPLES='$samples' must be integers >= 1" >&2; exit 2; }

declare -A ours theirs
for ((r = 1; r <= rounds; r++)); do
  for b in 128 1024; do
    steps=$((samples / b))
    o=$(measure "$bench" --backend cuda --replicas 1 --model cnn --batch-size "$b" --steps "$steps")
    t=$(measure "$py" benchmarks/peers/torch_cnn.py --device cuda --batch-size "$b" --steps "$steps")
    echo "round $r batch $b: lockstep $o, torch $t samples/s"
    ours[$b]+="$o "
    theirs[$b]+="$t "
  done
done
line=""
for b in 128 1024; do
  # shellcheck disable=SC2086  # the lists are numbers separated by spaces
  o=$(median ${ours[$b]}) t=$(median ${theirs[$b]})
  echo "lockstep_b${b}_samples_per_s=$o"
  echo "torch_b${b}_samples_per_s=$t"
  line+=$(key_ratio "ratio_vs_torch_b$b" "$o" "$t")
done
echo "$line"
