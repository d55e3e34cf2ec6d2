#!/bin/bash
# VM test of operating it (docs/operations.md): the counters of the stats file
# (-S) and of the server's /metrics (--metrics-port) move with guest traffic
# and match what the guest itself reads from the device: ethtool -S, ip -s
# link and ionic_0's hw_counters. Needs root and the rig's images.
#
# A host TAP (10.83.0.1/24, IPv6 off so the host sends nothing of its own),
# rocm-ernic with --tap, -S and --metrics-port 0 (a free port, from its log);
# one guest (4 vCPUs, spec/vm/guest-ops-counters.sh) pings the host, runs
# ib_write_bw on ionic_0, waits until its counters settle, prints them, says
# "ops-counters TOKEN ready" and stays attached for HOLD seconds.
#
# When to read: while the guest is still attached and quiet. The guest's
# figures are the device's LIF and port blocks (written into guest memory
# about once a second) and hw_counters (read through the admin queue). After
# the guest is gone what the stats file holds depends on how it left: a driver
# that resets the device on the way out (rmmod, an orderly shutdown) restarts
# the Ethernet blocks from zero (docs/operations.md), the rig's poweroff -f
# does not; read while attached, the guest's figures and the server's describe
# the same device at the same moment whatever the guest does next. The host watches
# the run's output.log (the guest's second serial port, written as the guest
# prints) for the marker, waits for the stats file's rewrite after the guest's
# last access (about a second, then one follow-up check), copies the file and
# scrapes /metrics. The guest reads its counters again after the window: if
# anything moved meanwhile the comparison is void and says so.
#
# Compared, each figure side by side:
#   Ethernet, same block read two ways (must be equal):
#     ip -s link (the LIF block) = stats file LIF ucast+mcast+bcast = /metrics rocm_ernic_lif_*_total
#     ethtool -S frames_/octets_{tx,rx}_ok (the port block) = stats file port = /metrics rocm_ernic_eth_port_*
#   Ethernet, counted at two layers (equal here, and why): ethtool -S
#     tx_/rx_packets and _bytes are the driver's own per-queue counts (every
#     frame it posts, skb->len; every completion, the completion's length);
#     the device counts each frame it sends or delivers by the same length
#     (no FCS on either side). No TSO for ping and no drops (checked: the drop
#     counters are 0), so both layers see the same frames.
#   RDMA: hw_counters tx_wqes, rx_wqes, cqes, rdma_write_bytes ... = stats file
#     RDMA Counters = /metrics rocm_ernic_rdma_*_total; the WQE histogram's
#     RDMA_WRITE; total_bytes_rdma_write; port_data_transmitted_bytes.
#   Moved: packets >= PINGS each way, rdma_write_bytes >= 500 x 64 KiB.
# After the guest exits: the RDMA counters in the stats file are unchanged
# (they survive the reset and the detach, docs/operations.md).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
RIG=${E2E_RIG:-$HERE/rig}
# Where run-guest.sh keeps the run's live output.log (the project's rig; set
# OPS_RUNS_DIR for another rig with the same layout).
RUNS=${OPS_RUNS_DIR:-${RIG_DIR:-/var/tmp/ernic-rig}/runs}
TAP=ernops$$
SOCK=/tmp/ernic-vm-ops-$$.sock
STATS=/tmp/ernic-vm-ops-$$.stats
LOG=/tmp/ernic-vm-ops-$$.log
OUT=/tmp/ernic-vm-ops-$$.guest
SNAP=/tmp/ernic-vm-ops-$$.snap
METRICS=/tmp/ernic-vm-ops-$$.metrics
HOST_IP=10.83.0.1 GUEST_IP=10.83.0.2 PINGS=20 HOLD=10
WBW_BYTES=$((500 * 65536))
TOKEN=$$-$RANDOM
MAC=72:6f:63:6d:2d:6e
fail=0
ok() { echo "ok   - $*"; }
bad() { echo "FAIL - $*"; fail=1; }

[ "$(id -u)" = 0 ] || { echo "needs root"; exit 2; }
[ -f "$ROOT/dist/bin/rocm-ernic.js" ] || { echo "no dist/: npx tsc -p tsconfig.json first"; exit 2; }
if ip -4 addr | grep -q "inet ${HOST_IP//./\\.}/"; then echo "$HOST_IP is already on a host interface; remove it first"; exit 1; fi

