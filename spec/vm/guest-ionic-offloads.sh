#!/bin/bash
# Runs inside the guest of spec/vm/ionic-offloads.sh. Host side: the ionic TAP
# has 10.78.0.1/24, fd78::1/64 and VLAN 100 with 10.78.100.1/24 (MTU 9000);
# the virtio-net TAP has 10.78.1.1/24. iperf3 servers: 5201 (ionic), 5202
# (virtio-net), 5203 (any address). Prints "RESULT <name> <Mbit/s>" lines.
set -u
fail=0
check() { if eval "$2"; then echo "ok   - $1"; else echo "FAIL - $1"; fail=1; fi; }
modprobe ionic; modprobe virtio_net; modprobe 8021q 2>/dev/null
ION= VIO=
for _ in $(seq 100); do
  for d in /sys/class/net/*; do
    case $(basename "$(readlink -f "$d/device/driver" 2>/dev/null)") in
      ionic) ION=${d##*/} ;;
      virtio_net) VIO=${d##*/} ;;
    esac
  done
  [ -n "$ION" ] && [ -n "$VIO" ] && break
  sleep 0.1
done
check "an ionic netdev ($ION) and a virtio-net netdev ($VIO)" "[ -n '$ION' ] && [ -n '$VIO' ]"
[ $fail = 0 ] || exit 1
ip addr add 10.78.0.2/24 dev $ION; ip -6 addr add fd78::2/64 dev $ION nodad; ip link set $ION up
ip addr add 10.78.1.2/24 dev $VIO; ip link set $VIO up
for _ in $(seq 100); do [ "$(cat /sys/class/net/$ION/carrier 2>/dev/null)$(cat /sys/class/net/$VIO/carrier 2>/dev/null)" = 11 ] && break; sleep 0.1; done
ping -c 1 -W 3 10.78.0.1 >/dev/null; ping -c 1 -W 3 10.78.1.1 >/dev/null

echo "=== ethtool -k $ION (offloads on)"
ethtool -k $ION | grep -E '^(scatter-gather|tx-checksumming|tcp-segmentation-offload|rx-checksumming|receive-hashing|rx-vlan-offload|tx-vlan-offload):|tx-tcp6-segmentation' | sed 's/^/ethtool -k: /'
for f in scatter-gather tx-checksumming tcp-segmentation-offload rx-checksumming tx-vlan-offload rx-vlan-offload; do
  check "ethtool -k: $f on" "ethtool -k $ION | grep -q '^$f: on'"
done
check "ethtool -k: tx-tcp6-segmentation on" "ethtool -k $ION | grep -q 'tx-tcp6-segmentation: on'"

# iperf3 NAME HOST PORT [ARGS]: one run; prints RESULT NAME <receiver Mbit/s>, fails the test when it moves nothing.
run() {
  local name=$1 host=$2 port=$3 secs=$4; shift 4
  local out mbps
  out=$(timeout $((secs + 60)) iperf3 -c "$host" -p "$port" -t "$secs" -f m --connect-timeout 10000 "$@" 2>&1)
  mbps=$(echo "$out" | awk '/receiver$/ { for (i = 1; i <= NF; i++) if ($i == "Mbits/sec") v = $(i - 1) } END { print v }')
  echo "$out" | grep -E 'sender$|receiver$' | sed "s/^/iperf3 $name: /"
  echo "RESULT $name ${mbps:-0}"
  check "iperf3 $name moved data" "awk -v v='${mbps:-0}' 'BEGIN { exit !(v > 0) }'"
}
run ionic-tx 10.78.0.1 5201 "$SECS"
run ionic-rx 10.78.0.1 5201 "$SECS" -R
run virtio-tx 10.78.1.1 5202 "$SECS"
run virtio-rx 10.78.1.1 5202 "$SECS" -R

echo "=== correctness with the offloads on: IPv6, VLAN 100, MTU 9000"
run ionic-v6-tx fd78::1 5203 3
run ionic-v6-rx fd78::1 5203 3 -R
if [ "${HOST_VLAN:-0}" = 1 ]; then
  ip link add link $ION name $ION.100 type vlan id 100 && ip addr add 10.78.100.2/24 dev $ION.100 && ip link set $ION.100 up
  ping -c 1 -W 3 10.78.100.1 >/dev/null
  run ionic-vlan-tx 10.78.100.1 5203 3
  run ionic-vlan-rx 10.78.100.1 5203 3 -R
else
  echo "skip - VLAN 100: the host kernel cannot end a VLAN"
fi
ip link set $ION mtu 9000
for _ in $(seq 50); do [ "$(cat /sys/class/net/$ION/carrier)" = 1 ] && break; sleep 0.1; done
ping -c 1 -W 3 10.78.0.1 >/dev/null
check "a 8972-byte ping at MTU 9000 (no fragments)" "ping -c 2 -W 3 -M do -s 8972 10.78.0.1 >/dev/null"
run ionic-jumbo-tx 10.78.0.1 5201 3
run ionic-jumbo-rx 10.78.0.1 5201 3 -R
ip link set $ION mtu 1500

echo "=== ethtool -K $ION: offloads off"
ethtool -K $ION tso off gso off sg off tx off rx off rxvlan off txvlan off 2>&1 | sed 's/^/ethtool -K: /'
ethtool -k $ION | grep -E '^(scatter-gather|tx-checksumming|tcp-segmentation-offload|rx-checksumming):' | sed 's/^/ethtool -k: /'
check "ethtool -k: tcp-segmentation-offload off" "ethtool -k $ION | grep -q '^tcp-segmentation-offload: off'"
check "ethtool -k: rx-checksumming off" "ethtool -k $ION | grep -q '^rx-checksumming: off'"
for _ in $(seq 50); do [ "$(cat /sys/class/net/$ION/carrier)" = 1 ] && break; sleep 0.1; done
ping -c 1 -W 3 10.78.0.1 >/dev/null
run ionic-tx-off 10.78.0.1 5201 "$SECS"
run ionic-rx-off 10.78.0.1 5201 "$SECS" -R
ethtool -S $ION | grep -E '(tso|csum|vlan).*: [1-9]' | head -12 | sed 's/^/ethtool -S: /'
exit $fail
