#!/bin/bash
# Runs inside the guest (two boots: the script reboots the guest once).
# Host side: TAP with 10.77.0.1/24; the guest takes 10.77.0.2/24.
set -u
fail=0
check() { if eval "$2"; then echo "ok   - $1"; else echo "FAIL - $1"; fail=1; fi; }
up() {
  modprobe ionic || return 1
  for _ in $(seq 50); do [ -e /sys/class/net/eth0 ] && break; sleep 0.1; done
  ip addr add 10.77.0.2/24 dev eth0 2>/dev/null
  ip link set eth0 up
  for _ in $(seq 50); do [ "$(cat /sys/class/net/eth0/carrier 2>/dev/null)" = 1 ] && break; sleep 0.1; done
}
if [ -e /var/tmp/ernic-booted-once ]; then
  echo "=== after guest reboot"
  up
  check "netdev back with carrier after reboot" "[ \"\$(cat /sys/class/net/eth0/carrier)\" = 1 ]"
  check "ping after reboot" "ping -c 3 -W 3 10.77.0.1 >/dev/null"
  exit $fail
fi
echo "=== first boot"
up
dmesg | grep -E 'ionic.*(FW|Link|PCIe)' | sed 's/^/dmesg: /'
check "netdev with carrier" "[ \"\$(cat /sys/class/net/eth0/carrier)\" = 1 ]"
check "MSI-X table of $EXPECT_VECTORS vectors" "lspci -vv -d 1dd8:1002 | grep -q 'MSI-X: Enable+ Count=$EXPECT_VECTORS'"
ethtool eth0 | grep -E 'Speed|Port:|Link detected' | sed 's/^/ethtool: /'
check "ethtool reports the profile's speed ($EXPECT_SPEED)" "ethtool eth0 | grep -q 'Speed: $EXPECT_SPEED'"
ping -c 5 -W 3 10.77.0.1 | tail -2 | sed 's/^/ping: /'
check "guest pings the host" "ping -c 2 -W 3 10.77.0.1 >/dev/null"
rx0=$(cat /sys/class/net/eth0/statistics/rx_packets)
if [ -n "${IPERF:-}" ]; then
  iperf3 -c 10.77.0.1 -t 5 -f m --connect-timeout 5000 2>&1 | grep -E 'sender|receiver' | sed 's/^/iperf3: /'
fi
ip -s link show eth0 | sed 's/^/ip -s: /'
ethtool -S eth0 | grep -E '^ +(frames_rx_ok|frames_tx_ok|octets_rx_ok|octets_tx_ok):' | sed 's/^/ethtool -S:/'
check "ip -s link counters moved" "[ \$(cat /sys/class/net/eth0/statistics/rx_packets) -gt 0 ] && [ \$(cat /sys/class/net/eth0/statistics/tx_packets) -gt 0 ]"
check "ethtool -S port counters moved" "[ \$(ethtool -S eth0 | awk '/frames_tx_ok:/ {print \$2}') -gt 0 ]"
echo "waiting for the host to ping us"; sleep 8
echo "=== rmmod ionic; modprobe ionic"
rmmod ionic
up
check "netdev back with carrier after rmmod/modprobe" "[ \"\$(cat /sys/class/net/eth0/carrier)\" = 1 ]"
check "ping after rmmod/modprobe" "ping -c 3 -W 3 10.77.0.1 >/dev/null"
echo first > /var/tmp/ernic-booted-once; sync
[ $fail = 0 ] || exit $fail
echo "=== rebooting the guest"
reboot -f
