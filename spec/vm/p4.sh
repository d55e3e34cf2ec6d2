#!/bin/bash
# VM test of the P4 engine (issue 15) with the stock drivers: one guest (4
# vCPUs, for ionic_rdma) with three of our devices, each its own server:
#   A  l2_switch.json (smac learns, dmac floods) on TAP 10.77.0.1/24
#   B  simple_router.json + the fixtures' commands.txt on TAP 10.0.1.10/24,
#      MAC 00:04:00:00:00:01 (the next hop commands.txt names), a route and a
#      static neighbour back to the guest's 10.0.0.10 (the router answers no ARP)
#   C  fixtures/p4/rdma_fp8.json + rdma_fp8.commands.txt, --p4-guest-scope read,
#      a stats file
# The guest (guest-p4.sh): P4 device commands from userspace refused under
# scope none and limited under scope read; ping the host through A and B;
# pyverbs on C: an RDMA WRITE turned into an E4M3 add checked against a table
# (guest-p4-fp8.py). Here: the servers outlive the guest, the P4 segment and
# WQE counters in C's stats file. Needs root and the rig's images; the bmv2
# programs are the repository's fixtures/p4.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
RIG=${E2E_RIG:-$HERE/rig}
FIX=$ROOT/fixtures/p4
TAPA=ernp4a$$ TAPB=ernp4b$$
TMP=/tmp/ernic-vm-p4-$$
mkdir -p $TMP
fail=0
for a in 10.77.0.1 10.0.1.10; do
  if ip -4 addr | grep -q "inet $a/"; then echo "$a is already on a host interface; remove it first"; exit 1; fi
done

ip tuntap add dev $TAPA mode tap || exit 1
ip tuntap add dev $TAPB mode tap || { ip link del $TAPA; exit 1; }
ip addr add 10.77.0.1/24 dev $TAPA
ip link set $TAPA up
ip link set $TAPB address 00:04:00:00:00:01
ip addr add 10.0.1.10/24 dev $TAPB
ip link set $TAPB up
ip route add 10.0.0.10/32 dev $TAPB
ip neigh replace 10.0.0.10 lladdr 00:aa:bb:00:00:01 dev $TAPB nud permanent
sysctl -q -w net.ipv4.conf.$TAPB.rp_filter=0 net.ipv4.conf.$TAPA.rp_filter=0

servers=()
cleanup() {
  for p in "${servers[@]}"; do kill $p 2>/dev/null; done
  wait 2>/dev/null
  ip link del $TAPA 2>/dev/null; ip link del $TAPB 2>/dev/null
  rm -f $TMP/*.sock
}
trap cleanup EXIT

printf 'table_set_default smac mac_learn\ntable_set_default dmac broadcast\n' > $TMP/l2.txt
start() { # name args...
  local name=$1; shift
  node "$ROOT/dist/bin/rocm-ernic.js" -s $TMP/$name.sock -L info "$@" > $TMP/$name.log 2>&1 &
  servers+=($!)
  for _ in $(seq 100); do [ -S $TMP/$name.sock ] && return 0; sleep 0.1; done
  echo "FAIL - server $name did not start:"; cat $TMP/$name.log; return 1
}
start A --tap $TAPA --mac 02:00:00:77:00:02 --p4-program "$FIX/l2_switch.json" --p4-commands $TMP/l2.txt || exit 1
start B --tap $TAPB --mac 00:04:00:00:00:00 --p4-program "$FIX/simple_router.json" --p4-commands "$FIX/commands.txt" || exit 1
start C --mac 02:00:00:81:00:02 --p4-program "$ROOT/fixtures/p4/rdma_fp8.json" --p4-commands "$ROOT/fixtures/p4/rdma_fp8.commands.txt" \
  --p4-guest-scope read -S $TMP/C.stats || exit 1
for n in A B C; do sed 's/^/server '$n': /' $TMP/$n.log; done

"$RIG/run-guest.sh" --socket $TMP/A.sock --socket $TMP/B.sock --socket $TMP/C.sock --smp 4 --timeout 1500 \
  --file "$HERE/guest-p4-fp8.py" --script "$HERE/guest-p4.sh" || fail=1

i=0
for n in A B C; do
  kill -0 ${servers[$i]} 2>/dev/null && echo "ok   - server $n still running" || { echo "FAIL - server $n exited"; fail=1; }
  i=$((i + 1))
done
sleep 1.5 # the stats file is rewritten about once a second
echo "server C stats file, P4 section:"
sed -n '/P4 Statistics/,/^$/p' $TMP/C.stats | grep -E 'program|scope|wqe_|guest_commands|counter_' | sed 's/^/  /'
num() { awk -v k="$1" '$1 == k || $1 == k":" {print $NF}' $TMP/C.stats | tail -1; }
adds=$(num wqe_adds); dropped=$(num wqe_dropped); refused=$(num guest_commands_refused)
[ "${adds:-0}" -ge 1 ] && echo "ok   - stats file: wqe_adds $adds" || { echo "FAIL - stats file: wqe_adds ${adds:-missing}"; fail=1; }
[ "${dropped:-0}" -ge 1 ] && echo "ok   - stats file: wqe_dropped $dropped" || { echo "FAIL - stats file: wqe_dropped ${dropped:-missing}"; fail=1; }
[ "${refused:-0}" -ge 2 ] && echo "ok   - stats file: guest_commands_refused $refused" || { echo "FAIL - stats file: guest_commands_refused ${refused:-missing}"; fail=1; }
for n in A B C; do echo "server $n warnings: $(grep -c ' warn: ' $TMP/$n.log) (log $TMP/$n.log)"; done
echo "p4: $([ $fail = 0 ] && echo PASS || echo FAIL)"
exit $fail
