#!/bin/bash
# VM test of RoCEv2 on the wire: two guests on one host bridge, no mesh.
# Guest A: the ionic NIC of a rocm-ernic server started with --backend roce
# (its TAP on the bridge) plus a virtio-net NIC; guest B: a virtio-net NIC with
# stock rdma_rxe (rxe0) on it. Phase 1: ionic_0 (A, 10.83.0.1) <-> rxe0 (B,
# 10.83.0.2), B serving and A connecting; phase 2 the same with A serving;
# phase 3, the baseline between the same two VMs: rxe0 on A's virtio-net
# (10.83.1.1) <-> rxe0 (B, 10.83.1.2). Each phase runs ibv_rc_pingpong -c,
# ibv_ud_pingpong, ib_{write,read,send}_bw, ib_write_lat, ib_atomic_bw,
# ib_write_bw -R and rping -v.
# PEER=ionic: guest B is a second rocm-ernic server's ionic_0 instead
# (ionic_0 <-> ionic_0 over RoCE, one phase). NETEM="delay 1ms loss 1% reorder
# 1% 50%": a lossy wire made in guest B (the host kernel may lack sch_netem):
# tc netem on its NIC's egress, and on its ingress a drop of one packet in
# NETEM_DROP (100) at random, so both directions lose packets (ibv_ud_pingpong
# is left out then: a lost datagram is never resent and stalls it).
# PHASES="ionic ionic-rev baseline" (the default) picks the phases of the rxe
# peer: ionic-rev is phase 1 with the roles swapped (A serving, B connecting).
# The bridge's UDP 4791 traffic is captured and dissected by tshark (RRoCE;
# malformed packets counted) and every frame's ICRC checked by our codec.
# ROCE_LOG=debug: the servers log at debug (each transport QP on and off the wire).
# ROCE_ARGS: more server options (e.g. --tap-uso).
# Needs root and the rig's images.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
RIG=${E2E_RIG:-$HERE/rig}
PEER=${PEER:-rxe}
PHASES=${PHASES:-ionic ionic-rev baseline}
BACKEND=${ROCE_BACKEND:-roce}
ID=$$
BR=errbr$((ID % 10000)); TA=errta$((ID % 10000)); TB=errtb$((ID % 10000)); TV=errtv$((ID % 10000))
SA=/tmp/ernic-roce-a-$ID.sock; SB=/tmp/ernic-roce-b-$ID.sock
LA=/tmp/ernic-roce-a-$ID.log; LB=/tmp/ernic-roce-b-$ID.log
STA=/tmp/ernic-roce-a-$ID.stats; STB=/tmp/ernic-roce-b-$ID.stats
PCAP=/tmp/ernic-roce-$ID.pcap
pids=() cap=
cleanup() {
  [ -n "$cap" ] && kill $cap 2>/dev/null
  for p in "${pids[@]+"${pids[@]}"}"; do kill $p 2>/dev/null; done
  wait 2>/dev/null
  for l in $TA $TB $TV $BR; do ip link del $l 2>/dev/null; done
  rm -f $SA $SB
}
trap cleanup EXIT

ip link add $BR type bridge || exit 1
for t in $TA $TB $TV; do ip tuntap add dev $t mode tap && ip link set $t master $BR && ip link set $t up || exit 1; done
ip link set $BR up
if command -v tshark >/dev/null; then
  # At most 2 GB: a retransmit storm must not fill the disk.
  tshark -q -i $BR -f "udp port 4791" -F pcap -a filesize:2000000 -w $PCAP >/dev/null 2>&1 & cap=$!
fi

server() { # socket tap mac stats log
  node "$ROOT/dist/bin/rocm-ernic.js" -s $1 --tap $2 -m $3 -b $BACKEND --stats-file $4 -L ${ROCE_LOG:-info} ${ROCE_ARGS:-} >$5 2>&1 & pids+=($!)
  for _ in $(seq 100); do [ -S $1 ] && break; sleep 0.1; done
  [ -S $1 ] || { echo "FAIL - the server on $2 did not start:"; tail -5 $5; exit 1; }
}
server $SA $TA 02:65:72:00:01:0a $STA $LA
guest() { # out args... (the script's env comes first in $SCRIPT_ENV)
  local out=$1; shift
  "$RIG/run-guest.sh" --timeout 3600 "$@" > $out 2>&1
}
OA=/tmp/ernic-roce-a-$ID.out OB=/tmp/ernic-roce-b-$ID.out
if [ "$PEER" = ionic ]; then
  server $SB $TB 02:65:72:00:01:0b $STB $LB
  envA='ROLE=client ADDRS="ionic=10.83.0.1/24" RXE_ON= PLAN="ionic_0:10.83.0.1:10.83.0.2"'
  envB='ROLE=server ADDRS="ionic=10.83.0.2/24" RXE_ON= PLAN="ionic_0:10.83.0.2:10.83.0.1"'
  argsB=(--socket $SB --smp 4)