ip tuntap add dev $TAP mode tap || exit 1
server= guest=
cleanup() {
  [ -n "$guest" ] && kill "$guest" 2>/dev/null
  [ -n "$server" ] && kill "$server" 2>/dev/null
  wait 2>/dev/null
  ip link del $TAP 2>/dev/null
  rm -f "$SOCK" "$STATS" "$SNAP" "$METRICS" "$OUT"
}
trap cleanup EXIT
# IPv6 off on the TAP: the host sends no DAD, router solicitation or MLD frames into it.
[ -e /proc/sys/net/ipv6/conf/$TAP ] && sysctl -qw net.ipv6.conf.$TAP.disable_ipv6=1
ip addr add $HOST_IP/24 dev $TAP
# The guest's MAC as a permanent neighbour: the host never ARPs the guest on
# its own (no unicast probe ~5 s after the pings, into the quiet window).
ip neigh replace $GUEST_IP lladdr $MAC dev $TAP nud permanent
ip link set $TAP up

node "$ROOT/dist/bin/rocm-ernic.js" -s "$SOCK" --tap $TAP -m $MAC -S "$STATS" --metrics-port 0 -L info >"$LOG" 2>&1 &
server=$!
url=
for _ in $(seq 100); do
  url=$(grep -o 'http://[^ ]*/metrics' "$LOG" | head -n 1)
  [ -S "$SOCK" ] && [ -n "$url" ] && break
  sleep 0.1
done
[ -S "$SOCK" ] && [ -n "$url" ] || { echo "FAIL - the server did not start"; cat "$LOG"; exit 1; }
echo "server: socket $SOCK, stats file $STATS, metrics $url"

"$RIG/run-guest.sh" --socket "$SOCK" --smp 4 --timeout 900 \
  --script <(printf '#!/bin/bash\nexport HOST_IP=%s GUEST_IP=%s PINGS=%s TOKEN=%s HOLD=%s\n' "$HOST_IP" "$GUEST_IP" "$PINGS" "$TOKEN" "$HOLD"
             cat "$HERE/guest-ops-counters.sh") >"$OUT" 2>&1 &
guest=$!
snapped=0
while kill -0 $guest 2>/dev/null; do
  if grep -qa "ops-counters $TOKEN ready" "$RUNS"/run-*/output.log 2>/dev/null; then
    # The stats file is rewritten about a second after the guest's last access
    # (its hw_counters reads), and checked once more a second later.
    sleep 2.5
    cp "$STATS" "$SNAP" && curl -sf "$url" > "$METRICS" && snapped=1
    echo "host: stats file and /metrics read $(date +%T) while the guest holds still"
    break
  fi
  sleep 0.2
done
wait $guest; grc=$?; guest=
cat "$OUT"
[ $grc = 0 ] && ok "guest script passed" || bad "guest script exited $grc"
[ $snapped = 1 ] || { bad "no snapshot: the guest never said it was ready (or $RUNS has no output.log for it)"; exit 1; }
sleep 2   # the rewrite at reset/detach

