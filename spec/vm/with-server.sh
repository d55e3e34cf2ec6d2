#!/bin/bash
# Shared by the RDMA VM tests: start rocm-ernic on a fresh socket, boot one
# guest against it (4 vCPUs for ionic_rdma, the rig's virtio NIC for the
# rdma_rxe baseline) running GUEST_SCRIPT with RXE=1, then check the server
# outlived the guest. Usage: with-server.sh NAME GUEST_SCRIPT [TIMEOUT_S]
set -u
NAME=$1 GUEST=$2 TIMEOUT=${3:-900}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
RIG=${E2E_RIG:-$HERE/rig}   # E2E_RIG=DIR: the same tests on another rig with the same run-guest.sh
SOCK=/tmp/ernic-vm-$NAME-$$.sock
LOG=/tmp/ernic-vm-$NAME-$$.log
node "$ROOT/dist/bin/rocm-ernic.js" -s "$SOCK" -L info >"$LOG" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; rm -f "$SOCK"' EXIT
for _ in $(seq 50); do [ -S "$SOCK" ] && break; sleep 0.1; done
"$RIG/run-guest.sh" --socket "$SOCK" --smp 4 --net --timeout "$TIMEOUT" \
  --script <(printf '#!/bin/bash\nexport RXE=1\n'; cat "$GUEST")
rc=$?
kill -0 $server 2>/dev/null && echo "ok   - server still running" || { echo "FAIL - server exited"; rc=1; }
echo "server warnings: $(grep -c ' warn: ' "$LOG") (log: $LOG)"
exit $rc
