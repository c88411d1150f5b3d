#!/usr/bin/env bash
# The GPU check, for a machine with a GPU (the development machines have
# none): builds the cuda preset, runs the gpu tests, the Fashion-MNIST example
# for 3 epochs and both benchmarks, and prints a short summary last. Sized for
# under 8 minutes on one H200. The full log goes to $OUT/gpu-check.log when
# OUT is set (the device tool's result folder), else build/cuda/gpu-check.log.
#   scripts/gpu-check.sh            FASHION_MNIST_DIR=/path scripts/gpu-check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
log_dir=${OUT:-build/cuda}
mkdir -p "$log_dir" build/cuda
log="$log_dir/gpu-check.log"
: >"$log"
summary=()
note() { summary+=("$*"); echo "$*" | tee -a "$log"; }
run() {  # run STEP-NAME TIMEOUT-SECONDS COMMAND...: logs everything, returns the status
  local name=$1 limit=$2
  shift 2
  echo "==> $name: $*" | tee -a "$log"
  timeout "$limit" "$@" >>"$log" 2>&1
  local rc=$?
  [[ $rc -eq 0 ]] || note "FAILED: $name (exit $rc)"
  return $rc
}

nvidia-smi --query-gpu=index,name,compute_cap,memory.total --format=csv,noheader >>"$log" 2>&1 || true
if gpus=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null) && [[ -n $gpus ]]; then
  note "gpus: $(paste -sd, - <<<"$gpus")"
else
  note "gpus: none visible (nvidia-smi found none): the GPU steps below can only build, skip or fail"
fi

jobs=$(nproc 2>/dev/null || echo 2)
tests=ON
if ! cmake --find-package -DNAME=doctest -DCOMPILER_ID=GNU -DLANGUAGE=CXX -DMODE=EXIST >/dev/null 2>&1; then
  tests=OFF
  note "doctest not installed here: the gpu tests are not built (install doctest-dev)"
fi
# Only this machine's GPU architecture (a faster build), where one is visible.
archs=()
nvidia-smi >/dev/null 2>&1 && archs=(-DCMAKE_CUDA_ARCHITECTURES=native)
run configure 120 cmake --preset cuda -DLOCKSTEP_BUILD_TESTS=$tests "${archs[@]}" || exit 1
run build 300 cmake --build build/cuda -j "$jobs" --target lockstep_cuda_all || exit 1

if [[ $tests == ON ]]; then
  run "gpu tests" 240 ctest --test-dir build/cuda -L gpu --output-on-failure
  # ctest counts a skipped test as not failed: say how many were skipped.
  note "gpu tests: $(grep -E 'tests passed|tests failed' "$log" | tail -1); skipped: $(grep -c '(Skipped)' "$log")"
fi

data=${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
if ls "$data"/train-images-idx3-ubyte* >/dev/null 2>&1; then
  if run "fashion_mnist 3 epochs" 240 build/cuda/examples/fashion_mnist_cuda --backend cuda --epochs 3 --data "$data"; then
    note "example: $(grep -E '^backend=' "$log" | tail -1)"
    note "example: $(grep -E '^test_accuracy=' "$log" | tail -1)"
  fi
else
  note "example skipped: no Fashion-MNIST under $data (set FASHION_MNIST_DIR)"
fi

for run_shape in "128 1000" "1024 200"; do  # batch, steps: about 0.4 and 0.6 GB of synthetic samples
  read -r b steps <<<"$run_shape"
  if run "train_throughput b$b" 120 build/cuda/benchmarks/train_throughput_cuda --backend cuda --batch-size "$b" --steps "$steps"; then
    note "train_throughput b$b: $(grep -E '^samples_per_s=' "$log" | tail -1)"
  fi
done
echo "==> all_reduce: build/cuda/benchmarks/all_reduce_cuda --backend cuda" | tee -a "$log"
if timeout 240 build/cuda/benchmarks/all_reduce_cuda --backend cuda >"$log_dir/all_reduce.txt" 2>&1; then
  note "all_reduce (nccl-tests' algbw and busbw; also in $log_dir/all_reduce.txt):"
  summary+=("$(tail -80 "$log_dir/all_reduce.txt")")
else
  note "FAILED: all_reduce: $(tail -3 "$log_dir/all_reduce.txt")"
fi
cat "$log_dir/all_reduce.txt" >>"$log"

echo
echo "==== gpu-check summary ===="
printf '%s\n' "${summary[@]}"
