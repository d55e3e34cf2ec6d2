#!/bin/bash
# Runs inside the guest (spec/vm/s3-record.sh): a short curl session with the
# S3 store over the ionic netdev (ARP, ping, PUT 20000 bytes, GET, ranged GET,
# a 404), recorded frame by frame by guest-s3-sniff.py into $RIG_OUT.
set -u
S=192.168.200.1 U=http://192.168.200.1:9000/ernic
modprobe ionic || { echo "FAIL - modprobe ionic"; exit 1; }
netdev_of() { for d in /sys/class/net/*; do [ "$(basename "$(readlink -f $d/device/driver 2>/dev/null)")" = "$1" ] && basename $d; done; }
for _ in $(seq 50); do nic=$(netdev_of ionic); [ -n "$nic" ] && break; sleep 0.1; done
ip addr add 192.168.200.2/24 dev $nic; ip link set $nic up
# The frames on the wire, not the stack's: no checksum offload, no segmentation or receive offloads.
ethtool -K $nic tx off rx off tso off gso off gro off > /dev/null 2>&1
ethtool -k $nic | grep -E '^(tx-checksumming|tcp-segmentation-offload|generic-receive-offload):' | sed 's/^/  /'
sleep 1
mkdir -p "$RIG_OUT"
python3 /job/guest-s3-sniff.py $nic "$RIG_OUT/s3-session.pcap" /tmp/stop &
for _ in $(seq 50); do [ -e "$RIG_OUT/s3-session.pcap.ready" ] && break; sleep 0.1; done
fail=0
ping -c 1 -W 3 $S > /dev/null && echo "ok   - ping" || { echo "FAIL - ping"; fail=1; }
head -c 20000 /dev/urandom > /tmp/obj
[ "$(curl -s -o /dev/null -w '%{http_code}' -T /tmp/obj $U/rec/obj)" = 200 ] && echo "ok   - PUT" || { echo "FAIL - PUT"; fail=1; }
curl -s -o /tmp/back $U/rec/obj && cmp -s /tmp/obj /tmp/back && echo "ok   - GET" || { echo "FAIL - GET"; fail=1; }
[ "$(curl -s -o /dev/null -w '%{http_code}' -r 100-5099 $U/rec/obj)" = 206 ] && echo "ok   - ranged GET" || { echo "FAIL - ranged GET"; fail=1; }
[ "$(curl -s -o /dev/null -w '%{http_code}' $U/rec/none)" = 404 ] && echo "ok   - 404" || { echo "FAIL - 404"; fail=1; }
sleep 1
touch /tmp/stop; wait
rm -f "$RIG_OUT/s3-session.pcap.ready"
echo "recorded $(stat -c %s "$RIG_OUT/s3-session.pcap") bytes"
exit $fail
