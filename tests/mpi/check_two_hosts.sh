#!/usr/bin/env bash
# Two hosts, for real: two network namespaces joined by a veth pair stand for
# two machines, and a 2-process Open MPI job runs across them over TCP
# (mpirun in the first; its rsh launch agent starts the second process's
# daemon inside the second namespace). Only the namespaces' own addresses
# (10.231.7.1 and .2 on the veth pair) and loopback are used.
#   1. fashion_mnist --strategy multiworker, 2 epochs, one process in each
#      namespace: the printed accuracy and loss must equal those of one
#      process of 2 replicas, to the digit. Both run in the deterministic mode
#      (--deterministic --units 2), which promises that; the default mode
#      promises only 1e-5, and on a 2-core AVX2 machine its 2 epochs printed
#      0.8565 across the namespaces against 0.8558 in one process.
#   2. The same with --timeout 10 and many epochs; once training is under
#      way the link is taken down: the ranks must give up with an Error
#      naming the rank they waited for, and the job must end non-zero within
#      40 s of the link going down, not hang.
# Exits 77 (ctest: skipped) with a sentence where namespaces cannot be made
# (not root, no `ip`, no CAP_SYS_ADMIN in a container).
# Usage: check_two_hosts.sh EXAMPLE MPIEXEC
set -u
example=$1 mpiexec=$2

if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null 2>&1; then
  echo "skipped: network namespaces need root and iproute2's ip"
  exit 77
fi
a=lockstep-a-$$ b=lockstep-b-$$ va=lsa$$ vb=lsb$$
addr_a=10.231.7.1 addr_b=10.231.7.2
dir=$(mktemp -d)
job=
cleanup() {
  if [ -n "$job" ]; then kill -KILL "$job" 2>/dev/null; fi
  for ns in "$a" "$b"; do
    # shellcheck disable=SC2046
    kill -KILL $(ip netns pids "$ns" 2>/dev/null) 2>/dev/null
    ip netns del "$ns" 2>/dev/null  # deletes its end of the veth pair, and so the pair
  done
  rm -rf "$dir"
}
trap cleanup EXIT
if ! ip netns add "$a" 2>"$dir/err"; then
  echo "skipped: cannot make a network namespace here ($(cat "$dir/err"))"
  exit 77
fi
set -e
ip netns add "$b"
ip link add "$va" type veth peer name "$vb"
ip link set "$va" netns "$a"
ip link set "$vb" netns "$b"
ip -n "$a" addr add "$addr_a/24" dev "$va"
ip -n "$b" addr add "$addr_b/24" dev "$vb"
for ns in "$a" "$b"; do ip -n "$ns" link set lo up; done
ip -n "$a" link set "$va" up
ip -n "$b" link set "$vb" up
# TCP gives up on a peer that stopped acknowledging after about 6 s instead
# of the default 15 retries (15 minutes), as clusters tune it: this is what
# lets mpirun notice that it lost the other host's daemon once the ranks
# have ended. Set inside the namespaces only.
for ns in "$a" "$b"; do ip netns exec "$ns" sysctl -q -w net.ipv4.tcp_retries2=5; done
set +e

# mpirun's launch agent: "agent HOST COMMAND..." runs COMMAND in HOST's namespace.
cat >"$dir/agent" <<EOF
#!/bin/sh
host=\$1; shift
case \$host in
  $addr_a) ns=$a ;;
  $addr_b) ns=$b ;;
  *) echo "launch agent: unknown host \$host" >&2; exit 1 ;;
esac
echo "\$host \$ns" >>"$dir/launched"
exec ip netns exec "\$ns" sh -c "\$*"
EOF
chmod +x "$dir/agent"
mpi=("$mpiexec" --allow-run-as-root --oversubscribe --bind-to none -np 2 --map-by node
     --host "$addr_a,$addr_b" --mca plm_rsh_agent "$dir/agent"
     --mca btl self,tcp --mca btl_tcp_if_include 10.231.7.0/24 --mca oob_tcp_if_include 10.231.7.0/24)

# 1. Two hosts train as one process of two replicas does.
timeout 300 ip netns exec "$a" "${mpi[@]}" "$example" --strategy multiworker --replicas 1 --epochs 2 --deterministic --units 2 \
  >"$dir/two_hosts" 2>&1
rc=$?
if [ $rc != 0 ] || ! grep -q "$addr_b $b" "$dir/launched" 2>/dev/null; then
  tail -c 3000 "$dir/two_hosts"
  echo "FAIL: the job across two namespaces ended with $rc, or nothing was launched in the second"
  exit 1
fi
"$example" --replicas 2 --epochs 2 --deterministic --units 2 >"$dir/one_process" 2>&1 || { cat "$dir/one_process"; exit 1; }
two=$(grep '^test_accuracy=' "$dir/two_hosts")
one=$(grep '^test_accuracy=' "$dir/one_process")
if [ -z "$two" ] || [ "$two" != "$one" ]; then
  echo "FAIL: two hosts gave '$two', one process of two replicas '$one'"
  exit 1
fi
echo "two namespaces over TCP: $two (one process of two replicas: $one)"

# 2. The link goes down mid-training: an Error within the timeout, not a hang.
ip netns exec "$a" "${mpi[@]}" "$example" --strategy multiworker --replicas 1 --epochs 1000 --timeout 10 \
  >"$dir/link_down" 2>&1 &
job=$!
for _ in $(seq 1 600); do
  grep -q "Epoch 1/" "$dir/link_down" 2>/dev/null && break
  kill -0 "$job" 2>/dev/null || break
  sleep 0.1
done
sleep 2
if ! kill -0 "$job" 2>/dev/null; then
  tail -c 3000 "$dir/link_down"
  echo "FAIL: the job ended before the link was taken down"
  exit 1
fi
ip -n "$a" link set "$va" down
down=$(date +%s.%N)
echo "link down"
for _ in $(seq 1 400); do
  kill -0 "$job" 2>/dev/null || break
  sleep 0.1
done
if kill -0 "$job" 2>/dev/null; then
  tr '\r' '\n' <"$dir/link_down" | grep -v '/[0-9]* \[' | tail -20
  echo "FAIL: the job still runs 40 s after the link went down"
  exit 1
fi
wait "$job"
rc=$?
job=
took=$(awk -v a="$down" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
message=$(tr '\r' '\n' <"$dir/link_down" | grep -o -m1 'lockstep: rank .*did not finish within 10 s.*' || true)
if [ $rc = 0 ] || [ -z "$message" ]; then
  tr '\r' '\n' <"$dir/link_down" | grep -v '/[0-9]* \[' | tail -20
  echo "FAIL: after the link went down the job ended with $rc, without the timeout's message"
  exit 1
fi
echo "$message"
echo "job ended with $rc $took s after the link went down"
