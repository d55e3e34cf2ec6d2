#!/bin/bash
# VM test of a kernel RDMA consumer (nvme-rdma to nvmet-rdma in one guest)
# on our device with the stock drivers; rdma_rxe in the same guest as baseline.
# Needs root and the rig's images.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
RIG=${E2E_RIG:-$ROOT/../shared/e2e}
SOCK=/tmp/ernic-vm-nvme-$$.sock
node "$ROOT/dist/bin/rocm-ernic.js" -s "$SOCK" -L warn >/tmp/ernic-vm-nvme-$$.log 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; rm -f "$SOCK"' EXIT
for _ in $(seq 50); do [ -S "$SOCK" ] && break; sleep 0.1; done
"$RIG/run-guest.sh" --socket "$SOCK" --smp 4 --net --timeout 900 \
  --script <(printf '#!/bin/bash\nexport RXE=1\n'; cat "$HERE/guest-rdma-nvme.sh")
rc=$?
kill -0 $server 2>/dev/null && echo "ok   - server still running" || { echo "FAIL - server exited"; rc=1; }
echo "server warnings: $(grep -c ' warn: ' /tmp/ernic-vm-nvme-$$.log)"
exit $rc
