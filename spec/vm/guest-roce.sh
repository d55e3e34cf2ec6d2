#!/bin/bash
# Runs inside one of two guests on one host bridge (spec/vm/roce-rxe.sh).
# Guest A (ROLE=client) has the ionic NIC of a rocm-ernic server (--backend
# roce, its TAP on the bridge) and a virtio-net NIC; guest B (ROLE=server) has
# a virtio-net NIC with stock rdma_rxe on it (or, PEER=ionic, an ionic NIC of a
# second server). Both run the same steps in the same order, one phase per
# entry of PLAN; a client retries until its server listens.
# Env: ROLE; ADDRS ("driver=ip/len ...": addresses per NIC, by driver name);
# RXE_ON (a driver whose netdev gets rxe0, or empty); PLAN ("device:my-ip:peer-ip[:role] ...").
set -u
fail=0
check() { if eval "$2"; then echo "ok   - $1"; else echo "FAIL - $1"; fail=1; fi; }
modprobe -a ib_uverbs rdma_ucm virtio_net
modprobe -a ionic ionic_rdma 2>/dev/null  # harmless without an ionic device
# Guest A has two NICs on the same bridge. Linux answers ARP for any of its
# addresses on every interface by default, so B could learn 10.83.0.1 at A's
# virtio MAC, and its RoCE frames for ionic_0 would go to the wrong NIC until
# its ARP entry is refreshed (tens of seconds): each NIC answers for its own.
sysctl -qw net.ipv4.conf.all.arp_ignore=1 net.ipv4.conf.all.arp_announce=2
netdev_of() { for d in /sys/class/net/*; do [ "$(basename "$(readlink -f $d/device/driver 2>/dev/null)")" = "$1" ] && basename $d; done; }
for a in $ADDRS; do
  drv=${a%%=*} addr=${a#*=}
  for _ in $(seq 50); do nic=$(netdev_of $drv | head -1); [ -n "$nic" ] && break; sleep 0.1; done
  [ -n "$nic" ] || { echo "FAIL - $ROLE: no $drv netdev"; exit 1; }
  ip addr add $addr dev $nic && ip link set $nic up
  echo "$ROLE: $drv netdev $nic $addr $(cat /sys/class/net/$nic/address)"
done
# A lossy wire (roce-rxe.sh NETEM=...; LOSSY=1 on both sides): netem on this guest's NIC, both ways.
if [ -n "${NETEM:-}" ]; then
  for a in $ADDRS; do nic=$(netdev_of ${a%%=*} | head -1); done
  modprobe -a sch_netem sch_ingress cls_matchall act_gact 2>/dev/null
  check "$ROLE: netem $NETEM on $nic's egress" "tc qdisc add dev $nic root netem $NETEM"
  check "$ROLE: one in ${NETEM_DROP:-100} packets dropped at random on $nic's ingress" \
    "tc qdisc add dev $nic handle ffff: ingress && tc filter add dev $nic parent ffff: matchall action gact pass random netrand drop ${NETEM_DROP:-100}"
fi
if [ -n "${RXE_ON:-}" ]; then
  modprobe rdma_rxe
  check "$ROLE: rxe0 on the $RXE_ON netdev" "rdma link add rxe0 type rxe netdev $(netdev_of $RXE_ON | head -1)"
  sleep 1
fi

# The GID index of ::ffff:IP on a device, RoCE v2 when the device lists both versions.
gid_of() { # device ip
  local lines
  lines=$(ibv_devinfo -v -d $1 | grep "::ffff:$2\b")
  { echo "$lines" | grep -i 'v2' || echo "$lines"; } | head -1 | sed 's/.*GID\[ *\([0-9]*\)\].*/\1/'
}