# ---- readers -------------------------------------------------------------------------------
# gval NAME: the guest's figure (guest-counter NAME VALUE); gafter NAME: its second reading.
gval() { awk -v k="$1" '$1 == "guest-counter" && $2 == k { print $3; exit }' "$OUT"; }
gafter() { awk -v k="$1" '$1 == "guest-after" && $2 == k { print $3; exit }' "$OUT"; }
# sval FILE SECTION KEY: a value line of the stats file (docs/operations.md: "key : value"
# under a column-0 "Section:" line; QP blocks are indented further and not read here).
sval() {
  awk -v s="$2" -v k="$3" '
    /^[^ ].*:$/ { sec = substr($0, 1, length($0) - 1); next }
    sec == s && /^  [^ ]/ && index($0, " : ") { key = $1; if (key == k) { print substr($0, index($0, " : ") + 3); exit } }' "$1"
}
# mval NAME [LABELS]: a sample of the scrape (LABELS: a substring of its label set).
mval() { awk -v n="$1" -v l="${2:-}" '$1 !~ /^#/ { name = $1; sub(/\{.*/, "", name); if (name == n && index($1, l)) { print $2; exit } }' "$METRICS"; }
sum() { local t=0 v; for v in "$@"; do t=$((t + ${v:-0})); done; echo $t; }
slif() { sum "$(sval "$1" 'Ethernet LIF Statistics' "$2_ucast_$3")" "$(sval "$1" 'Ethernet LIF Statistics' "$2_mcast_$3")" "$(sval "$1" 'Ethernet LIF Statistics' "$2_bcast_$3")"; }
mlif() { sum "$(mval "rocm_ernic_lif_$1_ucast_$2_total")" "$(mval "rocm_ernic_lif_$1_mcast_$2_total")" "$(mval "rocm_ernic_lif_$1_bcast_$2_total")"; }
# same WHAT A B [C...]: every figure present and equal.
same() {
  local what=$1 a=$2 v; shift 2
  for v in "$@"; do if [ -z "$a" ] || [ -z "$v" ] || [ "$v" != "$a" ]; then bad "$what: ${a:-missing} vs ${*:-missing}"; return; fi; done
  ok "$what: $a"
}
# atleast WHAT VALUE MIN
atleast() { if [ -n "$2" ] && [ "$2" -ge "$3" ]; then ok "$1: $2 >= $3"; else bad "$1: ${2:-missing} (want >= $3)"; fi; }

conn=$(sval "$SNAP" Instance connection)
# "connected" or "connected (device reset)": the driver's RESET at probe is a device reset.
case $conn in connected*) ok "stats file: connection : $conn, at the snapshot" ;; *) bad "stats file connection at the snapshot: '$conn'" ;; esac
[ "$(mval rocm_ernic_connection_up state=\"connected\")" = 1 ] && ok "/metrics: rocm_ernic_connection_up{state=\"connected\"} 1 at the snapshot" || bad "/metrics connection_up{state=\"connected\"}: $(mval rocm_ernic_connection_up state=\"connected\")"

# ---- did anything move while the host read? --------------------------------------------------
moved=
for k in $(awk '$1 == "guest-counter" && $2 !~ /^hw\./ { print $2 }' "$OUT") hw.tx_wqes hw.rx_wqes hw.cqes hw.rdma_write_bytes hw.tx_bytes hw.rx_bytes; do
  [ "$(gval "$k")" = "$(gafter "$k")" ] || moved+=" $k:$(gval "$k")->$(gafter "$k")"
done
[ -z "$moved" ] && ok "guest counters unchanged across the host's read window (${HOLD}s)" || bad "guest counters moved while the host read:$moved"

# ---- Ethernet ------------------------------------------------------------------------------------
echo "--- Ethernet: guest | stats file | /metrics (ip -s link reads the LIF block, ethtool -S port counters the port block)"
for dir in tx rx; do
  for unit in packets bytes; do
    g=$(gval link.${dir}_$unit) s=$(slif "$SNAP" $dir $unit) m=$(mlif $dir $unit)
    printf '    %-24s ip -s link %-10s stats file %-10s /metrics %s\n' "LIF ${dir}_$unit" "$g" "$s" "$m"
    same "LIF ${dir}_$unit: ip -s link = stats file = /metrics" "$g" "$s" "$m"
  done
done
for k in frames_tx_ok frames_rx_ok octets_tx_ok octets_rx_ok frames_tx_all frames_rx_all frames_tx_unicast frames_tx_broadcast frames_rx_unicast; do
  g=$(gval ethtool.$k) s=$(sval "$SNAP" 'Ethernet Port Statistics' $k) m=$(mval rocm_ernic_eth_port_${k}_total)
  printf '    %-24s ethtool -S %-10s stats file %-10s /metrics %s\n' "port $k" "$g" "$s" "$m"
  same "port $k: ethtool -S = stats file = /metrics" "$g" "$s" "$m"
