# shellcheck shell=bash
# What the compare_*.sh scripts share; sourced, not run.

# The median of the numbers given as arguments (the lower middle one of an even count).
median() { printf '%s\n' "$@" | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

# The number of a `samples_per_s=N ...` line on standard input (train_throughput's and the peers' last lines).
samples_per_s() { sed -n 's/^samples_per_s=\([0-9]*\).*/\1/p'; }

# measure COMMAND...: runs it and prints its samples_per_s; else names the run, shows its last
# lines and exits 1 (called inside $(...): the caller's `set -e` ends the script).
measure() {
  local out value
  if ! out=$("$@" 2>&1) || ! value=$(samples_per_s <<<"$out") || [[ -z $value ]]; then
    echo "error: no samples_per_s from: $*" >&2
    tail -5 <<<"$out" >&2
    exit 1
  fi
  echo "$value"
}

# "KEY=A/B " with three decimals: one key=value of a script's last line.
key_ratio() { awk -v k="$1" -v a="$2" -v b="$3" 'BEGIN { printf "%s=%.3f ", k, a / b }'; }
