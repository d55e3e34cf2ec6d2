#!/bin/bash
# VM test of the ionic Ethernet function with the stock driver: a host TAP,
# modprobe ionic, carrier, ethtool speed, ping both ways, counters, iperf3,
# rmmod/modprobe, a guest reboot; then a second profile with another vector
# count. Needs root, the rig's images and iperf3 on the host.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
RIG=${E2E_RIG:-$HERE/rig}   # E2E_RIG=DIR: the same tests on another rig with the same run-guest.sh
TAP=ernvm$$
SOCK=/tmp/ernic-vm-eth-$$.sock
fail=0
for tool in iperf3:iperf3 ping:iputils-ping; do
  command -v ${tool%%:*} >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q ${tool#*:} >/dev/null 2>&1
done
if ip -4 addr | grep -q 'inet 10\.77\.0\.1/'; then echo "10.77.0.1 is already on a host interface; remove it first"; exit 1; fi

ip tuntap add dev $TAP mode tap || exit 1
ip addr add 10.77.0.1/24 dev $TAP
ip link set $TAP up
server=
cleanup() { [ -n "$server" ] && kill $server 2>/dev/null; wait 2>/dev/null; ip link del $TAP 2>/dev/null; rm -f "$SOCK"; }
trap cleanup EXIT

run_profile() { # profile expected-speed expected-vectors
  local profile=$1 speed=$2 vectors=$3 log=/tmp/ernic-vm-eth-$$-$1.log
  echo "##### profile $profile"
  node "$ROOT/dist/bin/rocm-ernic.js" -s "$SOCK" --tap $TAP --nic-profile "$profile" -L info >"$log" 2>&1 &
  server=$!
  for _ in $(seq 50); do [ -S "$SOCK" ] && break; sleep 0.1; done
  iperf3 -s -1 -B 10.77.0.1 >/tmp/ernic-iperf-$$.log 2>&1 &
  local iperf=$!
  # Host to guest: keep trying until the guest is up (TCG boots slowly).
  ( for _ in $(seq 240); do ping -c 1 -W 1 10.77.0.2 >/dev/null 2>&1 && break; sleep 0.5; done
    ping -c 3 -W 2 10.77.0.2 >/tmp/ernic-hostping-$$.log 2>&1 ) &
  local hping=$!
  "$RIG/run-guest.sh" --socket "$SOCK" --smp 2 --timeout 400 \
    --extra-qemu-args "-action reboot=reset" \
    --script <(printf '#!/bin/bash\nexport EXPECT_SPEED=%s EXPECT_VECTORS=%s IPERF=1\n' "$speed" "$vectors"; cat "$HERE/guest-ionic-eth.sh") || fail=1
  wait $hping && echo "ok   - host pings the guest: $(grep -E 'packets transmitted' /tmp/ernic-hostping-$$.log)" || { echo "FAIL - host ping"; cat /tmp/ernic-hostping-$$.log; fail=1; }
  kill $iperf 2>/dev/null
  kill -0 $server 2>/dev/null && echo "ok   - server still running" || { echo "FAIL - server exited"; fail=1; }
  kill $server; wait $server 2>/dev/null; server=
  echo "server log: $(grep -c 'client negotiated' "$log") session(s); warnings: $(grep -c ' warn: ' "$log")"
}

run_profile compat 100000Mb/s 32
run_profile dsc-25 25000Mb/s 48
run_profile low-vectors 100000Mb/s 8
echo "ionic-eth: $([ $fail = 0 ] && echo PASS || echo FAIL)"
exit $fail
