# shellcheck shell=bash
# Sourced by the tests that check lockstep's files with Python's own readers
# (safetensors, TensorBoard). Sets $python: $LOCKSTEP_PYTHON if set, else the
# virtual environment that scripts/test.sh installs them into
# (.python-readers/venv), else python3. `require_modules M...` exits 77
# (ctest: skipped) where that Python cannot import them, saying how to get them.
reader_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
if [[ -n ${LOCKSTEP_PYTHON:-} ]]; then
  python=$LOCKSTEP_PYTHON
elif [[ -x $reader_root/.python-readers/venv/bin/python ]]; then
  python=$reader_root/.python-readers/venv/bin/python
else
  python=python3
fi

require_modules() {
  local module
  if ! command -v "$python" >/dev/null 2>&1; then
    echo "skipped: no $python (set LOCKSTEP_PYTHON, or run scripts/test.sh, which installs the readers)"
    exit 77
  fi
  for module in "$@"; do
    if ! "$python" -c "import $module" 2>/dev/null; then
      echo "skipped: $python cannot import $module (scripts/test.sh installs it into .python-readers/venv;" \
        "or pip install safetensors numpy tensorboard, or set LOCKSTEP_PYTHON)"
      exit 77
    fi
  done
  echo "python: $python"
}
