#!/bin/bash
# VM test of the in-process S3 store (--backend s3, issue 13): curl in the
# guest reaches the store over the emulated wire (it answers ARP and ping;
# no TAP), a 64 MiB multipart upload is checked by its ETag and sha256, and a
# pyverbs client moves 1 MiB each way by x-amz-rdma-token. The store also
# listens on the host (listen=): afterwards the host reads the guest's
# 64 MiB object back and compares its sha256 with the guest's.
# Needs root and the rig's images. Usage: s3.sh [TIMEOUT_S]
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
RIG=${E2E_RIG:-$HERE/rig}
TIMEOUT=${1:-1800}
SOCK=/tmp/ernic-vm-s3-$$.sock
LOG=/tmp/ernic-vm-s3-$$.log
OUT=/tmp/ernic-vm-s3-$$.out
PORT=$((20000 + $$ % 20000))
node "$ROOT/dist/bin/rocm-ernic.js" -s "$SOCK" -L info --backend "s3:size=512M,listen=127.0.0.1:$PORT" >"$LOG" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; rm -f "$SOCK" "$OUT"' EXIT
for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.1; done
"$RIG/run-guest.sh" --socket "$SOCK" --smp 4 --timeout "$TIMEOUT" --file "$HERE/guest-s3-rdma.py" --script "$HERE/guest-s3.sh" | tee "$OUT"
rc=${PIPESTATUS[0]}
kill -0 $server 2>/dev/null && echo "ok   - server still running" || { echo "FAIL - server exited"; rc=1; }
# The host listener serves the same store the guest wrote into.
want=$(sed -n 's/^mp64 sha256 \([0-9a-f]\{64\}\).*/\1/p' "$OUT")
got=$(curl -s "http://127.0.0.1:$PORT/ernic/big" | sha256sum | cut -c1-64)
[ -n "$want" ] && [ "$got" = "$want" ] && echo "ok   - the host listener returns the guest's 64 MiB object (sha256 $got)" \
  || { echo "FAIL - host GET of big: sha256 $got, guest said '$want'"; rc=1; }
echo "server: $(grep -c ' warn: ' "$LOG") warnings, $(grep -c ' error: ' "$LOG") errors (log: $LOG)"
grep -E ' (warn|error): ' "$LOG" | grep -v 'serving\|S3 store bucket' | tail -5 | sed 's/^/server: /'
exit $rc
