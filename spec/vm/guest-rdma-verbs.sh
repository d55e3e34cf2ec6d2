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
ibv_devinfo -v -d ionic_0 | grep -E "state:|active_mtu|link_layer|GID\[" | sed 's/^[[:space:]]*/ibv_devinfo: /'
check "GID for 10.81.0.2 (IPv4-mapped, RoCE v2)" "ibv_devinfo -v -d ionic_0 | grep -q '::ffff:10.81.0.2'"
pair() { # name server-cmd client-cmd
  local name=$1; shift
  timeout 120 $1 > /tmp/srv.$name 2>&1 & local s=$!
  # Start the client once the server listens (perftest says so; others get 2 s), not on a guess under TCG load.
  for _ in $(seq 100); do grep -q "Waiting for client\|rdma_server: start\|local address\|starting server" /tmp/srv.$name 2>/dev/null && break; sleep 0.2; done
  sleep 1
  timeout 120 $2 > /tmp/cli.$name 2>&1; local rc=$?
  wait $s; local rs=$?
  [ $rc = 0 ] && [ $rs = 0 ]
}
bad() { # a failure counts for our device; rdma_rxe is only the baseline
  if [ "$1" = ionic_0 ]; then echo "FAIL - $1 $2"; fail=1; else echo "note - $1 $2 failed (baseline only)"; fi
}
run() { # device host ip (the ip rdma_cm resolves to the device)
  local dev=$1 host=$2 ip=$3
  pair rc_$dev "ibv_rc_pingpong -d $dev -g ${GIDX:-0} -n 200" "ibv_rc_pingpong -d $dev -g ${GIDX:-0} -n 200 $host" && \
    echo "$dev ibv_rc_pingpong: $(grep iters /tmp/cli.rc_$dev)" || { bad $dev ibv_rc_pingpong; tail -3 /tmp/cli.rc_$dev; }
  pair ud_$dev "ibv_ud_pingpong -d $dev -g ${GIDX:-0} -n 200" "ibv_ud_pingpong -d $dev -g ${GIDX:-0} -n 200 $host" && \
    echo "$dev ibv_ud_pingpong: $(grep iters /tmp/cli.ud_$dev)" || { bad $dev ibv_ud_pingpong; tail -3 /tmp/cli.ud_$dev; }
  for t in ib_write_bw ib_read_bw ib_send_bw; do
    pair ${t}_$dev "$t -d $dev -s 65536 -n 1000" "$t -d $dev -s 65536 -n 1000 $host" && \
      echo "$dev $t 64KiB: $(grep -E '^ *65536' /tmp/cli.${t}_$dev | awk '{print "BW average " $4 " MiB/s, peak " $3}')" || { bad $dev $t; tail -3 /tmp/cli.${t}_$dev; }
  done
  for t in ib_write_lat ib_read_lat ib_send_lat; do
    # perftest calibrates the CPU clock per run; under TCG that sometimes fails and every figure reads "inf"
    # (seen on rdma_rxe and ionic alike): one more run then.
    { pair ${t}_$dev "$t -d $dev -s 8 -n 500" "$t -d $dev -s 8 -n 500 $host" && ! grep -qE '^ *8 .*inf' /tmp/cli.${t}_$dev; } || \
    pair ${t}_$dev "$t -d $dev -s 8 -n 500" "$t -d $dev -s 8 -n 500 $host" && \
      echo "$dev $t 8B: $(grep -E '^ *8 ' /tmp/cli.${t}_$dev | awk '{print "t_min " $3 " us, t_typical " $5 " us, t_avg " $6 " us, 99% " $8 " us"}')" || { bad $dev $t; tail -3 /tmp/cli.${t}_$dev; }
  done
  pair atomic_$dev "ib_atomic_bw -d $dev -n 1000" "ib_atomic_bw -d $dev -n 1000 $host" && \
    echo "$dev ib_atomic_bw 8B: $(grep -E '^ *8 ' /tmp/cli.atomic_$dev | awk '{print "BW average " $4 " MiB/s, " $5 " Mpps"}')" || { bad $dev ib_atomic_bw; tail -3 /tmp/cli.atomic_$dev; }
  # perftest over rdma_cm (-R): connection set up by QP1 MADs routed inside the device.
  pair wbwR_$dev "ib_write_bw -d $dev -R -s 65536 -n 500" "ib_write_bw -d $dev -R -s 65536 -n 500 $ip" && \
    echo "$dev ib_write_bw -R 64KiB: $(grep -E '^ *65536' /tmp/cli.wbwR_$dev | awk '{print "BW average " $4 " MiB/s"}')" || { bad $dev "ib_write_bw -R"; tail -3 /tmp/cli.wbwR_$dev; }
  pair slatR_$dev "ib_send_lat -d $dev -R -s 8 -n 500" "ib_send_lat -d $dev -R -s 8 -n 500 $ip" && \
    echo "$dev ib_send_lat -R 8B: $(grep -E '^ *8 ' /tmp/cli.slatR_$dev | awk '{print "t_typical " $5 " us, t_avg " $6 " us"}')" || { bad $dev "ib_send_lat -R"; tail -3 /tmp/cli.slatR_$dev; }
  # librdmacm's own examples: RC with rdma_server/rdma_client, UD with udaddy.
  pair cm_$dev "rdma_server -s $ip" "rdma_client -s $ip" && echo "$dev rdma_server/rdma_client: $(tail -1 /tmp/cli.cm_$dev)" || { bad $dev rdma_client; tail -n 3 /tmp/cli.cm_$dev /tmp/srv.cm_$dev; }
  pair udaddy_$dev "udaddy -b $ip" "udaddy -s $ip" && echo "$dev udaddy: $(tail -1 /tmp/cli.udaddy_$dev)" || { bad $dev udaddy; tail -n 3 /tmp/cli.udaddy_$dev /tmp/srv.udaddy_$dev; }
  # UC and SRQ: rdma-core's ionic provider does not promise them; report what happens.
  if pair uc_$dev "ibv_uc_pingpong -d $dev -g ${GIDX:-0} -n 200" "ibv_uc_pingpong -d $dev -g ${GIDX:-0} -n 200 $host"; then
    echo "$dev ibv_uc_pingpong: $(grep iters /tmp/cli.uc_$dev)"
  else echo "note - $dev ibv_uc_pingpong did not complete: $(grep -v '^ *local\|^ *remote' /tmp/cli.uc_$dev /tmp/srv.uc_$dev | tail -2 | tr '\n' ' ')"; fi
  if pair srq_$dev "ibv_srq_pingpong -d $dev -g ${GIDX:-0} -n 200" "ibv_srq_pingpong -d $dev -g ${GIDX:-0} -n 200 $host"; then
    echo "$dev ibv_srq_pingpong: $(grep iters /tmp/cli.srq_$dev | head -1)"
  else echo "note - $dev ibv_srq_pingpong did not complete: $(grep -v '^ *local\|^ *remote' /tmp/cli.srq_$dev /tmp/srv.srq_$dev | tail -2 | tr '\n' ' ')"; fi
}
hw() { # the device's hw_counters that show a data path ran
  for f in /sys/class/infiniband/$1/hw_counters /sys/class/infiniband/$1/ports/1/hw_counters; do
    [ -d $f ] && (cd $f && grep -H . tx_wqes rx_wqes rdma_write_bytes rdma_read_bytes atomic_ops rnr_naks reg_mr_wqes 2>/dev/null | tr '\n' ' ')
  done; echo
}
echo "=== ionic_0 (rocm-ernic)"
run ionic_0 localhost 10.81.0.2
echo "ionic_0 hw_counters: $(hw ionic_0)"
echo "=== rping over rdma_cm on ionic_0"
rping -s -a 10.81.0.2 -C 5 > /tmp/rping.s 2>&1 & s=$!; sleep 2
timeout 60 rping -c -a 10.81.0.2 -C 5 -v > /tmp/rping.c 2>&1; rc=$?; wait $s
check "rping -c -v with data verified (5 pings)" "[ $rc = 0 ] && [ \$(grep -c 'ping data' /tmp/rping.c) = 5 ]"
vnic=$(netdev_of virtio_net)
if [ -n "${RXE:-}" ] && [ -n "$vnic" ]; then
  modprobe rdma_rxe
  ip link set $vnic up
  vip=$(ip -4 -o addr show dev $vnic | awk '{print $4}' | cut -d/ -f1)
  rdma link add rxe0 type rxe netdev $vnic && { echo "=== rxe0 (rdma_rxe on $vnic), same guest"; run rxe0 localhost "$vip"; }
fi
exit $fail
