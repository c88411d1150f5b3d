#!/usr/bin/env bash
# What the profiler costs: train_throughput with the plain strategy (off),
# with Profiled<strategy> and the profiler stopped (compiled), and recording
# every timed step (recording), in interleaved rounds so that all three see
# the same machine; medians over ROUNDS (default 5), for two settings:
# 1 replica at batch 128 and 2 replicas at batch 1024, the MLP and the convnet.
# The machine's noise (10-20% between runs here) is larger than the cost, so
# each recording run also prints span_share: its spans counted, times the
# cost of one span measured in the same process, over the step time: the
# recording's own cost, free of that noise.
# Prints key=value lines last:
#   <setting>_compiled    samples/s of compiled / off   (the goal: 1.00)
#   <setting>_recording   samples/s of recording / off  (the goal: at least 0.97)
#   <setting>_span_share  the median span_share of the recording runs
# usage: benchmarks/profile_overhead.sh [BUILD_DIR]   (default build/host)
set -euo pipefail
cd "$(dirname "$0")/.."
source benchmarks/compare_common.sh  # median, samples_per_s, key_ratio
build=${1:-build/host}
rounds=${ROUNDS:-5}
bench="$build/benchmarks/train_throughput"
[[ -x $bench ]] || { echo "error: $bench not built (cmake --build --preset host)" >&2; exit 2; }

# name: the train_throughput flags of a setting
declare -A settings=(
  [mlp_r1_b128]="--replicas 1 --batch-size 128 --steps 469 --epochs 4"
  [mlp_r2_b1024]="--replicas 2 --batch-size 1024 --steps 59 --epochs 4"
  [cnn_r2_b128]="--model cnn --replicas 2 --batch-size 128 --steps 60"
)
declare -A runs
for ((round = 1; round <= rounds; round++)); do
  for name in "${!settings[@]}"; do
    for mode in off compiled recording; do
      # shellcheck disable=SC2086
      line=$("$bench" ${settings[$name]} --mfu no --profile $mode | tail -1)
      runs[${name}_$mode]+=" $(samples_per_s <<<"$line")"
      [[ $mode != recording ]] || runs[${name}_share]+=" $(sed -n 's/.*span_share=\([0-9.]*\).*/\1/p' <<<"$line")"
    done
  done
  echo "round $round done" >&2
done
out=""
for name in $(printf '%s\n' "${!settings[@]}" | sort); do
  # shellcheck disable=SC2086
  off=$(median ${runs[${name}_off]})
  for mode in compiled recording; do
    # shellcheck disable=SC2086
    m=$(median ${runs[${name}_$mode]})
    echo "$name $mode samples_per_s runs:${runs[${name}_$mode]} median=$m (off:${runs[${name}_off]} median=$off)"
    out+=$(key_ratio "${name}_$mode" "$m" "$off")
  done
  # shellcheck disable=SC2086
  out+="${name}_span_share=$(printf '%s\n' ${runs[${name}_share]} | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}') "
done
echo "${out% }"