else
  planA= planB=
  for ph in $PHASES; do
    case $ph in
      ionic) planA+=" ionic_0:10.83.0.1:10.83.0.2" planB+=" rxe0:10.83.0.2:10.83.0.1" ;;
      ionic-rev) planA+=" ionic_0:10.83.0.1:10.83.0.2:server" planB+=" rxe0:10.83.0.2:10.83.0.1:client" ;;
      baseline) planA+=" rxe0:10.83.1.1:10.83.1.2" planB+=" rxe0:10.83.1.2:10.83.1.1" ;;
      *) echo "PHASES: unknown phase $ph (ionic, ionic-rev, baseline)"; exit 2 ;;
    esac
  done
  envA="ROLE=client ADDRS=\"ionic=10.83.0.1/24 virtio_net=10.83.1.1/24\" RXE_ON=virtio_net PLAN=\"${planA# }\""
  envB="ROLE=server ADDRS=\"virtio_net=10.83.0.2/24 virtio_net=10.83.1.2/24\" RXE_ON=virtio_net PLAN=\"${planB# }\""
  [ -n "${NETEM:-}" ] && envB+=" LOSSY=1 NETEM=\"$NETEM\" NETEM_DROP=${NETEM_DROP:-100}" envA+=" LOSSY=1"
  argsB=(--virtio-tap $TB --virtio-mac 52:54:00:7a:70:0b --smp 2)
fi
guest $OB "${argsB[@]}" --script <(printf '#!/bin/bash\nexport %s\n' "$envB"; cat "$HERE/guest-roce.sh") & gb=$!
argsA=(--socket $SA --smp 4)
[ "$PEER" = ionic ] || argsA+=(--virtio-tap $TV --virtio-mac 52:54:00:7a:70:0a)
guest $OA "${argsA[@]}" --script <(printf '#!/bin/bash\nexport %s\n' "$envA"; cat "$HERE/guest-roce.sh") & ga=$!
wait $ga; ra=$?; wait $gb; rb=$?
[ -n "$cap" ] && { sleep 1; kill $cap 2>/dev/null; wait $cap 2>/dev/null; cap=; }

echo "##### guest A (client: ionic_0 of the --backend $BACKEND server$([ "$PEER" = ionic ] || echo ', then rxe0 on its virtio-net'))"; cat $OA
echo "##### guest B (server: $([ "$PEER" = ionic ] && echo "ionic_0 of a second server" || echo "rxe0 on virtio-net"))"; cat $OB
fail=0
[ $ra = 0 ] && [ $rb = 0 ] || fail=1
for p in "${pids[@]}"; do kill -0 $p 2>/dev/null || { echo "FAIL - a server exited"; fail=1; }; done
echo "##### ionic_0 <-> peer beside the baseline (same two VMs, TCG)"
grep -hE '^p[0-9]-' $OA | sed 's/^/  /'
if [ -s "$PCAP" ]; then
  # Payload heuristics (RPC-over-RDMA, SMB Direct, ...) guess at test payloads and call some malformed: off.
  noheur=(); for p in rpcordma smc smb_direct nvme-rdma lnet iser infiniband.eoib infiniband_sdp fcoib; do noheur+=(--disable-protocol $p); done
  for net in 10.83.0 10.83.1; do
    total=$(tshark -r $PCAP -Y "ip.src == $net.0/24" 2>/dev/null | wc -l)
    [ "$total" = 0 ] && continue
    roce=$(tshark -r $PCAP "${noheur[@]}" -Y "ip.src == $net.0/24 && infiniband" 2>/dev/null | wc -l)
    bad=$(tshark -r $PCAP "${noheur[@]}" -Y "ip.src == $net.0/24 && (_ws.malformed || _ws.expert.severity >= error)" 2>/dev/null | wc -l)
    echo "capture, senders in $net.0/24: $total UDP 4791 frames, $roce dissected by tshark as InfiniBand (RRoCE), $bad malformed or in error"
    [ "$net" = 10.83.0 ] && [ "$bad" != 0 ] && fail=1
  done
  # tshark does not check the ICRC: our codec does, for every frame (the ionic phase's senders must all be good).
  node "$ROOT/dist/spec/vm/roce-capture-check.js" $PCAP 10.83.0 || fail=1
  echo "capture: $PCAP"
fi
for s in $STA $STB; do [ -s $s ] && echo "stats $(basename $s): $(grep -iE 'roce|packets|retrans|timeouts|nak|dup|icrc|drops' $s | grep -vE '\b0$' | head -30 | tr -s ' ' | tr '\n' ';')"; done
echo "server warnings: A $(grep -c ' warn: ' $LA)$([ "$PEER" = ionic ] && echo ", B $(grep -c ' warn: ' $LB)") (logs: $LA $LB)"
grep -h ' warn: ' $LA | head -5
[ $fail = 0 ] && echo "ok   - RoCEv2 between two guests ($PEER peer)" || echo "FAIL - RoCEv2 between two guests ($PEER peer)"
exit $fail
