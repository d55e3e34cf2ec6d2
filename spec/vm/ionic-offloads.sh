#!/bin/bash
# VM test of the ionic Ethernet offloads with the stock driver: iperf3 guest ->
# host and host -> guest over the ionic netdev (host TAP with IFF_VNET_HDR),
# beside a virtio-net NIC (QEMU's userspace virtio-net) on a second host TAP in
# the same guest, same run; ethtool -k; the ionic figures again with the
# offloads turned off (ethtool -K); then short correctness runs over IPv6, a
# VLAN and MTU 9000. Prints the figures and their ratios; fails only when a
# transfer does not complete or an offload is not shown on. Needs root, the
# rig's images and iperf3 on the host.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
RIG=${E2E_RIG:-$HERE/rig}
SECS=${IPERF_SECS:-10}
TAPI=eoi$$ TAPV=eov$$
SOCK=/tmp/ernic-vm-offloads-$$.sock
LOG=/tmp/ernic-vm-offloads-$$.log
OUT=/tmp/ernic-vm-offloads-$$.out
fail=0
command -v iperf3 >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q iperf3 >/dev/null 2>&1
for net in 10.78.0.1/ 10.78.1.1/ 10.78.100.1/; do
  if ip -4 addr | grep -q "inet ${net//./\\.}"; then echo "${net%/} is already on a host interface; remove it first"; exit 1; fi
done

server= pids=()
cleanup() {
  [ -n "$server" ] && kill "$server" 2>/dev/null
  for p in "${pids[@]+"${pids[@]}"}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  ip link del $TAPI 2>/dev/null; ip link del $TAPV 2>/dev/null
  rm -f "$SOCK" "$OUT"
}
trap cleanup EXIT

# The ionic side: MTU 9000 on the host end, so the guest can try its jumbo MTU; a VLAN 100 on top.
ip tuntap add dev $TAPI mode tap || exit 1
ip link set $TAPI mtu 9000
ip addr add 10.78.0.1/24 dev $TAPI
ip -6 addr add fd78::1/64 dev $TAPI nodad
ip link set $TAPI up
# A host kernel without 802.1Q (no 8021q) cannot end the VLAN: the guest then skips that run and says so.
HOST_VLAN=0
if ip link add link $TAPI name $TAPI.100 type vlan id 100 2>/dev/null; then
  ip addr add 10.78.100.1/24 dev $TAPI.100 && ip link set $TAPI.100 up && HOST_VLAN=1
else
  echo "note: this host kernel has no 802.1Q VLAN support; the VLAN run is skipped"
fi
# The virtio-net side.
ip tuntap add dev $TAPV mode tap || exit 1
ip addr add 10.78.1.1/24 dev $TAPV
ip link set $TAPV up

node "$ROOT/dist/bin/rocm-ernic.js" -s "$SOCK" --tap $TAPI -L info >"$LOG" 2>&1 &
server=$!
for _ in $(seq 50); do [ -S "$SOCK" ] && break; sleep 0.1; done
# One iperf3 server per NIC, bound to its address; a third on every address (IPv6, VLAN).
iperf3 -s -B 10.78.0.1 -p 5201 >/dev/null 2>&1 & pids+=($!)
iperf3 -s -B 10.78.1.1 -p 5202 >/dev/null 2>&1 & pids+=($!)
iperf3 -s -p 5203 >/dev/null 2>&1 & pids+=($!)

"$RIG/run-guest.sh" --socket "$SOCK" --virtio-tap $TAPV --smp 2 --timeout 1200 \
  --script <(printf '#!/bin/bash\nexport SECS=%s HOST_VLAN=%s\n' "$SECS" "$HOST_VLAN"; cat "$HERE/guest-ionic-offloads.sh") | tee "$OUT"
[ "${PIPESTATUS[0]}" = 0 ] || fail=1

# The figures side by side (Mbit/s, iperf3's receiver line).
fig() { awk -v k="$1" '$1 == "RESULT" && $2 == k { print $3 }' "$OUT"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0 && b > 0) printf "%.2f", a / b; else print "n/a" }'; }
echo "##### iperf3 over $SECS s, Mbit/s (TCG guest, same run)"
for dir in tx rx; do
  what=$([ $dir = tx ] && echo "guest -> host" || echo "host -> guest")
  i=$(fig ionic-$dir) v=$(fig virtio-$dir) o=$(fig ionic-$dir-off)
  echo "  $what: ionic ${i:-?} (offloads off: ${o:-?})   virtio-net ${v:-?}   ionic/virtio $(ratio "${i:-0}" "${v:-0}")   on/off $(ratio "${i:-0}" "${o:-0}")"
done
kill -0 "$server" 2>/dev/null && echo "ok   - server still running" || { echo "FAIL - server exited"; fail=1; }
echo "server log: warnings: $(grep -c ' warn: ' "$LOG")"; grep ' warn: ' "$LOG" | head -5
echo "ionic-offloads: $([ $fail = 0 ] && echo PASS || echo FAIL)"
exit $fail
