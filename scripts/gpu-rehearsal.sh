#!/usr/bin/env bash
# A rehearsal of scripts/gpu-check.sh on a development machine, without a GPU:
# it builds a stand-in for the offline GPU node and runs the check there up to
# the point where it says that no GPU is visible (exit 3), so that we know the
# first run on a real node will configure, build every GPU target and load it.
#
# The stand-in, in a private mount namespace (unshare -m, as root):
#   - NCCL only from NVIDIA's wheel (pip install nvidia-nccl-cu13) in a private
#     virtual environment, build/gpu-rehearsal/venv, with pip's cmake and ninja
#     first on PATH; the system's NCCL (beside the CUDA toolkit, /usr/local,
#     /usr) hidden;
#   - zlib's headers, Debian's doctest and Debian's Fashion-MNIST hidden: doctest
#     and the data come only from .gpu-carry/ (gpu-check.sh --prepare, run first);
#   - MPI left out (-DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON), as the node has none.
# Where no mount namespace can be made (not root), the same run happens with
# zlib disabled through CMake and the system's paths only checked, not hidden.
#
# Then it checks that every target of lockstep_cuda_all is built, that CMake found NCCL in the wheel, doctest in .gpu-carry/ and no zlib
# or MPI, and that nothing was written in the repository's root. Its last line
# is `gpu-rehearsal: passed in N s` (exit 0) or says what failed (exit 1).
#
# The build folder (build/gpu-rehearsal/build) is reconfigured from scratch
# each time and rebuilt where sources changed; LOCKSTEP_REHEARSAL_FRESH=1
# removes it first. scripts/test.sh runs this last (LOCKSTEP_SKIP_REHEARSAL=1
# leaves it out).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
work=$root/build/gpu-rehearsal
venv=$work/venv
start=$SECONDS

# Inside the namespace (the script re-runs itself there): hide, then run the check.
if [[ ${1:-} == --inside ]]; then
  mask=$work/mask
  mkdir -p "$mask"
  mount -t tmpfs lockstep-rehearsal "$mask"
  hidden=()
  n=0
  hide_in() {  # hide_in DIR GLOB...: DIR shows every entry but those matching a GLOB
    local dir=$1 real farm e name g skip any=0
    shift
    [[ -d $dir ]] || return 0
    dir=$(readlink -f "$dir")
    for g in "$@"; do compgen -G "$dir/$g" >/dev/null && any=1; done
    ((any)) || return 0
    n=$((n + 1))
    real=$mask/real$n farm=$mask/farm$n
    mkdir -p "$real" "$farm"
    mount --bind "$dir" "$real"
    shopt -s dotglob nullglob
    for e in "$real"/*; do
      name=${e##*/}
      skip=0
      for g in "$@"; do
        # shellcheck disable=SC2053  # a glob on purpose
        [[ $name == $g ]] && { skip=1; hidden+=("$dir/$name"); }
      done
      ((skip)) || ln -s "$e" "$farm/$name"
    done
    shopt -u dotglob nullglob
    mount --bind "$farm" "$dir"
  }
  hide_in /usr/include 'zlib.h' 'zconf.h' 'nccl*' 'doctest'
  hide_in /usr/lib/cmake 'doctest'
  hide_in /usr/share/datasets 'fashion-mnist'
  hide_in /usr/local/include 'zlib.h' 'zconf.h' 'nccl*'
  hide_in /usr/lib/x86_64-linux-gnu 'libnccl*'
  hide_in /usr/local/lib 'libnccl*'
  for cuda in /usr/local/cuda /usr/local/cuda-*; do
    [[ -d $cuda ]] || continue
    for d in "$cuda/include" "$cuda"/targets/*/include; do hide_in "$d" 'nccl*'; done
    for d in "$cuda/lib" "$cuda/lib64" "$cuda"/targets/*/lib; do hide_in "$d" 'libnccl*'; done
  done
  echo "stand-in: hidden $(printf '%s\n' "${hidden[@]}" | sort -u | paste -sd' ' -)"
  for f in /usr/include/zlib.h /usr/include/doctest/doctest.h /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz \
      /usr/local/cuda/include/nccl.h /usr/local/cuda/lib64/libnccl.so.2; do
    [[ ! -e $f ]] || { echo "error: the stand-in still shows $f" >&2; exit 1; }
  done
  shift
  exec "$@"
fi

fail() {
  echo "gpu-rehearsal: FAILED after $((SECONDS - start)) s: $*"
  exit 1
}

# 1. The node's Python: NCCL as NVIDIA's wheel, pip's cmake and ninja.
echo "==> [rehearsal 1/4] virtual environment with nvidia-nccl-cu13, cmake, ninja ($venv)"
if ! "$venv/bin/python" -c 'import nvidia.nccl, cmake, ninja' >/dev/null 2>&1; then
  rm -rf "$venv"
  python3 -m venv "$venv" || fail "python3 -m venv failed (Debian: apt-get install python3-venv)"
  "$venv/bin/pip" install --quiet --disable-pip-version-check nvidia-nccl-cu13 cmake ninja ||
    fail "pip install nvidia-nccl-cu13 cmake ninja failed (the rehearsal needs PyPI once; the venv is kept)"
fi
"$venv/bin/pip" list --disable-pip-version-check 2>/dev/null | grep -iE '^(nvidia-nccl-cu13|cmake|ninja) ' |
  awk '{ printf "    %s %s\n", $1, $2 }'

# 2. What the node lacks, prepared here.
echo "==> [rehearsal 2/4] scripts/gpu-check.sh --prepare"
scripts/gpu-check.sh --prepare || fail "gpu-check.sh --prepare"

