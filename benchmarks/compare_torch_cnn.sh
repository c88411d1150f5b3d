#!/usr/bin/env bash
# lockstep's train_throughput --model cnn (or MODEL=cnn_bn) against PyTorch
# (Debian's 1.13 and 2.x) and TensorFlow/Keras 2.x on the same CNN (Keras' simple
# MNIST convnet) and the same synthetic data, each on 1 and 2 threads / replicas
# at batch 128 and 1024, alternating in each round so that all see the same
# machine; medians over ROUNDS (default 3); then oneDNN's convolution speed here
# (conv_peak), the bound.
# Prints key=value lines last:
#   ratio_vs_torch_bB   best lockstep setting / the fastest PyTorch setting (either
#                       version, 1 or 2 threads), batch B (128, 1024)
#   ratio_vs_tf_bB      the same against TensorFlow
#   bound_fraction_bB   best lockstep setting / conv_peak's cnn_bound_bB_samples_per_s:
#                       the share of what oneDNN's convolutions alone would allow
# and conv_peak's own key=value lines (conv_peak_gflops_1t, cnn_bound_b128_..., ...).
#
# usage: benchmarks/compare_torch_cnn.sh [--install-peers] [--peers-only] [BUILD_DIR]
#   BUILD_DIR        with benchmarks/train_throughput and conv_peak (default build/host)
#   --install-peers  first install what is missing: Debian's python3-torch (apt-get),
#                    and torch 2.x and tensorflow-cpu 2.x from PyPI into $PEERS_VENV
#                    (default .venv-peers, ignored by git). PyPI's Linux torch wheel
#                    brings NVIDIA's CUDA libraries: about 7 GB in all. Benchmarks
#                    only: never CI. Also LOCKSTEP_INSTALL_PEERS=1.
#   --peers-only     leave lockstep out (the peers and conv_peak alone)
# Environment: MODEL (cnn, or cnn_bn: BatchNormalization after each convolution, in
#   lockstep and in every peer; conv_peak's bound is then that of its convolutions),
#   ROUNDS (3), SAMPLES per run (15360: 120 batches of 128, 15 of 1024),
#   PEERS (torch1 torch2 tf: which peers), PEERS_VENV (.venv-peers),
#   LOCKSTEP_ARGS (more train_throughput flags for every lockstep run, e.g. --conv onednn),
#   TORCH_INDEX_URL (a pip index for torch 2.x, tried before PyPI; default
#   PyTorch's CPU-only wheel index, skipped where it cannot be reached).
# The machine is shared: every number is the median of ROUNDS runs; expect noise.
set -euo pipefail
cd "$(dirname "$0")/.."
source benchmarks/compare_common.sh

install=${LOCKSTEP_INSTALL_PEERS:-0}
peers_only=0
build=build/host
while (($#)); do
  case $1 in
    --install-peers) install=1 ;;
    --peers-only) peers_only=1 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "error: unknown option '$1'; expected --install-peers, --peers-only or a build directory" >&2; exit 2 ;;
    *) build=$1 ;;
  esac
  shift
done
rounds=${ROUNDS:-3}
model=${MODEL:-cnn}
[[ $model == cnn || $model == cnn_bn ]] || { echo "error: MODEL='$model'; expected cnn or cnn_bn" >&2; exit 2; }
samples=${SAMPLES:-15360}
peers=${PEERS:-torch1 torch2 tf}
venv=${PEERS_VENV:-.venv-peers}
lockstep_args=${LOCKSTEP_ARGS:-}
torch_index=${TORCH_INDEX_URL:-https://download.pytorch.org/whl/cpu}
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "error: ROUNDS='$rounds'; expected an integer >= 1" >&2; exit 2; }
if ! [[ $samples =~ ^[1-9][0-9]*$ ]] || ((samples < 1024)); then
  echo "error: SAMPLES='$samples'; expected an integer >= 1024 (one batch of 1024)" >&2
  exit 2
fi
for p in $peers; do
  [[ $p == torch1 || $p == torch2 || $p == tf ]] ||
    { echo "error: PEERS names '$p'; expected some of: torch1 torch2 tf" >&2; exit 2; }
done

# --install-peers: Debian's torch 1.13 through apt-get (as scripts/lib does for
# the build's packages), the PyPI peers into the private virtual environment.
install_peers() {
  source scripts/lib/ensure-packages.sh
  # shellcheck disable=SC2034  # read by lockstep_ensure_packages
  (LOCKSTEP_PACKAGES=(python3-torch python3-venv) && lockstep_ensure_packages)
  if [[ -x $venv/bin/python ]] && "$venv/bin/python" -c 'import torch, tensorflow' 2>/dev/null; then
    echo "peers present in $venv"
    return 0
  fi
  [[ -x $venv/bin/python ]] || /usr/bin/python3 -m venv "$venv" ||
    { echo "error: /usr/bin/python3 -m venv $venv failed (Debian: apt-get install python3-venv)" >&2; exit 2; }
  local pip=("$venv/bin/python" -m pip --disable-pip-version-check) index=()
  # A CPU-only index saves the CUDA libraries; only where it answers.
  if "${pip[@]}" index versions torch --index-url "$torch_index" --timeout 10 --retries 0 >/dev/null 2>&1; then
    index=(--index-url "$torch_index")
    echo "installing torch 2.x from $torch_index into $venv"
  else
    echo "installing torch 2.x from PyPI into $venv (its Linux wheel brings the CUDA libraries: about 7 GB in all)"
  fi
  "${pip[@]}" install "${index[@]}" 'torch>=2,<3' ||
    { echo "error: pip install torch 2.x into $venv failed; the venv is kept, run again to resume" >&2; exit 2; }
  echo "installing tensorflow-cpu 2.x from PyPI into $venv"
  "${pip[@]}" install 'tensorflow-cpu>=2,<3' ||
    { echo "error: pip install tensorflow-cpu 2.x into $venv failed; the venv is kept, run again to resume" >&2; exit 2; }
}
((install)) && install_peers

