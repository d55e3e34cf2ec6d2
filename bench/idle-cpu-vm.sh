#!/bin/bash
# Idle cost of the server with a real guest attached: boot the rig's guest
# with the stock ionic driver up (link, queues enabled), let it sit idle, and
# read the server's CPU time (utime+stime from /proc) over 10 s of idleness.
# The guest driver itself still reads BAR0 (heartbeat, watchdog), so the
# figure is what those accesses cost. Needs root and the rig's images.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
RIG=${E2E_RIG:-$ROOT/spec/vm/rig}
SOCK=/tmp/ernic-idle-$$.sock
TAP=ernidle$$
ip tuntap add dev $TAP mode tap && ip addr add 10.78.0.1/24 dev $TAP && ip link set $TAP up
node "$ROOT/dist/bin/rocm-ernic.js" -s "$SOCK" --tap $TAP -L info >/tmp/ernic-idle-$$.log 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; ip link del $TAP 2>/dev/null; rm -f $SOCK' EXIT
for _ in $(seq 50); do [ -S "$SOCK" ] && break; sleep 0.1; done
cat >/tmp/ernic-idle-guest-$$.sh <<'G'
#!/bin/bash
modprobe ionic; sleep 1
ip addr add 10.78.0.2/24 dev eth0; ip link set eth0 up
ping -c 1 -W 5 10.78.0.1 >/dev/null && echo "guest: link up, idle for 25 s"
sleep 25
G
"$RIG/run-guest.sh" --socket "$SOCK" --script /tmp/ernic-idle-guest-$$.sh --timeout 200 &
vm=$!
for _ in $(seq 240); do ping -c 1 -W 1 10.78.0.2 >/dev/null 2>&1 && break; sleep 0.5; done
sleep 3
tick=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' /proc/$server/stat; }
a=$(cpu); t0=$(date +%s.%N)
sleep 10
b=$(cpu); t1=$(date +%s.%N)
ms=$(( (b - a) * 1000 / tick ))
wall=$(echo "$t1 - $t0" | bc)
echo "idle server with a guest attached: ${ms} ms of CPU over ${wall} s wall ($(echo "scale=3; $ms / ($wall * 10)" | bc)% of one core)"
wait $vm
