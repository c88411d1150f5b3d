#!/usr/bin/env bash
# Runs PROGRAM (tests/mpi/stop_rank.cpp) under mpirun -np 2 and stops rank 1
# with SIGSTOP once training is under way (its pid file is written).
#   stop       rank 1 stays stopped: the job must end non-zero within 30 s of
#              the stop (the program's timeout is 10 s), naming rank 1.
#   stop_cont  rank 1 continues (SIGCONT) after 3 s: training must finish, exit 0.
# Usage: check_stopped_rank.sh stop|stop_cont PROGRAM MPIEXEC [MPIFLAGS...]
set -u
mode=$1 program=$2 mpiexec=$3
shift 3
dir=$(mktemp -d)
job=
cleanup() {
  # Never leave a stopped rank behind: it would hold mpirun forever.
  if [ -s "$dir/rank1.pid" ]; then kill -KILL "$(cat "$dir/rank1.pid")" 2>/dev/null; fi
  if [ -n "$job" ]; then kill -KILL "$job" 2>/dev/null; fi
  rm -rf "$dir"
}
trap cleanup EXIT

"$mpiexec" "$@" -np 2 "$program" "$dir" >"$dir/out" 2>&1 &
job=$!
for _ in $(seq 1 300); do
  [ -s "$dir/rank1.pid" ] && break
  kill -0 "$job" 2>/dev/null || break
  sleep 0.1
done
if [ ! -s "$dir/rank1.pid" ]; then
  cat "$dir/out"
  echo "FAIL: rank 1 wrote no pid file within 30 s"
  exit 1
fi
pid=$(cat "$dir/rank1.pid")
kill -STOP "$pid"
stopped=$(date +%s.%N)
echo "rank 1 (pid $pid) stopped"
if [ "$mode" = stop_cont ]; then
  sleep 3
  kill -CONT "$pid"
  echo "rank 1 continued after 3 s"
fi

limit=30
[ "$mode" = stop_cont ] && limit=40
while kill -0 "$job" 2>/dev/null; do
  if awk -v a="$stopped" -v b="$(date +%s.%N)" -v l="$limit" 'BEGIN { exit !(b - a > l) }'; then
    cat "$dir/out"
    echo "FAIL: the job hung: still running $limit s after rank 1 was stopped"
    exit 1
  fi
  sleep 0.2
done
wait "$job"
rc=$?
job=
seconds=$(awk -v a="$stopped" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
cat "$dir/out"
if [ "$mode" = stop ]; then
  if [ "$rc" -eq 0 ]; then echo "FAIL: the job exited 0 although rank 1 stayed stopped"; exit 1; fi
  if ! grep -q "waiting for rank 1" "$dir/out"; then echo "FAIL: no message says rank 1 was waited for"; exit 1; fi
  echo "job ended with $rc $seconds s after rank 1 was stopped, naming rank 1"
else
  if [ "$rc" -ne 0 ]; then echo "FAIL: the job exited $rc although rank 1 continued after 3 s"; exit 1; fi
  if ! grep -q "training finished" "$dir/out"; then echo "FAIL: training did not finish"; exit 1; fi
  echo "training finished $seconds s after rank 1 was stopped for 3 s"
fi
exit 0
