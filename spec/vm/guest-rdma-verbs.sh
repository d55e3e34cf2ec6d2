#!/bin/bash
# Runs inside the guest (4 vCPUs): the stock ionic + ionic_rdma drivers and
# rdma-core's ionic provider on our device, then the same tools on rdma_rxe
# over the rig's virtio-net NIC for a side-by-side figure in the same guest.
set -u
fail=0
check() { if eval "$2"; then echo "ok   - $1"; else echo "FAIL - $1"; fail=1; fi; }
modprobe -a ionic ionic_rdma ib_uverbs rdma_ucm
# The netdevs by driver: ionic's is ours; with --net the rig adds a virtio one for rxe.
netdev_of() { for d in /sys/class/net/*; do [ "$(basename "$(readlink -f $d/device/driver 2>/dev/null)")" = "$1" ] && basename $d; done; }
for _ in $(seq 50); do nic=$(netdev_of ionic); [ -n "$nic" ] && break; sleep 0.1; done
echo "ionic netdev: $nic"
ip addr add 10.81.0.2/24 dev $nic; ip link set $nic up; sleep 2
ibv_devices | sed 's/^/ibv_devices: /'
check "ionic_0 listed" "ibv_devices | grep -q ionic_0"
check "port active" "ibv_devinfo -d ionic_0 | grep -q PORT_ACTIVE"
pair() { # name server-cmd client-cmd
  local name=$1; shift
  timeout 120 $1 > /tmp/srv.$name 2>&1 & local s=$!
  sleep 2
  timeout 120 $2 > /tmp/cli.$name 2>&1; local rc=$?
  wait $s; local rs=$?
  [ $rc = 0 ] && [ $rs = 0 ]
}
bad() { # a failure counts for our device; rdma_rxe is only the baseline
  if [ "$1" = ionic_0 ]; then echo "FAIL - $1 $2"; fail=1; else echo "note - $1 $2 failed (baseline only)"; fi
}
run() { # device host
  local dev=$1 host=$2
  pair rc_$dev "ibv_rc_pingpong -d $dev -g ${GIDX:-0} -n 200" "ibv_rc_pingpong -d $dev -g ${GIDX:-0} -n 200 $host" && \
    echo "$dev ibv_rc_pingpong: $(grep iters /tmp/cli.rc_$dev)" || { bad $dev ibv_rc_pingpong; tail -3 /tmp/cli.rc_$dev; }
  pair ud_$dev "ibv_ud_pingpong -d $dev -g ${GIDX:-0} -n 200" "ibv_ud_pingpong -d $dev -g ${GIDX:-0} -n 200 $host" && \
    echo "$dev ibv_ud_pingpong: $(grep iters /tmp/cli.ud_$dev)" || { bad $dev ibv_ud_pingpong; tail -3 /tmp/cli.ud_$dev; }
  for t in ib_write_bw ib_read_bw ib_send_bw; do
    pair ${t}_$dev "$t -d $dev -s 65536 -n 1000" "$t -d $dev -s 65536 -n 1000 $host" && \
      echo "$dev $t 64KiB: $(grep -E '^ *65536' /tmp/cli.${t}_$dev | awk '{print "BW average " $4 " MiB/s, peak " $3}')" || { bad $dev $t; tail -3 /tmp/cli.${t}_$dev; }
  done
  for t in ib_write_lat ib_read_lat ib_send_lat; do
    pair ${t}_$dev "$t -d $dev -s 8 -n 500" "$t -d $dev -s 8 -n 500 $host" && \
      echo "$dev $t 8B: $(grep -E '^ *8 ' /tmp/cli.${t}_$dev | awk '{print "t_typical " $5 " us, t_avg " $6 " us"}')" || { bad $dev $t; tail -3 /tmp/cli.${t}_$dev; }
  done
  pair atomic_$dev "ib_atomic_bw -d $dev -n 500" "ib_atomic_bw -d $dev -n 500 $host" && echo "$dev ib_atomic_bw: ok" || bad $dev ib_atomic_bw
}
echo "=== ionic_0 (rocm-ernic)"
run ionic_0 localhost
echo "=== rping over rdma_cm on ionic_0"
rping -s -a 10.81.0.2 -C 5 > /tmp/rping.s 2>&1 & s=$!; sleep 2
timeout 60 rping -c -a 10.81.0.2 -C 5 -v > /tmp/rping.c 2>&1; rc=$?; wait $s
check "rping -c -v with data verified (5 pings)" "[ $rc = 0 ] && [ \$(grep -c 'ping data' /tmp/rping.c) = 5 ]"
vnic=$(netdev_of virtio_net)
if [ -n "${RXE:-}" ] && [ -n "$vnic" ]; then
  modprobe rdma_rxe
  ip link set $vnic up
  rdma link add rxe0 type rxe netdev $vnic && { echo "=== rxe0 (rdma_rxe on $vnic), same guest"; run rxe0 localhost; }
fi
exit $fail