# What runs each peer, and a check that it is there with the major version promised.
declare -A python=([torch1]=/usr/bin/python3 [torch2]=$venv/bin/python [tf]=$venv/bin/python)
declare -A script=([torch1]=torch_cnn.py [torch2]=torch_cnn.py [tf]=tf_cnn.py)
declare -A version_check=([torch1]='import torch; v = torch.__version__; assert v.startswith("1."), v; print(v)'
  [torch2]='import torch; v = torch.__version__; assert v.startswith("2."), v; print(v)'
  [tf]='import os; os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"; import tensorflow as tf; v = tf.__version__; assert v.startswith("2."), v; print(v)')
for p in $peers; do
  if ! v=$("${python[$p]}" -c "${version_check[$p]}" 2>&1); then
    case $p in
      torch1) fix="apt-get install python3-torch, or run with --install-peers" ;;
      *) fix="run with --install-peers (installs into $venv)" ;;
    esac
    echo "error: peer $p (${python[$p]}) is missing or not the version expected: ${v##*$'\n'}; $fix" >&2
    exit 2
  fi
  echo "peer $p: ${script[$p]} under ${python[$p]}, version $v"
done
bench=$build/benchmarks/train_throughput
conv_peak=$build/benchmarks/conv_peak
if ((!peers_only)); then
  [[ -x $bench ]] || { echo "error: $bench not built (cmake --build $build --target train_throughput)" >&2; exit 2; }
  # shellcheck disable=SC2086  # LOCKSTEP_ARGS is a list of flags
  if ! out=$("$bench" --model "$model" --steps 1 --mfu no $lockstep_args 2>&1); then
    echo "error: $bench has no working --model $model $lockstep_args: $(tail -1 <<<"$out")" >&2
    exit 2
  fi
  echo "lockstep: $bench --model $model $lockstep_args: $(grep '^backend=' <<<"$out")"
fi
have_conv_peak=0
if [[ -x $conv_peak ]]; then
  have_conv_peak=1
elif ((!peers_only)); then
  echo "error: $conv_peak not built (it needs oneDNN: cmake --build $build --target conv_peak)" >&2
  exit 2
fi

peer() {  # peer NAME THREADS BATCH
  measure "${python[$1]}" "benchmarks/peers/${script[$1]}" --model "$model" --threads "$2" --batch-size "$3" \
    --steps $((samples / $3))
}
ours() {  # ours REPLICAS BATCH
  # shellcheck disable=SC2086
  measure "$bench" --model "$model" --replicas "$1" --batch-size "$2" --steps $((samples / $2)) --mfu no $lockstep_args
}

declare -A runs
for ((round = 1; round <= rounds; round++)); do
  for batch in 128 1024; do
    for n in 1 2; do  # replicas for lockstep, threads for the peers
      ((peers_only)) || runs[lockstep_r${n}_b$batch]+=" $(ours "$n" "$batch")"
      for p in $peers; do runs[${p}_t${n}_b$batch]+=" $(peer "$p" "$n" "$batch")"; done
    done
  done
  echo "round $round of $rounds done" >&2
done

declare -A m
for key in $(printf '%s\n' "${!runs[@]}" | sort); do
  # shellcheck disable=SC2086
  m[$key]=$(median ${runs[$key]})
  echo "$key samples_per_s runs:${runs[$key]} median=${m[$key]}"
done
# The fastest of the settings whose keys match a pattern (0 when none ran).
best() {
  local key top=0
  # shellcheck disable=SC2053  # $1 is a pattern
  for key in "${!m[@]}"; do [[ $key == $1 ]] && ((m[$key] > top)) && top=${m[$key]}; done
  echo "$top"
}

# conv_peak last, once: its table, then its key=value lines (cnn_...) with the summary.
conv_lines=""
if ((have_conv_peak)); then
  conv_out=$("$conv_peak") || { echo "error: $conv_peak failed" >&2; exit 1; }
  grep -v '^cnn_' <<<"$conv_out"
  conv_lines=$(grep '^cnn_' <<<"$conv_out")
fi
bound() { sed -n "s/.*cnn_bound_b$1_samples_per_s=\([0-9]*\).*/\1/p" <<<"$conv_lines"; }
ratio() { ((${2:-0} > 0)) && awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }' || echo n/a; }

[[ -n $conv_lines ]] && echo "$conv_lines"
for batch in 128 1024; do  # one line per batch
  torch_best=$(best "torch*_b$batch") tf_best=$(best "tf_*_b$batch")
  line="torch_best_b$batch=$torch_best tf_best_b$batch=$tf_best"
  if ((!peers_only)); then
    ours_best=$(best "lockstep_*_b$batch")
    line+=" lockstep_best_b$batch=$ours_best ratio_vs_torch_b$batch=$(ratio "$ours_best" "$torch_best")"
    line+=" ratio_vs_tf_b$batch=$(ratio "$ours_best" "$tf_best")"
    ((have_conv_peak)) && line+=" bound_fraction_b$batch=$(ratio "$ours_best" "$(bound "$batch")")"
  fi
  echo "$line"
done
