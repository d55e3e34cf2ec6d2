#!/bin/bash
# VM test of RDMA between two VMs: two rocm-ernic servers joined by the TCP
# mesh (manager and worker, no ERNIC_TCP_GUEST_GIDS: each learns its guest's
# GIDs from its frames), each serving one guest; the servers' TAPs are joined
# by a host bridge so the guests reach each other over the ionic netdevs.
# The guests run ibv_rc_pingpong -c, perftest (bw, lat, atomics, rdma_cm) and
# rping -v against each other on ionic_0, then the same on rxe0 bound to the
# same ionic netdev. Needs root and the rig's images; figures are TCG figures.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
RIG=${E2E_RIG:-$HERE/rig}   # E2E_RIG=DIR: the same tests on another rig with the same run-guest.sh
ID=$$
BR=ernbr$((ID % 10000)); TA=ernta$((ID % 10000)); TB=erntb$((ID % 10000))
SA=/tmp/ernic-mesh-a-$ID.sock; SB=/tmp/ernic-mesh-b-$ID.sock
LA=/tmp/ernic-mesh-a-$ID.log; LB=/tmp/ernic-mesh-b-$ID.log
PORT=$((20000 + ID % 20000))
# The mesh link runs over TLS with a pre-shared key (MESH_TLS=0: plaintext on loopback).
KEY=/tmp/ernic-mesh-key-$ID
TLS=()
if [ "${MESH_TLS:-1}" = 1 ]; then (umask 077; head -c 32 /dev/urandom > $KEY); TLS=(--mesh-psk $KEY); fi
pids=()
cleanup() { for p in "${pids[@]}"; do kill $p 2>/dev/null; done; wait 2>/dev/null; ip link del $TA 2>/dev/null; ip link del $TB 2>/dev/null; ip link del $BR 2>/dev/null; rm -f $SA $SB $KEY; }
trap cleanup EXIT
ip link add $BR type bridge || exit 1
for t in $TA $TB; do ip tuntap add dev $t mode tap && ip link set $t master $BR && ip link set $t up || exit 1; done
ip link set $BR up
node "$ROOT/dist/bin/rocm-ernic.js" -s $SA --tap $TA -m 02:65:72:00:00:0a -b tcp:manager:listen:$PORT "${TLS[@]}" -L info >$LA 2>&1 & pids+=($!)
for _ in $(seq 50); do [ -S $SA ] && break; sleep 0.1; done
node "$ROOT/dist/bin/rocm-ernic.js" -s $SB --tap $TB -m 02:65:72:00:00:0b -b tcp:worker:127.0.0.1:$PORT "${TLS[@]}" -L info >$LB 2>&1 & pids+=($!)
for _ in $(seq 50); do [ -S $SB ] && break; sleep 0.1; done
guest() { # socket role my-ip peer-ip out
  "$RIG/run-guest.sh" --socket $1 --smp 4 --timeout 2400 \
    --script <(printf '#!/bin/bash\nexport ROLE=%s MY_IP=%s PEER_IP=%s\n' $2 $3 $4; cat "$HERE/guest-mesh.sh") > $5 2>&1
}
guest $SB server 10.82.0.2 10.82.0.1 /tmp/ernic-mesh-b-$ID.out & gb=$!
guest $SA client 10.82.0.1 10.82.0.2 /tmp/ernic-mesh-a-$ID.out & ga=$!
wait $ga; ra=$?; wait $gb; rb=$?
echo "##### guest A (client, manager's VM)"; cat /tmp/ernic-mesh-a-$ID.out
echo "##### guest B (server, worker's VM)"; cat /tmp/ernic-mesh-b-$ID.out
fail=0
[ $ra = 0 ] && [ $rb = 0 ] || fail=1
for p in "${pids[@]}"; do kill -0 $p 2>/dev/null || { echo "FAIL - a server exited"; fail=1; }; done
echo "mesh${TLS:+ (TLS, pre-shared key)}: $(grep -h 'registered\|mesh node\|TLS' $LA $LB | head -4 | tr '\n' ' ')"
echo "GIDs: A: $(grep -ho "GID.*" $LA | tr '\n' ';')"
echo "GIDs: B: $(grep -ho "GID.*" $LB | tr '\n' ';')"
echo "server warnings: A $(grep -c ' warn: ' $LA), B $(grep -c ' warn: ' $LB) (logs: $LA $LB)"
[ $fail = 0 ] && echo "ok   - two guests over the mesh" || echo "FAIL - two guests over the mesh"
exit $fail
