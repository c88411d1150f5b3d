#!/usr/bin/env bash
# Builds the libFuzzer targets of lockstep's file readers with clang (preset
# fuzz, build/fuzz; sources in tests/fuzz/) and runs each for FUZZ_SECONDS
# (default 60), two at a time, failing on any crash, sanitizer report (ASan,
# UBSan), escaped exception, hang (-timeout) or oversized allocation
# (-rss_limit_mb). The targets:
#   idx               read_idx, read_idx_images/labels, load_idx (plain and gzip)
#   idx_without_zlib  the same readers built without zlib (LOCKSTEP_HAVE_ZLIB=0)
#   csv               read_csv and read_csv_regression under several CsvOptions
#   safetensors       SafetensorsFile, read_checkpoint<Model>, load_weights
# Seeds are written at run time by fuzz_seeds (valid files lockstep writes,
# gzipped IDX files, near misses) into build/fuzz/seeds; what the fuzzers
# find grows build/fuzz/corpus/<target> across runs; a crashing input is
# kept as build/fuzz/artifacts/<target>-crash-... (build/ is not in git):
# replay it with build/fuzz/tests/fuzz/fuzz_<target> <file>. Run by
# scripts/test.sh (LOCKSTEP_SKIP_FUZZ=1 leaves it out); on its own:
#   scripts/fuzz.sh                      all targets, 60 s each
#   FUZZ_SECONDS=600 scripts/fuzz.sh csv one target, ten minutes
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=scripts/lib/ensure-packages.sh
source scripts/lib/ensure-packages.sh
lockstep_ensure_packages cmake zlib1g-dev "${LOCKSTEP_CHECK_PACKAGES[@]}"

seconds=${FUZZ_SECONDS:-60}
targets=("$@")
((${#targets[@]})) || targets=(idx csv safetensors idx_without_zlib)
dir=build/fuzz

echo "==> [fuzz 1/3] configure and build (cmake --preset fuzz, clang++)"
start=$SECONDS
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j 2
echo "==> fuzz build: $((SECONDS - start)) s"

echo "==> [fuzz 2/3] seeds (fuzz_seeds)"
rm -rf "$dir/seeds"
"$dir/tests/fuzz/fuzz_seeds" "$dir/seeds"
mkdir -p "$dir/artifacts" "$dir/logs" "$dir/tmp"

# Inputs a little larger than the largest seed (a checkpoint is ~1.4 KB).
max_len() {
  case $1 in
    safetensors) echo 8192 ;;
    *) echo 4096 ;;
  esac
}
seeds_of() {
  case $1 in
    idx_without_zlib) echo "$dir/seeds/idx" ;;
    *) echo "$dir/seeds/$1" ;;
  esac
}

run_one() {
  local t=$1
  mkdir -p "$dir/corpus/$t"
  # Each input is written to a temporary file (the readers take a path),
  # kept under build/fuzz/tmp where a crash leaves it. -rss_limit_mb also
  # caps a single allocation (libFuzzer's -malloc_limit_mb defaults to it).
  TMPDIR=$PWD/$dir/tmp "$dir/tests/fuzz/fuzz_$t" -max_total_time="$seconds" -max_len="$(max_len "$t")" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$dir/artifacts/$t-" "$dir/corpus/$t" "$(seeds_of "$t")" \
    >"$dir/logs/$t.log" 2>&1
}

echo "==> [fuzz 3/3] ${targets[*]}: ${seconds} s each, two at a time"
start=$SECONDS
failed=()
for ((i = 0; i < ${#targets[@]}; i += 2)); do
  pids=()
  batch=("${targets[@]:i:2}")
  for t in "${batch[@]}"; do
    run_one "$t" &
    pids+=($!)
  done
  for k in "${!batch[@]}"; do
    t=${batch[k]}
    if wait "${pids[k]}"; then
      # e.g. "stat::number_of_executed_units: 123456" and the last coverage line.
      echo "fuzz_$t: ok, $(grep -m1 -o 'number_of_executed_units: [0-9]*' "$dir/logs/$t.log" | awk '{print $2}') runs," \
        "$(grep -E '^#[0-9]+' "$dir/logs/$t.log" | tail -1 | grep -o 'cov: [0-9]* ft: [0-9]* corp: [0-9/a-zA-Z]*')"
    else
      failed+=("$t")
      echo "fuzz_$t: FAILED, the end of its log ($dir/logs/$t.log):" >&2
      tail -n 60 "$dir/logs/$t.log" >&2
    fi
  done
done
echo "==> fuzz runs: $((SECONDS - start)) s"
if ((${#failed[@]})); then
  echo "fuzz: ${failed[*]} failed; the inputs are in $dir/artifacts/" >&2
  exit 1
fi
