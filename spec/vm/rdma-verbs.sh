#!/bin/bash
# VM test of RDMA with the stock drivers: ibv_devices, port state,
# ibv_rc/ud_pingpong, perftest bandwidth and latency, atomics and rping on our
# device, then the same on rdma_rxe in the same guest for comparison.
# Needs root and the rig's images. Figures are TCG figures.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
RIG=${E2E_RIG:-$ROOT/../shared/e2e}
SOCK=/tmp/ernic-vm-rdma-$$.sock
node "$ROOT/dist/bin/rocm-ernic.js" -s "$SOCK" -L warn >/tmp/ernic-vm-rdma-$$.log 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; rm -f "$SOCK"' EXIT
for _ in $(seq 50); do [ -S "$SOCK" ] && break; sleep 0.1; done
"$RIG/run-guest.sh" --socket "$SOCK" --smp 4 --net --timeout 1800 \
  --script <(printf '#!/bin/bash\nexport RXE=1\n'; cat "$HERE/guest-rdma-verbs.sh")
rc=$?
kill -0 $server 2>/dev/null && echo "ok   - server still running" || { echo "FAIL - server exited"; rc=1; }
echo "server warnings: $(grep -c ' warn: ' /tmp/ernic-vm-rdma-$$.log)"
exit $rc
