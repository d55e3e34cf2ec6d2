#!/bin/bash
# Records a short guest session with the S3 store (ARP, ping, curl PUT, GET,
# ranged GET, 404) as the guest's kernel saw it on the ionic netdev, offloads
# off, into a pcap for spec/targets/s3/replay.spec.ts. Needs root and the
# rig's images. Usage: s3-record.sh OUT.pcap (default fixtures/s3/guest-session.pcap)
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
RIG=${E2E_RIG:-$HERE/rig}
DEST=${1:-$ROOT/fixtures/s3/guest-session.pcap}
SOCK=/tmp/ernic-vm-s3rec-$$.sock
LOG=/tmp/ernic-vm-s3rec-$$.log
OUT=/tmp/ernic-vm-s3rec-$$.d
node "$ROOT/dist/bin/rocm-ernic.js" -s "$SOCK" -L info --backend s3 >"$LOG" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; rm -f "$SOCK"' EXIT
for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.1; done
mkdir -p "$OUT"
"$RIG/run-guest.sh" --socket "$SOCK" --timeout 600 --outdir "$OUT" --file "$HERE/guest-s3-sniff.py" --script "$HERE/guest-s3-record.sh"
rc=$?
[ $rc = 0 ] && [ -s "$OUT/s3-session.pcap" ] && cp "$OUT/s3-session.pcap" "$DEST" && echo "recording in $DEST" || { echo "FAIL - no recording (rc $rc)"; exit 1; }
