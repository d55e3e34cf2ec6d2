#!/bin/bash
# Runs inside the guest (4 vCPUs) for spec/vm/ops-counters.sh: traffic on our
# device, then the guest's own view of its counters for the host to compare
# with the server's stats file and /metrics.
#   1. ionic + ionic_rdma, GUEST_IP/24 on the ionic netdev (IPv6 off on it, so
#      no DAD, router solicitation or MLD frames trickle out later), ping the
#      host PINGS times;
#   2. RDMA loopback on ionic_0: ib_write_bw 64 KiB x 500, server and client here;
#   3. wait until the counters stop moving (the device writes the LIF and port
#      blocks into guest memory about once a second), then print them:
#        guest-counter ethtool.NAME VALUE   ethtool -S (the driver's own tx/rx
#                                           packets and bytes, and the device's
#                                           port block: frames_/octets_*_ok ...)
#        guest-counter link.NAME VALUE      /sys/class/net/NIC/statistics (what
#                                           ip -s link shows: the device's LIF block)
#        guest-counter hw.NAME VALUE        /sys/class/infiniband/ionic_0/hw_counters
#                                           (or ports/1/hw_counters)
#      then "ops-counters TOKEN ready" and stay attached for HOLD seconds while
#      the host reads the stats file and scrapes /metrics; then print the same
#      counters again as guest-after (the host checks nothing moved meanwhile).
# Environment (the host puts it in front of this script): HOST_IP GUEST_IP PINGS TOKEN HOLD.
set -u
HOST_IP=${HOST_IP:-10.83.0.1} GUEST_IP=${GUEST_IP:-10.83.0.2} PINGS=${PINGS:-20} TOKEN=${TOKEN:-ops} HOLD=${HOLD:-10}
fail=0
check() { if eval "$2"; then echo "ok   - guest: $1"; else echo "FAIL - guest: $1"; fail=1; fi; }
modprobe -a ionic ionic_rdma ib_uverbs
netdev_of() { for d in /sys/class/net/*; do [ "$(basename "$(readlink -f "$d"/device/driver 2>/dev/null)")" = "$1" ] && basename "$d"; done; }
nic=
for _ in $(seq 50); do nic=$(netdev_of ionic); [ -n "$nic" ] && break; sleep 0.1; done
[ -n "$nic" ] || { echo "FAIL - guest: no ionic netdev"; exit 1; }
echo "ionic netdev: $nic"
sysctl -qw "net.ipv6.conf.$nic.disable_ipv6=1"
ip addr add "$GUEST_IP/24" dev "$nic"
ip link set "$nic" up
for _ in $(seq 100); do [ "$(cat /sys/class/net/$nic/carrier 2>/dev/null)" = 1 ] && break; sleep 0.1; done
check "$nic has carrier" "[ \"\$(cat /sys/class/net/$nic/carrier)\" = 1 ]"
for _ in $(seq 100); do ibv_devinfo -d ionic_0 2>/dev/null | grep -q PORT_ACTIVE && break; sleep 0.2; done
check "ionic_0 port active" "ibv_devinfo -d ionic_0 | grep -q PORT_ACTIVE"

# ---- Ethernet traffic: the guest pings the host over the TAP.
ping -c "$PINGS" -i 0.2 -W 3 "$HOST_IP" > /tmp/ping.out 2>&1
check "$PINGS pings to the host answered: $(grep 'packets transmitted' /tmp/ping.out)" "grep -q ' 0% packet loss' /tmp/ping.out"

# ---- RDMA traffic: RC RDMA WRITE between two QPs of ionic_0 (perftest's own
# handshake goes over TCP on lo, not over the ionic netdev).
timeout 300 ib_write_bw -d ionic_0 -s 65536 -n 500 > /tmp/srv.wbw 2>&1 & srv=$!
for _ in $(seq 100); do grep -q "Waiting for client" /tmp/srv.wbw 2>/dev/null && break; sleep 0.2; done
sleep 1
timeout 300 ib_write_bw -d ionic_0 -s 65536 -n 500 localhost > /tmp/cli.wbw 2>&1; rc=$?
wait $srv; rs=$?
check "ib_write_bw -s 65536 -n 500 on ionic_0: $(grep -E '^ *65536' /tmp/cli.wbw | awk '{print "iters " $2 ", BW average " $4 " MiB/s"}')" "[ $rc = 0 ] && [ $rs = 0 ]"
[ $rc = 0 ] && [ $rs = 0 ] || tail -n 5 /tmp/cli.wbw /tmp/srv.wbw

hwdir=
for d in /sys/class/infiniband/ionic_0/ports/1/hw_counters /sys/class/infiniband/ionic_0/hw_counters; do
  [ -d "$d" ] && { hwdir=$d; break; }
done
check "ionic_0 has hw_counters ($hwdir)" "[ -n \"$hwdir\" ]"

eth_counters() { # the netdev's counters, one "NAME VALUE" a line
  ethtool -S "$nic" | awk -F': *' '{ gsub(/^ +/, "", $1) } $1 ~ /^(tx|rx)_(packets|bytes)$|^hw_(tx|rx)_dropped$|^(frames|octets)_(tx|rx)_(ok|all|total|bad)$|^frames_(tx|rx)_(unicast|multicast|broadcast)$/ { print "ethtool." $1, $2 }'
  for f in tx_packets tx_bytes rx_packets rx_bytes tx_dropped rx_dropped multicast; do
    echo "link.$f $(cat /sys/class/net/$nic/statistics/$f)"
  done
}
hw_counters() {
  [ -n "$hwdir" ] || return 0
  for f in "$hwdir"/*; do [ -f "$f" ] && echo "hw.$(basename "$f") $(cat "$f")"; done
}

# ---- Quiet: wait until two readings 1.5 s apart agree (the device writes the
# LIF and port blocks into guest memory at most once a second after a change).
prev=
for _ in $(seq 20); do
  sleep 1.5
  cur=$(eth_counters)
  [ "$cur" = "$prev" ] && break
  prev=$cur
done
check "Ethernet counters settled" "[ \"\$cur\" = \"\$prev\" ]"

echo "--- ip -s link show $nic"
ip -s link show "$nic"
echo "--- ethtool -S $nic (global and port counters)"
ethtool -S "$nic" | grep -E '^ +(tx|rx)_(packets|bytes):|^ +(frames|octets)_(tx|rx)_ok:'
eth_counters | sed 's/^/guest-counter /'
hw_counters | sed 's/^/guest-counter /'
echo "ops-counters $TOKEN ready"
# The host reads the stats file and /metrics now, while this guest is
# attached (after it leaves, a device reset zeroes the Ethernet blocks).
sleep "$HOLD"
eth_counters | sed 's/^/guest-after /'
hw_counters | sed 's/^/guest-after /'
exit $fail