# Both sides retry (up to ~200 s): the client until its server listens, the
# server when its tool gave up; a step that needed more than one attempt on
# the server (or failed) says so with the first failure's lines.
step() { # name command...
  local name=$1; shift
  local rc=1 n=0 t0=$SECONDS
  : > /tmp/all.$name
  while [ $n -lt 45 ] && [ $((SECONDS - t0)) -lt 200 ]; do
    n=$((n + 1))
    timeout 240 "$@" > /tmp/out.$name 2>&1; rc=$?
    { echo "--- attempt $n: rc $rc"; cat /tmp/out.$name; } >> /tmp/all.$name
    [ $rc = 0 ] && break
    if [ "$ROLE" = client ]; then
      grep -qiE "couldn't connect|unable to connect|connection refused|failed to connect|Unable to open|rdma_connect|REJ|Unexpected CM event|Unable to init the socket connection|Couldn't read|timed out" /tmp/out.$name || break
      sleep 2
    else
      sleep 1
    fi
  done
  echo $rc > /tmp/rc.$name
  if [ $n -gt 1 ] && { [ "$ROLE" = server ] || [ $rc != 0 ]; }; then
    echo "note - $ROLE $name: $n attempts, the last rc $rc; the first failure:"
    awk '/^--- attempt 1:/{p=1;next} /^--- attempt 2:/{p=0} p' /tmp/all.$name | tail -3 | sed 's/^/    /'
  fi
}
report() { # name label awk-extract
  if [ "$(cat /tmp/rc.$1)" = 0 ]; then echo "$PHASE $2: $(eval "$3")"
  else echo "FAIL - $ROLE $PHASE $2"; tail -6 /tmp/out.$1 | sed 's/^/    /'; fail=1; fi
}
suite() { # device gid-index my-ip peer-ip
  local d=$1 g=$2 me=$3 peer_ip=$4 p=
  [ "$ROLE" = client ] && p=$peer_ip
  step rc_$PHASE ibv_rc_pingpong -d $d -g $g -n 500 -s 4096 -c $p
  report rc_$PHASE "ibv_rc_pingpong -c (4 KiB, data checked)" "grep iters /tmp/out.rc_$PHASE"
  # UD is unreliable by design: over a lossy wire a lost datagram stalls the ping-pong.
  if [ -z "${LOSSY:-}" ]; then
    step ud_$PHASE ibv_ud_pingpong -d $d -g $g -n 500 -s 1024 $p
    report ud_$PHASE "ibv_ud_pingpong (1 KiB)" "grep iters /tmp/out.ud_$PHASE"
  fi
  for t in ib_write_bw ib_read_bw ib_send_bw; do
    step ${t}_$PHASE $t -d $d -x $g -s 65536 -n 1000 $p
    report ${t}_$PHASE "$t 64KiB" "grep -E '^ *65536' /tmp/out.${t}_$PHASE | awk '{print \"BW average \" \$4 \" MiB/s, peak \" \$3}'"
  done
  step wlat_$PHASE ib_write_lat -d $d -x $g -s 8 -n 1000 $p
  report wlat_$PHASE "ib_write_lat 8B" "grep -E '^ *8 ' /tmp/out.wlat_$PHASE | awk '{print \"t_min \" \$3 \" us, t_typical \" \$5 \" us, 99% \" \$8 \" us\"}'"
  step atomic_$PHASE ib_atomic_bw -d $d -x $g -n 5000 $p
  report atomic_$PHASE "ib_atomic_bw" "grep -E '^ *8 ' /tmp/out.atomic_$PHASE | awk '{print \"BW average \" \$4 \" MiB/s, \" \$5 \" Mpps\"}'"
  step wbwR_$PHASE ib_write_bw -d $d -R -s 65536 -n 1000 $p
  report wbwR_$PHASE "ib_write_bw -R (rdma_cm) 64KiB" "grep -E '^ *65536' /tmp/out.wbwR_$PHASE | awk '{print \"BW average \" \$4 \" MiB/s\"}'"
  if [ "$ROLE" = server ]; then step rping_$PHASE rping -s -a $me -C 10 -v
  else step rping_$PHASE rping -c -a $peer_ip -C 10 -v; fi
  report rping_$PHASE "rping -v (10 pings)" "echo \$(grep -c 'ping data' /tmp/out.rping_$PHASE) pings with data"
}

BASE_ROLE=$ROLE
n=0
for entry in $PLAN; do
  n=$((n + 1))
  # An entry may swap the roles for its phase (":server" on A, ":client" on B): both directions.
  IFS=: read -r dev me peer_ip role <<< "$entry"
  ROLE=${role:-$BASE_ROLE}
  PHASE="p$n-$dev-$ROLE"
  for _ in $(seq 60); do ping -c 1 -W 1 $peer_ip >/dev/null 2>&1 && break; sleep 1; done
  # Over a lossy wire (LOSSY) one answer in three is enough.
  if [ -n "${LOSSY:-}" ]; then check "$ROLE $PHASE: the peer answers ping at $peer_ip" "ping -c 3 -W 2 $peer_ip | grep -qE ' [1-9][0-9]* received'"
  else check "$ROLE $PHASE: the peer answers ping at $peer_ip" "ping -c 3 -W 2 $peer_ip | grep -q ' 0% packet loss'"; fi
  check "$ROLE $PHASE: $dev port active" "ibv_devinfo -d $dev | grep -q PORT_ACTIVE"
  g=$(gid_of $dev $me)
  echo "=== $ROLE phase $n: $dev ($me, GID index ${g:-?}) <-> $peer_ip"
  suite $dev ${g:-1} $me $peer_ip
  if [ $dev = ionic_0 ]; then
    hw=/sys/class/infiniband/ionic_0/ports/1/hw_counters
    [ -d $hw ] || hw=/sys/class/infiniband/ionic_0/hw_counters
    echo "$ROLE ionic_0 hw_counters: $(cd $hw 2>/dev/null && grep -H . * 2>/dev/null | grep -v ':0$' | head -40 | tr '\n' ' ')"
  fi
done
if [ -n "${NETEM:-}" ]; then
  echo "$ROLE netem: $(tc -s qdisc show dev $nic | grep -m1 -oE 'dropped [0-9]+' ) at egress; ingress: $(tc -s filter show dev $nic parent ffff: | grep -m1 -oE 'Sent [0-9]+ bytes [0-9]+ pkt \(dropped [0-9]+' )"
fi
exit $fail
