#!/usr/bin/env bash
# The GPU check, for a GPU node that may be offline and bare: the CUDA
# toolkit, a Python whose site-packages hold NCCL as NVIDIA's wheel
# (nvidia-nccl-cu13: libnccl.so.2 and nccl.h under nvidia/nccl/) and cuDNN as
# its wheel (nvidia-cudnn-cu13: libcudnn.so.9 and cudnn.h under nvidia/cudnn/;
# optional, for Conv2D on GPUs), CMake and ninja (pip's will do); no doctest,
# no MPI, no zlib headers, no data.
#
#   scripts/gpu-check.sh --prepare   on a development machine (Debian): fills
#                                    .gpu-carry/ (ignored by git) with what the
#                                    node lacks: doctest's header and CMake
#                                    package, Fashion-MNIST as plain IDX files
#   scripts/gpu-check.sh             on the node, with .gpu-carry/ beside the
#                                    repository's files
#
# On the node it configures build/cuda (NCCL_ROOT and CUDNN_ROOT from the wheels unless set;
# the Ninja generator where ninja is found; the visible GPUs' architecture, or
# sm_90 where none is visible), builds every CUDA target (lockstep_cuda_all),
# then runs, each under its own time budget: the GPU tests (ctest -L gpu; on
# one GPU without those labelled multi_gpu, which need two), the
# Fashion-MNIST example for 3 epochs on every visible GPU, train_throughput_cuda
# at batch 128 and 4096, all_reduce_cuda, and, where time is left, the example
# with --model mlp_bn_dropout and train_throughput_cuda --model cnn and cnn_bn (cuDNN).
# The budgets, the build's included, add up to
# LOCKSTEP_GPU_BUDGET_S (480 s). The whole log, each step's output and the
# summary go to $OUT (else the build folder); the summary ends the output, its
# figures as key=value lines, status= last.
#
# Exit status: 0 all passed; 1 a step failed, no GPU test ran, or a GPU test
# was skipped on a machine that has a GPU; 3 no GPU is visible (after building
# every GPU target and checking that each one loads: the rehearsal's result,
# scripts/gpu-rehearsal.sh).
#
# Environment: OUT (log folder), NCCL_ROOT, CUDNN_ROOT, FASHION_MNIST_DIR (else
# .gpu-carry/fashion-mnist, else /usr/share/datasets/fashion-mnist),
# LOCKSTEP_GPU_BUILD_DIR (build/cuda), LOCKSTEP_GPU_CARRY (.gpu-carry),
# LOCKSTEP_CUDA_ARCHITECTURES (overrides the detected one, e.g. 90-real),
# LOCKSTEP_GPU_CMAKE_ARGS (more configure arguments), LOCKSTEP_GPU_BUDGET_S.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
carry=${LOCKSTEP_GPU_CARRY:-$root/.gpu-carry}
[[ $carry == /* ]] || carry=$root/$carry

fashion_files=(train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte)
fashion_sizes=(47040016 60008 7840016 10008)

# ---------------------------------------------------------------------------
# --prepare: on a development machine
# ---------------------------------------------------------------------------
prepare() {
  set -e
  # shellcheck source=scripts/lib/ensure-packages.sh
  source scripts/lib/ensure-packages.sh
  # shellcheck disable=SC2034  # read by lockstep_ensure_packages
  LOCKSTEP_PACKAGES=(doctest-dev dataset-fashion-mnist)
  lockstep_ensure_packages

  local tmp="$carry.new"
  rm -rf "$tmp"
  mkdir -p "$tmp/doctest" "$tmp/fashion-mnist"

  # doctest: the header and the CMake package, at the same paths below the
  # prefix as Debian puts them below /usr. Debian's doctestTargets.cmake names
  # /usr as its prefix: the copy computes it from where it lies instead.
  local f rel config=""
  while IFS= read -r f; do
    [[ -f $f && ($f == /usr/include/* || $f == /usr/lib/*) ]] || continue
    rel=${f#/usr/}
    mkdir -p "$tmp/doctest/$(dirname "$rel")"
    cp "$f" "$tmp/doctest/$rel"
    [[ $(basename "$f") == doctestConfig.cmake ]] && config=$tmp/doctest/$(dirname "$rel")
  done < <(dpkg -L doctest-dev)
  [[ -n $config && -f $tmp/doctest/include/doctest/doctest.h ]] ||
    { echo "error: doctest-dev holds no doctestConfig.cmake or doctest/doctest.h" >&2; return 1; }
  local up=${config#"$tmp/doctest/"} ups=""
  while [[ -n $up && $up != . ]]; do ups+="/.."; up=$(dirname "$up"); done
  sed -i "s|^set(_IMPORT_PREFIX \"/usr\")\$|get_filename_component(_IMPORT_PREFIX \"\${CMAKE_CURRENT_LIST_DIR}$ups\" ABSOLUTE)|" \
    "$config/doctestTargets.cmake"
  if grep -q '"/usr' "$config"/*.cmake; then
    echo "error: the copy of doctest's CMake package still names /usr:" >&2
    grep -n '"/usr' "$config"/*.cmake >&2
    return 1
  fi
  local doctest_dir=${config#"$tmp/"}
  cp /usr/share/doc/doctest-dev/copyright "$tmp/doctest/COPYRIGHT" 2>/dev/null || true

  # Fashion-MNIST, decompressed, so that the node needs no zlib.
  local src=${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist} i
  for i in "${!fashion_files[@]}"; do
    f=${fashion_files[$i]}
    if [[ -f $src/$f.gz ]]; then
      gzip -dc "$src/$f.gz" >"$tmp/fashion-mnist/$f"
    else
      cp "$src/$f" "$tmp/fashion-mnist/$f"
    fi
    [[ $(stat -c %s "$tmp/fashion-mnist/$f") == "${fashion_sizes[$i]}" ]] ||
      { echo "error: $tmp/fashion-mnist/$f is not ${fashion_sizes[$i]} bytes" >&2; return 1; }
  done
  cp /usr/share/doc/dataset-fashion-mnist/copyright "$tmp/fashion-mnist/COPYRIGHT" 2>/dev/null || true

  cat >"$tmp/README" <<EOF
Made by scripts/gpu-check.sh --prepare on $(hostname) at $(date -u +%Y-%m-%dT%H:%MZ),
for scripts/gpu-check.sh on a GPU node that lacks these. Not part of lockstep.
doctest/        Debian's doctest-dev $(dpkg-query -W -f='${Version}' doctest-dev) (MIT licence; /usr/share/doc/doctest-dev),
                its CMake package relocatable: -Ddoctest_DIR=.gpu-carry/$doctest_dir
fashion-mnist/  Fashion-MNIST (MIT licence, Zalando Research), from Debian's dataset-fashion-mnist
                $(dpkg-query -W -f='${Version}' dataset-fashion-mnist), decompressed to plain IDX files
EOF
  echo "$doctest_dir" >"$tmp/doctest_dir"

  rm -rf "$carry"
  mv "$tmp" "$carry"

  # The copy must work where it lies: find_package(doctest) through it alone.
  local probe inc
  probe=$(mktemp -d)
  mkdir -p "$probe/src"
  cat >"$probe/src/CMakeLists.txt" <<'EOF2'
cmake_minimum_required(VERSION 3.21)
project(probe LANGUAGES NONE)
find_package(doctest REQUIRED)
include(${doctest_DIR}/doctest.cmake)
get_target_property(inc doctest::doctest INTERFACE_INCLUDE_DIRECTORIES)
message(STATUS "doctest_include=${inc}")
EOF2
  if ! cmake -S "$probe/src" -B "$probe/build" -Ddoctest_DIR="$carry/$doctest_dir" >"$probe/log" 2>&1; then
    cat "$probe/log" >&2
    rm -rf "$probe"
    echo "error: the carried doctest package does not configure" >&2
    return 1
  fi
  inc=$(sed -n 's/^-- doctest_include=//p' "$probe/log")
  rm -rf "$probe"
  [[ -n $inc && $(realpath "$inc") == $(realpath "$carry/doctest/include") ]] ||
    { echo "error: the carried doctest package points at '$inc', not $carry/doctest/include" >&2; return 1; }

  local bytes limit=$((60 * 1024 * 1024))
  bytes=$(du -sb "$carry" | cut -f1)
  ((bytes <= limit)) || { echo "error: $carry holds $bytes bytes, more than 60 MiB" >&2; return 1; }
  echo "prepared $carry ($((bytes / 1024 / 1024)) MiB): doctest ($doctest_dir), fashion-mnist (4 plain IDX files)"
  echo "next: copy the repository with .gpu-carry/ to the GPU node and run scripts/gpu-check.sh there"
}

if [[ ${1:-} == --prepare ]]; then
  prepare
  exit $?
elif [[ $# -gt 0 ]]; then
  echo "usage: scripts/gpu-check.sh [--prepare]" >&2
  exit 2
fi

# ---------------------------------------------------------------------------
# The check, on the GPU node
# ---------------------------------------------------------------------------
build=${LOCKSTEP_GPU_BUILD_DIR:-build/cuda}
[[ $build == /* ]] || build=$root/$build
log_dir=${OUT:-$build}
mkdir -p "$log_dir" "$build"
log_dir=$(cd "$log_dir" && pwd)
log=$log_dir/gpu-check.log
summary_file=$log_dir/gpu-check-summary.txt
: >"$log"
total_budget=${LOCKSTEP_GPU_BUDGET_S:-480}
start=$SECONDS
failures=0
sentences=()  # FAILED lines and notes, repeated in the summary
keys=()       # key=value figures, the summary's last lines
tables=()     # lines of the all-reduce table

say() { echo "$*" | tee -a "$log"; }
note() { sentences+=("$*"); say "$*"; }
failed() { failures=$((failures + 1)); note "FAILED: $*"; }
key() { keys+=("$1=$2"); echo "$1=$2" >>"$log"; }

# step NAME BUDGET_S OUTPUT_FILE COMMAND...: runs COMMAND with stdout and
# stderr in OUTPUT_FILE (and the log) under min(BUDGET_S, time left of the
# total); a failure shows the output's last lines. Returns COMMAND's status,
# 124 on a timeout, 125 when no time was left to start it.
step() {
  local name=$1 budget=$2 out=$3 left limit t0 rc
  shift 3
  left=$((total_budget - (SECONDS - start)))
  limit=$((budget < left ? budget : left))
  if ((limit < 5)); then
    say "==> $name: not run, ${left} s left of the ${total_budget} s budget"
    return 125
  fi
  say "==> $name (budget ${limit} s): $*"
  t0=$SECONDS
  timeout -k 10 "$limit" "$@" >"$out" 2>&1
  rc=$?
  { echo "---- $name: exit $rc after $((SECONDS - t0)) s"; cat "$out"; } >>"$log"
  key "${name// /_}_s" $((SECONDS - t0))
  if ((rc != 0)); then
    if ((rc == 124 || rc == 137)); then
      say "    timed out after ${limit} s; last lines:"
    else
      say "    exit $rc; last lines:"
    fi
    tail -n 25 "$out" | sed 's/^/    | /' | tee -a "$log"
  fi
  return $rc
}

finish() {  # finish EXIT-STATUS
  local status=ok
  (($1 == 3)) && status=no_gpu
  (($1 != 0 && $1 != 3)) && status=failed
  key steps_failed "$failures"
  key wall_s $((SECONDS - start))
  key status "$status"
  {
    echo
    echo "==== gpu-check summary ($log_dir) ===="
    printf '%s\n' "${sentences[@]}"
    ((${#tables[@]})) && printf '%s\n' "${tables[@]}"
    printf '%s\n' "${keys[@]}"
  } >"$summary_file"
  cat "$summary_file"
  cat "$summary_file" >>"$log"
  exit "$1"
}

# Tools: the node's cmake, ninja and nvcc, wherever pip or the toolkit put them.
py=${PYTHON:-$(command -v python3 || command -v python || true)}
for dir in "$(dirname "${py:-/nonexistent}")" \
    "$([[ -n $py ]] && "$py" -c 'import sysconfig; print(sysconfig.get_path("scripts"))' 2>/dev/null)" \
    "$HOME/.local/bin" /usr/local/cuda/bin; do
  [[ -d $dir ]] || continue
  for tool in cmake ctest ninja nvcc; do
    command -v "$tool" >/dev/null 2>&1 || [[ ! -x $dir/$tool ]] || PATH=$PATH:$dir
  done
done
export PATH
for tool in cmake ctest; do
  command -v "$tool" >/dev/null 2>&1 || { failed "$tool not found (pip install cmake)"; finish 1; }
done
if [[ -z ${CUDACXX:-} ]] && ! command -v nvcc >/dev/null 2>&1; then
  failed "nvcc not found: put the CUDA toolkit's bin on PATH or set CUDACXX"
  finish 1
fi
generator="Unix Makefiles"
command -v ninja >/dev/null 2>&1 && generator=Ninja
jobs=$(nproc 2>/dev/null || echo 2)
say "cmake: $(cmake --version | head -1) ($(command -v cmake)); generator: $generator, $jobs jobs"
say "nvcc: $( (${CUDACXX:-nvcc} --version || true) | tail -2 | head -1)"

# GPUs: every one nvidia-smi lists, and their architectures.
gpus=0
archs=""
if smi=$(nvidia-smi --query-gpu=index,name,compute_cap,memory.total --format=csv,noheader 2>/dev/null) &&
    [[ -n $smi ]]; then
  echo "$smi" >>"$log"
  gpus=$(grep -c . <<<"$smi")
  archs=$(cut -d, -f3 <<<"$smi" | tr -d ' .' | grep -E '^[0-9]+$' | sort -u | sed 's/$/-real/' | paste -sd';' -)
  key gpus "$gpus"
  key gpu_names "$(cut -d, -f2 <<<"$smi" | sed 's/^ *//' | sort | uniq -c | sed 's/^ *\([0-9]*\) /\1x /' | paste -sd, -)"
else
  key gpus 0
fi
archs=${LOCKSTEP_CUDA_ARCHITECTURES:-${archs:-90-real}}
key cuda_architectures "$archs"

# wheel_root NAME HEADER: the folder of NVIDIA's wheel nvidia/NAME in the
# node's Python whose include/ holds HEADER, or nothing.
wheel_root() {
  [[ -n $py ]] || return 0
  "$py" - "$1" "$2" 2>/dev/null <<'EOF'
import importlib, os, site, sys
name, header = sys.argv[1], sys.argv[2]
paths = []
try:
    m = importlib.import_module("nvidia." + name)  # a namespace package: no __file__, one __path__
    paths += list(m.__path__)
except Exception:
    pass
dirs = site.getsitepackages() + [site.getusersitepackages()]
paths += [os.path.join(d, "nvidia", name) for d in dirs]
for p in paths:
    if os.path.isfile(os.path.join(p, "include", header)):
        print(p)
        break
EOF
}

# NCCL: NCCL_ROOT as given, else NVIDIA's wheel in the node's Python.
[[ -n ${NCCL_ROOT:-} ]] || NCCL_ROOT=$(wheel_root nccl nccl.h)
nccl_args=()
if [[ -n ${NCCL_ROOT:-} ]]; then
  export NCCL_ROOT
  nccl_args=(-DNCCL_ROOT="$NCCL_ROOT")
  # The build's RPATH names it too; this also covers a binary copied elsewhere.
  for d in "$NCCL_ROOT/lib" "$NCCL_ROOT/lib64"; do
    [[ -d $d ]] && export LD_LIBRARY_PATH=$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  done
  key nccl_root "$NCCL_ROOT"
else
  note "NCCL_ROOT not set and no nvidia-nccl wheel found: CMake looks beside the CUDA toolkit and in the system"
fi

# cuDNN (Conv2D on GPUs): CUDNN_ROOT as given, else NVIDIA's wheel. The
# wheel's libcudnn.so.9 loads its parts (libcudnn_cnn.so.9, ...) from beside itself.
[[ -n ${CUDNN_ROOT:-} ]] || CUDNN_ROOT=$(wheel_root cudnn cudnn.h)
cudnn_args=()
if [[ -n ${CUDNN_ROOT:-} ]]; then
  export CUDNN_ROOT
  cudnn_args=(-DCUDNN_ROOT="$CUDNN_ROOT")
  for d in "$CUDNN_ROOT/lib" "$CUDNN_ROOT/lib64"; do
    [[ -d $d ]] && export LD_LIBRARY_PATH=$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  done
  key cudnn_root "$CUDNN_ROOT"
else
  note "CUDNN_ROOT not set and no nvidia-cudnn wheel found: CMake looks beside the CUDA toolkit and in the system"
fi

# doctest: the carried copy, else one CMake finds here.
tests=ON
doctest_args=()
if [[ -f $carry/doctest_dir && -d $carry/$(cat "$carry/doctest_dir") ]]; then
  doctest_args=(-Ddoctest_DIR="$carry/$(cat "$carry/doctest_dir")")
elif ! cmake --find-package -DNAME=doctest -DCOMPILER_ID=GNU -DLANGUAGE=CXX -DMODE=EXIST >/dev/null 2>&1; then
  tests=OFF
  failed "no doctest: the GPU tests cannot be built (run scripts/gpu-check.sh --prepare on a development machine and carry .gpu-carry/)"
fi

# Fashion-MNIST: FASHION_MNIST_DIR, else the carried plain files, else Debian's.
data=${FASHION_MNIST_DIR:-}
if [[ -z $data ]]; then
  data=/usr/share/datasets/fashion-mnist
  [[ -f $carry/fashion-mnist/train-images-idx3-ubyte ]] && data=$carry/fashion-mnist
fi

extra=()
[[ -n ${LOCKSTEP_GPU_CMAKE_ARGS:-} ]] && read -ra extra <<<"$LOCKSTEP_GPU_CMAKE_ARGS"
# A build folder made by another generator (the cuda preset's Makefiles) is reconfigured from scratch.
if [[ -f $build/CMakeCache.txt ]] && ! grep -qx "CMAKE_GENERATOR:INTERNAL=$generator" "$build/CMakeCache.txt"; then
  rm -rf "$build/CMakeCache.txt" "$build/CMakeFiles"
fi

# Budgets (seconds): configure and build take what the steps after them leave.
b_configure=60 b_tests=90 b_example=40 b_tput=20 b_allreduce=40 b_example_bn=30
b_runs=$((b_tests + b_example + 2 * b_tput + b_allreduce + b_example_bn))

step configure $b_configure "$log_dir/configure.txt" \
  cmake -S "$root" -B "$build" -G "$generator" -DCMAKE_BUILD_TYPE=Release -DLOCKSTEP_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES="$archs" -DLOCKSTEP_BUILD_TESTS=$tests -DLOCKSTEP_BUILD_EXAMPLES=ON \
  -DLOCKSTEP_BUILD_BENCHMARKS=ON -UNCCL_INCLUDE_DIR -UNCCL_LIBRARY -UCUDNN_INCLUDE_DIR -UCUDNN_LIBRARY \
  "${nccl_args[@]}" "${cudnn_args[@]}" "${doctest_args[@]}" \
  "${extra[@]}" || { failed "configure (see $log_dir/configure.txt)"; finish 1; }
nccl_line=$(grep -o 'CUDA backend available as lockstep::cuda (.*)' "$log_dir/configure.txt" | tail -1)
key nccl_version "$(sed -n 's/.*NCCL \([0-9.]*\)).*/\1/p' <<<"$nccl_line")"
key nccl_library "$(sed -n 's/^NCCL_LIBRARY:FILEPATH=//p' "$build/CMakeCache.txt")"
cudnn_version=$(sed -n 's/.*lockstep: cuDNN \([0-9.]*\) found.*/\1/p' "$log_dir/configure.txt" | tail -1)
key cudnn_version "${cudnn_version:-none}"
[[ -n $cudnn_version ]] || note "cuDNN not found: the GPU build has no Conv2D (its tests are left out, --model cnn not run)"

# A cold build of every CUDA target took 83-93 s on an H200 node's 16 cores: say so before
# the build when the budget leaves it less than 120 s, rather than only after it is cut short.
b_build=$((total_budget - b_runs - (SECONDS - start)))
((b_build >= 120)) || note "budget: LOCKSTEP_GPU_BUDGET_S=$total_budget leaves the build ${b_build} s" \
  "(a cold build takes about 90 s on 16 cores); $((total_budget + 120 - b_build)) leaves it 120 s"
step build "$b_build" "$log_dir/build.txt" \
  cmake --build "$build" --target lockstep_cuda_all -j "$jobs" || { failed "build (see $log_dir/build.txt)"; finish 1; }

# Every GPU program built, and each one's libraries found (libnccl.so.2 from the wheel).
programs=("$build/examples/fashion_mnist_cuda" "$build/benchmarks/train_throughput_cuda" "$build/benchmarks/all_reduce_cuda")
if [[ $tests == ON ]]; then
  while IFS= read -r p; do
    [[ -n $p ]] && programs+=("$p")
  done < <(ctest --test-dir "$build" -L gpu --show-only=json-v1 2>/dev/null | "${py:-python3}" -c '
import json, sys
for t in json.load(sys.stdin).get("tests", []):
    cmd = t.get("command") or []
    exe = [c for c in cmd if "/test_cuda_" in c]  # mpirun ... test_cuda_x, or test_cuda_x itself
    print(exe[0] if exe else (cmd[0] if cmd else ""))
' | sort -u)
fi
unbuilt=0
for p in "${programs[@]}"; do
  if [[ ! -x $p ]]; then
    failed "not built: $p"
    unbuilt=1
  elif ldd "$p" 2>/dev/null | grep -q 'not found'; then
    failed "cannot load $p: $(ldd "$p" | grep 'not found' | awk '{print $1}' | paste -sd' ' -) not found"
    unbuilt=1
  fi
done
key gpu_programs_built "${#programs[@]}"
((unbuilt)) && finish 1

# The GPU tests. Without a GPU every one must report skipped (exit 77): that
# they start at all shows that their libraries load.
if [[ $tests == ON ]]; then
  ctest_out=$log_dir/gpu-tests.txt
  # On one GPU the entries that need two (label multi_gpu) are left out, not counted as skipped.
  exclude=()
  if ((gpus == 1)); then
    exclude=(-LE multi_gpu)
    n_multi=$(ctest --test-dir "$build" -L multi_gpu -N 2>/dev/null | sed -n 's/^Total Tests: //p')
    key gpu_tests_left_out_multi_gpu "${n_multi:-0}"
    ((${n_multi:-0} == 0)) || note "gpu tests: ${n_multi} entries that need 2+ GPUs (label multi_gpu) left out: 1 GPU visible"
  fi
  step "gpu tests" $b_tests "$ctest_out" ctest --test-dir "$build" -L gpu "${exclude[@]}" --output-on-failure \
    --no-tests=error
  rc=$?
  t_total=$(grep -cE '^ *[0-9]+/[0-9]+ Test +#' "$ctest_out")
  t_passed=$(grep -E '^ *[0-9]+/[0-9]+ Test +#' "$ctest_out" | grep -c ' Passed ')
  t_skipped=$(grep -E '^ *[0-9]+/[0-9]+ Test +#' "$ctest_out" | grep -c '\*\*\*Skipped')
  t_failed=$((t_total - t_passed - t_skipped))
  key gpu_tests_total "$t_total"
  key gpu_tests_passed "$t_passed"
  key gpu_tests_failed "$t_failed"
  key gpu_tests_skipped "$t_skipped"
  if ((gpus > 0)); then
    ((rc == 0 && t_failed == 0)) || failed "gpu tests: $t_failed of $t_total failed (exit $rc; see $ctest_out)"
    ((t_passed > 0)) || failed "gpu tests: none ran"
    ((t_skipped == 0)) || failed "gpu tests: $t_skipped skipped on a machine with $gpus GPU(s): $(grep -E '\*\*\*Skipped' "$ctest_out" | sed 's/.*Test *#[0-9]*: *//; s/ *\.\.\..*//' | paste -sd, -)"
  else
    ((t_total > 0 && t_skipped == t_total)) ||
      failed "gpu tests without a GPU: $t_skipped of $t_total reported skipped, the others failed to start (see $ctest_out)"
  fi
fi

if ((gpus == 0)); then
  ((failures)) && finish 1
  note "No GPU is visible (nvidia-smi lists none): every GPU target was built for $archs and loads, and the GPU tests reported skipped; nothing was run on a GPU."
  finish 3
fi

# The example for 3 epochs on every visible GPU.
example() {  # example NAME BUDGET [ARGS...]
  local name=$1 budget=$2 out
  shift 2
  out=$log_dir/$name.txt
  if step "$name" "$budget" "$out" "$build/examples/fashion_mnist_cuda" --backend cuda --epochs 3 --data "$data" "$@"; then
    local line acc
    line=$(grep -E '^backend=' "$out" | tail -1)
    acc=$(sed -n 's/^test_accuracy=\([0-9.]*\).*/\1/p' "$out" | tail -1)
    key "${name}_replicas" "$(sed -n 's/.*replicas=\([0-9]*\).*/\1/p' <<<"$line")"
    key "${name}_samples_per_s" "$(sed -n 's/.*samples_per_s=\([0-9.]*\).*/\1/p' <<<"$line")"
    key "${name}_step_ms" "$(sed -n 's/.*step_ms=\([0-9.]*\).*/\1/p' <<<"$line")"
    key "${name}_test_accuracy" "$acc"
    key "${name}_test_loss" "$(sed -n 's/.*test_loss=\([0-9.]*\).*/\1/p' "$out" | tail -1)"
    # 3 epochs of this MLP reach about 0.87 on the host: far less means a broken GPU path.
    awk -v a="${acc:-0}" 'BEGIN { exit !(a >= 0.80) }' ||
      failed "$name: test_accuracy=${acc:-none}, expected at least 0.80 after 3 epochs"
  else
    failed "$name (see $out)"
  fi
}
if [[ -f $data/train-images-idx3-ubyte || -f $data/train-images-idx3-ubyte.gz ]]; then
  example example_mlp $b_example
else
  failed "example: no Fashion-MNIST in $data (run scripts/gpu-check.sh --prepare, or set FASHION_MNIST_DIR)"
fi

# train_throughput_cuda on every visible GPU: synthetic samples, batch 128 and 4096.
for shape in "128 1000" "4096 200"; do
  read -r b steps <<<"$shape"
  out=$log_dir/throughput_b$b.txt
  if step "throughput b$b" $b_tput "$out" "$build/benchmarks/train_throughput_cuda" --backend cuda \
      --replicas "$gpus" --batch-size "$b" --steps "$steps"; then
    line=$(grep -E '^samples_per_s=' "$out" | tail -1)
    key "throughput_b${b}_samples_per_s" "$(sed -n 's/.*samples_per_s=\([0-9.]*\).*/\1/p' <<<"$line")"
    key "throughput_b${b}_step_ms" "$(sed -n 's/.*step_ms=\([0-9.]*\).*/\1/p' <<<"$line")"
    key "throughput_b${b}_model_tflops" "$(sed -n 's/.*model_tflops=\([0-9.]*\).*/\1/p' <<<"$line")"
  else
    failed "train_throughput_cuda --batch-size $b (see $out)"
  fi
done

# all_reduce_cuda on every visible GPU: nccl-tests' algbw and busbw, 4 B to 256 MiB.
out=$log_dir/all_reduce.txt
if step "all_reduce" $b_allreduce "$out" "$build/benchmarks/all_reduce_cuda" --backend cuda; then
  while IFS= read -r l; do tables+=("$l"); done < <(grep -E '^(#|[[:space:]]*[0-9])' "$out")
  while IFS= read -r l; do
    key "all_reduce_${l%%=*}" "${l#*=}"
  done < <(grep -E '^[A-Za-z0-9_]+=[^ ]+$' "$out" | grep -vE '^(gpus|replicas)=')
else
  failed "all_reduce_cuda (see $out)"
fi

# The example's BatchNormalization/Dropout model, where the budget allows.
if (( total_budget - (SECONDS - start) >= 15 )); then
  example example_mlp_bn_dropout $b_example_bn --model mlp_bn_dropout
else
  note "example --model mlp_bn_dropout not run: $((total_budget - (SECONDS - start))) s left of the ${total_budget} s budget"
fi

# The Keras MNIST convnet through cuDNN, and the same with BatchNormalization
# (its per-channel sums), where cuDNN was found and the budget allows.
for model in cnn cnn_bn; do
  if [[ -n $cudnn_version ]] && (( total_budget - (SECONDS - start) >= 15 )); then
    out=$log_dir/throughput_$model.txt
    if step "throughput $model" $b_tput "$out" "$build/benchmarks/train_throughput_cuda" --backend cuda \
        --replicas "$gpus" --model $model --batch-size 128 --steps 200; then
      line=$(grep -E '^samples_per_s=' "$out" | tail -1)
      key "throughput_${model}_samples_per_s" "$(sed -n 's/.*samples_per_s=\([0-9.]*\).*/\1/p' <<<"$line")"
      key "throughput_${model}_step_ms" "$(sed -n 's/.*step_ms=\([0-9.]*\).*/\1/p' <<<"$line")"
    else
      failed "train_throughput_cuda --model $model (see $out)"
    fi
  elif [[ -n $cudnn_version ]]; then
    note "train_throughput_cuda --model $model not run: $((total_budget - (SECONDS - start))) s left of the ${total_budget} s budget"
  fi
done

((failures)) && finish 1
finish 0
