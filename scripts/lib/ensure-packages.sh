# shellcheck shell=bash
# Installs the Debian packages that lockstep's build, tests and demo need,
# and only those that are missing. Sourced by scripts/test.sh and
# scripts/demo.sh; run on its own (bash scripts/lib/ensure-packages.sh) it
# does the same check and install.

LOCKSTEP_PACKAGES=(cmake g++ make doctest-dev zlib1g-dev libdnnl-dev libopenblas-dev dataset-fashion-mnist libopenmpi-dev openmpi-bin)
# What scripts/sanitize.sh and scripts/fuzz.sh need besides: Ninja (it builds
# several targets in parallel where make's top level goes one at a time),
# clang and its runtime libraries (libclang_rt.fuzzer and the sanitizers).
# g++'s sanitizer runtimes come with g++ (libasan8, libtsan2, libubsan1).
LOCKSTEP_CHECK_PACKAGES=(ninja-build clang libclang-rt-14-dev)

# Installs the packages named, or LOCKSTEP_PACKAGES when none are.
lockstep_ensure_packages() {
  local wanted=("$@")
  ((${#wanted[@]})) || wanted=("${LOCKSTEP_PACKAGES[@]}")
  if ! command -v dpkg >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
    echo "error: dpkg/apt-get not found; these scripts install packages on Debian." >&2
    echo "       elsewhere, install the equivalents of: ${wanted[*]}" >&2
    return 1
  fi

  local pkg
  local missing=()
  for pkg in "${wanted[@]}"; do
    if ! dpkg -s "$pkg" >/dev/null 2>&1; then
      missing+=("$pkg")
    fi
  done
  if ((${#missing[@]} == 0)); then
    echo "all packages present: ${wanted[*]}"
    return 0
  fi

  local as_root=()
  if [[ $(id -u) -ne 0 ]]; then
    if command -v sudo >/dev/null 2>&1; then
      as_root=(sudo)
    else
      echo "error: missing packages: ${missing[*]}" >&2
      echo "       not running as root and sudo is not available; install them as root:" >&2
      echo "       apt-get install --no-install-recommends ${missing[*]}" >&2
      return 1
    fi
  fi

  echo "installing missing packages: ${missing[*]}"
  "${as_root[@]}" apt-get update
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y --no-install-recommends "${missing[@]}"
}

# Conan 2 from PyPI, for the packaging test of conanfile.py and test_package/
# (ctest "packaging: conan create and test_package", skipped without it): in a
# virtual environment in .conan/venv (ignored by git), installed once (about
# 11 s here). A failed install only warns: that one test then reports skipped.
# LOCKSTEP_SKIP_CONAN=1 leaves it out.
lockstep_ensure_conan() {
  local root venv
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  venv=$root/.conan/venv
  if [[ ${LOCKSTEP_SKIP_CONAN:-0} == 1 || -x $venv/bin/conan ]]; then
    return 0
  fi
  echo "installing Conan 2 from PyPI into .conan/venv"
  local start=$SECONDS
  if python3 -m venv "$venv" && "$venv/bin/pip" install --quiet 'conan>=2,<3'; then
    echo "conan $("$venv/bin/conan" --version | awk '{print $NF}') installed in $((SECONDS - start)) s"
  else
    echo "warning: Conan could not be installed; the Conan packaging test will be skipped" >&2
    rm -rf "$venv"
  fi
}

# Python's own readers of the files lockstep writes, for the tests that check
# them ("io: weight files round-trip through Python's safetensors",
# "observe: TensorBoard's EventAccumulator reads the callback's event files"):
# safetensors, numpy and tensorboard from PyPI in .python-readers/venv (ignored
# by git; tests/lib/reader_python.sh finds it), installed once (about 15 s
# here). scripts/test.sh calls it, scripts/demo.sh does not. A failed install
# only warns: those two tests then report skipped. LOCKSTEP_SKIP_PYTHON_READERS=1
# leaves it out.
lockstep_ensure_python_readers() {
  local root venv
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  venv=$root/.python-readers/venv
  [[ ${LOCKSTEP_SKIP_PYTHON_READERS:-0} == 1 ]] && return 0
  if [[ -x $venv/bin/python ]] && "$venv/bin/python" -c 'import safetensors.numpy, numpy, tensorboard' 2>/dev/null; then
    return 0
  fi
  echo "installing safetensors, numpy and tensorboard from PyPI into .python-readers/venv"
  local start=$SECONDS
  rm -rf "$venv"
  if python3 -m venv "$venv" &&
    "$venv/bin/pip" install --quiet --disable-pip-version-check 'safetensors<1' numpy 'tensorboard>=2,<3'; then
    echo "python readers installed in $((SECONDS - start)) s"
  else
    echo "warning: safetensors, numpy or tensorboard could not be installed; the two tests of Python's readers" \
      "will be skipped" >&2
    rm -rf "$venv"
  fi
}

# Steps 1 and 2 of both scripts: the packages, then `cmake --preset host`.
lockstep_prepare_host_build() {
  echo "==> [1/4] packages"
  lockstep_ensure_packages
  lockstep_ensure_conan
  echo "==> [2/4] configure (cmake --preset host)"
  cmake --preset host
}

# Run directly rather than sourced: do the check and install now.
if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  set -euo pipefail
  lockstep_ensure_packages
  lockstep_ensure_conan
fi
