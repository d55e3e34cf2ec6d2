#!/bin/bash
# Runs inside one of two guests (4 vCPUs), each on its own rocm-ernic server;
# the servers are joined by the TCP mesh and their TAPs by a host bridge.
# ROLE=server runs the server side of each tool, ROLE=client the client side,
# in the same order; a client retries until its server listens. Then the same
# tools on rxe0 bound to the same ionic netdev (SoftRoCE over our Ethernet).
# Env: ROLE, MY_IP, PEER_IP.
set -u
fail=0
check() { if eval "$2"; then echo "ok   - $1"; else echo "FAIL - $1"; fail=1; fi; }
modprobe -a ionic ionic_rdma ib_uverbs rdma_ucm
netdev_of() { for d in /sys/class/net/*; do [ "$(basename "$(readlink -f $d/device/driver 2>/dev/null)")" = "$1" ] && basename $d; done; }
for _ in $(seq 50); do nic=$(netdev_of ionic); [ -n "$nic" ] && break; sleep 0.1; done
ip addr add $MY_IP/24 dev $nic; ip link set $nic up
for _ in $(seq 60); do ping -c 1 -W 1 $PEER_IP >/dev/null 2>&1 && break; sleep 1; done
check "$ROLE: the peer guest answers ping over the ionic netdevs and the host bridge" "ping -c 3 -W 2 $PEER_IP | grep -q ' 0% packet loss'"
check "$ROLE: ionic_0 port active" "ibv_devinfo -d ionic_0 | grep -q PORT_ACTIVE"
GID=$(ibv_devinfo -v -d ionic_0 | grep -n "::ffff:$MY_IP" | head -1 | sed 's/.*GID\[ *\([0-9]*\)\].*/\1/')
echo "$ROLE: ionic_0 GID index for ::ffff:$MY_IP is ${GID:-?}"

# Both sides retry (up to ~90 s of attempts): the client until its server
# listens, the server when its tool gave up (e.g. a client attempt that failed
# half way); every attempt's output is kept, and a server step that needed more
# than one attempt (or a step that failed) says so with the first failure's lines.
step() { # name device command... (the client appends PEER_IP itself where needed)
  local name=$1; shift
  local rc=1 n=0 t0=$SECONDS
  : > /tmp/all.$name
  while [ $n -lt 45 ] && [ $((SECONDS - t0)) -lt 200 ]; do
    n=$((n + 1))
    timeout 240 "$@" > /tmp/out.$name 2>&1; rc=$?
    { echo "--- attempt $n: rc $rc"; cat /tmp/out.$name; } >> /tmp/all.$name
    [ $rc = 0 ] && break
    if [ "$ROLE" = client ]; then
      # Not up yet: what each tool prints when its server does not listen yet
      # (perftest -R shows the CM's REJ as "Unexpected CM event ... 8").
      grep -qiE "couldn't connect|unable to connect|connection refused|failed to connect|Unable to open|rdma_connect|REJ|Unexpected CM event|Unable to init the socket connection|Couldn't read|timed out" /tmp/out.$name || break
      sleep 2
    else
      sleep 1
    fi
  done
  echo $rc > /tmp/rc.$name
  # A client's early attempts are expected to fail (its server is not up yet).
  if [ $n -gt 1 ] && { [ "$ROLE" = server ] || [ $rc != 0 ]; }; then
    echo "note - $ROLE $name: $n attempts, the last rc $rc; the first failure:"
    awk '/^--- attempt 1:/{p=1;next} /^--- attempt 2:/{p=0} p' /tmp/all.$name | tail -3 | sed 's/^/    /'
  fi
}
diagnosed=0
diagnose() { # once: what the guest's side of a failure looks like
  [ $diagnosed = 1 ] && return; diagnosed=1
  echo "  diag: $(ip -br addr | tr -s ' ' | tr '\n' ';')"
  echo "  diag: ionic_0 GIDs: $(ibv_devinfo -v -d ionic_0 | grep -o 'GID\[ *[0-9]*\]:[^,]*' | tr -s ' ' | tr '\n' ';')"
  echo "  diag: cm_ids: $(rdma res show cm_id 2>&1 | head -5 | tr -s ' ' | tr '\n' ';')"
  dmesg | tail -5 | sed 's/^/  diag: /'
}
report() { # name device label awk-extract
  local name=$1 dev=$2 label=$3
  if [ "$(cat /tmp/rc.$name)" = 0 ]; then echo "$dev $label: $(eval "$4")"
  elif [ "$dev" = ionic_0 ]; then echo "FAIL - $ROLE $dev $label"; tail -3 /tmp/out.$name; fail=1; diagnose
  else echo "note - $dev $label failed (baseline only)"; tail -2 /tmp/out.$name; fi
}
peer() { [ "$ROLE" = client ] && echo $PEER_IP; }
suite() { # device gid-index
  local d=$1 g=$2
  step rc_$d ibv_rc_pingpong -d $d -g $g -n 500 -s 4096 -c $(peer)
  report rc_$d $d "ibv_rc_pingpong -c (4 KiB, data checked)" "grep iters /tmp/out.rc_$d"
  for t in ib_write_bw ib_read_bw ib_send_bw; do
    step ${t}_$d $t -d $d -x $g -s 65536 -n 1000 $(peer)
    report ${t}_$d $d "$t 64KiB" "grep -E '^ *65536' /tmp/out.${t}_$d | awk '{print \"BW average \" \$4 \" MiB/s, peak \" \$3}'"
  done
  step wlat_$d ib_write_lat -d $d -x $g -s 8 -n 1000 $(peer)
  report wlat_$d $d "ib_write_lat 8B" "grep -E '^ *8 ' /tmp/out.wlat_$d | awk '{print \"t_min \" \$3 \" us, t_typical \" \$5 \" us, 99% \" \$8 \" us\"}'"
  step atomic_$d ib_atomic_bw -d $d -x $g -n 5000 $(peer)  # 1000 ops last ~0.1 s under TCG: mostly start-up
  report atomic_$d $d "ib_atomic_bw" "grep -E '^ *8 ' /tmp/out.atomic_$d | awk '{print \"BW average \" \$4 \" MiB/s, \" \$5 \" Mpps\"}'"
  step wbwR_$d ib_write_bw -d $d -R -s 65536 -n 1000 $(peer)
  report wbwR_$d $d "ib_write_bw -R (rdma_cm) 64KiB" "grep -E '^ *65536' /tmp/out.wbwR_$d | awk '{print \"BW average \" \$4 \" MiB/s\"}'"
  if [ "$ROLE" = server ]; then step rping_$d rping -s -a $MY_IP -C 10 -v
  else step rping_$d rping -c -a $PEER_IP -C 10 -v; fi
  report rping_$d $d "rping -v (10 pings)" "echo \$(grep -c 'ping data' /tmp/out.rping_$d) pings with data"
}
echo "=== ionic_0 (rocm-ernic, the mesh between the servers)"
suite ionic_0 ${GID:-1}
hw=/sys/class/infiniband/ionic_0/ports/1/hw_counters
[ -d $hw ] || hw=/sys/class/infiniband/ionic_0/hw_counters
echo "$ROLE ionic_0 hw_counters: $(cd $hw 2>/dev/null && grep -H . tx_wqes rx_wqes rdma_write_bytes rdma_read_bytes atomic_ops 2>/dev/null | tr '\n' ' ')"
# ionic_rdma goes before rxe0 comes: with both on one netdev and one IP,
# rdma_cm (ib_write_bw -R, rping) would resolve to ionic_0, not rxe0.
rmmod ionic_rdma || echo "note - ionic_rdma could not be removed: rdma_cm figures of rxe0 may be ionic_0's"
modprobe rdma_rxe
if rdma link add rxe0 type rxe netdev $nic; then
  sleep 1
  RG=$(ibv_devinfo -v -d rxe0 | grep -n "::ffff:$MY_IP" | head -1 | sed 's/.*GID\[ *\([0-9]*\)\].*/\1/')
  echo "=== rxe0 (rdma_rxe on the same ionic netdev $nic)"
  suite rxe0 ${RG:-1}
fi
exit $fail