done
same "total_ip_bytes_tx (Device Statistics) = LIF tx bytes" "$(sval "$SNAP" 'Device Statistics' total_ip_bytes_tx)" "$(slif "$SNAP" tx bytes)"
same "total_ip_bytes_rx (Device Statistics) = LIF rx bytes" "$(sval "$SNAP" 'Device Statistics' total_ip_bytes_rx)" "$(slif "$SNAP" rx bytes)"
# The driver's own counts against the device's (see the header: same frames, same lengths).
drops=$(sum "$(gval link.tx_dropped)" "$(gval link.rx_dropped)" "$(gval ethtool.hw_tx_dropped)" "$(gval ethtool.hw_rx_dropped)")
[ "$drops" = 0 ] && ok "no drops on either layer (ip -s link tx/rx_dropped, ethtool -S hw_tx/rx_dropped)" || bad "drops: $drops"
for dir in tx rx; do
  for unit in packets bytes; do
    g=$(gval ethtool.${dir}_$unit) s=$(slif "$SNAP" $dir $unit)
    printf '    %-24s ethtool -S (driver) %-10s stats file LIF %s\n' "${dir}_$unit" "$g" "$s"
    same "ethtool -S ${dir}_$unit (the driver's count) = stats file LIF" "$g" "$s"
  done
done
atleast "guest sent packets (ping)" "$(slif "$SNAP" tx packets)" $PINGS
atleast "guest received packets (ping replies)" "$(slif "$SNAP" rx packets)" $PINGS

# ---- RDMA ----------------------------------------------------------------------------------------
echo "--- RDMA: hw_counters | stats file | /metrics"
for k in tx_wqes rx_wqes cqes rdma_write_bytes rdma_read_bytes tx_bytes rx_bytes send_msgs recv_msgs atomic_ops flushed_wqes rnr_naks; do
  g=$(gval hw.$k) s=$(sval "$SNAP" 'RDMA Counters' $k) m=$(mval "rocm_ernic_rdma_${k#rdma_}_total" 'device="ionic_0"')
  printf '    %-24s hw_counters %-10s stats file %-10s /metrics %s\n' "$k" "$g" "$s" "$m"
  same "RDMA $k: hw_counters = stats file = /metrics" "$g" "$s" "$m"
done
wb=$(gval hw.rdma_write_bytes)
same "total_bytes_rdma_write (Device Statistics) = hw_counters rdma_write_bytes" "$(sval "$SNAP" 'Device Statistics' total_bytes_rdma_write)" "$wb"
same "port_data_transmitted_bytes (/metrics) = hw_counters tx_bytes + rdma_write_bytes" \
  "$(mval rocm_ernic_port_data_transmitted_bytes_total)" "$(sum "$(gval hw.tx_bytes)" "$wb")"
same "RDMA_WRITE WQEs: stats file histogram = /metrics" "$(sval "$SNAP" 'RDMA WQEs by Opcode' RDMA_WRITE)" "$(mval rocm_ernic_rdma_wqes_total 'opcode="RDMA_WRITE"')"
atleast "RDMA_WRITE WQEs (ib_write_bw -n 500)" "$(sval "$SNAP" 'RDMA WQEs by Opcode' RDMA_WRITE)" 500
atleast "hw_counters tx_wqes" "$(gval hw.tx_wqes)" 500
atleast "hw_counters rdma_write_bytes (500 x 64 KiB)" "$wb" $WBW_BYTES

# ---- after the guest left --------------------------------------------------------------------------
echo "--- stats file after the guest exited: $(sval "$STATS" Instance connection), reset_count $(sval "$STATS" 'Device Statistics' reset_count), LIF tx packets $(slif "$STATS" tx packets), port frames_tx_ok $(sval "$STATS" 'Ethernet Port Statistics' frames_tx_ok)"
same "RDMA rdma_write_bytes in the stats file after the guest exited (survives reset/detach)" "$(sval "$STATS" 'RDMA Counters' rdma_write_bytes)" "$wb"
same "RDMA tx_wqes in the stats file after the guest exited" "$(sval "$STATS" 'RDMA Counters' tx_wqes)" "$(gval hw.tx_wqes)"

kill -0 $server 2>/dev/null && ok "server still running" || bad "server exited"
echo "server log: $LOG"
echo "ops-counters: $([ $fail = 0 ] && echo PASS || echo FAIL)"
exit $fail