# 3. The check, on the stand-in.
build=$work/build
out=$work/out
if [[ ${LOCKSTEP_REHEARSAL_FRESH:-0} == 1 ]]; then
  rm -rf "$build"
else
  rm -rf "$build/CMakeCache.txt" "$build/CMakeFiles"  # configure from scratch, rebuild what changed
fi
rm -rf "$out"
mkdir -p "$out"
rm -f "$root/CMakeCache.txt"
# The node's 480 s assume its 16 cores: here (2 cores, about 3 minutes for the
# build) the build gets more, LOCKSTEP_REHEARSAL_BUDGET_S in all.
node_env=(env -u NCCL_ROOT -u CUDACXX -u FASHION_MNIST_DIR -u LOCKSTEP_CUDA_ARCHITECTURES
  PATH="$venv/bin:/usr/local/cuda/bin:/usr/bin:/bin" OUT="$out" LOCKSTEP_GPU_BUILD_DIR="$build"
  LOCKSTEP_GPU_BUDGET_S="${LOCKSTEP_REHEARSAL_BUDGET_S:-1200}"
  LOCKSTEP_GPU_CMAKE_ARGS="-DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON")
isolated=0
if [[ $(id -u) == 0 ]] && unshare -m --propagation private true 2>/dev/null; then
  isolated=1
  runner=(unshare -m --propagation private "$0" --inside "${node_env[@]}")
else
  echo "note: no private mount namespace here (needs root): zlib is disabled through CMake, and the" \
       "system's doctest, NCCL and data are checked for in the cache rather than hidden"
  node_env+=(LOCKSTEP_GPU_CMAKE_ARGS="-DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON -DCMAKE_DISABLE_FIND_PACKAGE_ZLIB=ON")
  runner=("${node_env[@]}")
fi
echo "==> [rehearsal 3/4] scripts/gpu-check.sh on the stand-in for the node (expect exit 3: no GPU)"
set +e
"${runner[@]}" scripts/gpu-check.sh
rc=$?
set -e
gpus=$(sed -n 's/^gpus=//p' "$out/gpu-check-summary.txt" 2>/dev/null | tail -1 || true)
if [[ ${gpus:-0} == 0 ]]; then
  ((rc == 3)) || fail "gpu-check.sh exited $rc, expected 3 (no GPU visible); see $out/gpu-check.log"
else
  ((rc == 0)) || fail "gpu-check.sh exited $rc on a machine with $gpus GPU(s); see $out/gpu-check.log"
fi

# 4. What the node's run would rest on.
echo "==> [rehearsal 4/4] checks"
cache=$build/CMakeCache.txt
value() { sed -n "s/^$1:[A-Z]*=//p" "$cache" | head -1; }
check() {  # check WHAT CONDITION-COMMAND...
  local what=$1
  shift
  if "$@"; then echo "    ok: $what"; else fail "$what"; fi
}
under() { [[ $1 == "$2"/* ]]; }
check "CMake is pip's ($(value CMAKE_COMMAND))" under "$(value CMAKE_COMMAND)" "$venv"
check "generator is Ninja" test "$(value CMAKE_GENERATOR)" = Ninja
check "CUDA architectures are sm_90 ($(value CMAKE_CUDA_ARCHITECTURES))" test "$(value CMAKE_CUDA_ARCHITECTURES)" = 90-real
check "NCCL library from the wheel ($(value NCCL_LIBRARY))" under "$(value NCCL_LIBRARY)" "$venv"
check "NCCL headers from the wheel ($(value NCCL_INCLUDE_DIR))" under "$(value NCCL_INCLUDE_DIR)" "$venv"
check "doctest from .gpu-carry ($(value doctest_DIR))" under "$(value doctest_DIR)" "$root/.gpu-carry"
check "no zlib (ZLIB_INCLUDE_DIR=$(value ZLIB_INCLUDE_DIR))" grep -q "lockstep: zlib not found" "$out/configure.txt"
check "no MPI" grep -q "lockstep: MPI not found" "$out/configure.txt"
targets=$("$venv/bin/ninja" -C "$build" -t query lockstep_cuda_all | sed -n '/^  input:/,/^  outputs:/p' |
  grep -vE '^  (input|outputs):' | sed 's/^ *//; s/^|* *//' | grep -v '^cmake_object_order' | sort -u)
[[ -n $targets ]] || fail "lockstep_cuda_all has no inputs"
for t in $targets; do
  [[ -f $build/$t || -f $t ]] || fail "lockstep_cuda_all: $t was not built"
done
check "lockstep_cuda_all: $(wc -w <<<"$targets") targets built ($(for t in $targets; do basename "$t"; done | paste -sd' ' -))" true
summary=$out/gpu-check-summary.txt
figure() { sed -n "s/^$1=//p" "$summary" | tail -1; }
all_skipped() { [[ $(figure gpu_tests_total) -gt 0 && $(figure gpu_tests_total) == "$(figure gpu_tests_skipped)" ]]; }
root_clean() { [[ ! -e $root/CMakeCache.txt && ! -e $root/CMakeFiles ]]; }
if [[ ${gpus:-0} == 0 ]]; then
  check "all $(figure gpu_tests_total) gpu tests started and reported skipped" all_skipped
  check "the summary ends with status=no_gpu" test "$(tail -1 "$summary")" = status=no_gpu
fi
check "no build output in the repository's root" root_clean
((isolated)) || echo "    note: zlib, doctest and NCCL of the system were visible to this run (no namespace)"

echo "gpu-rehearsal: passed in $((SECONDS - start)) s (the check's summary: $out/gpu-check-summary.txt)"
