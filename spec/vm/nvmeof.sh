#!/bin/bash
# VM test of the in-process NVMe-oF target (--backend nvmeof): stock
# nvme-cli and nvme-rdma in the guest reach a namespace the server holds
# itself, with no target in the guest and no static neighbour (the target
# answers ARP). The namespace is a file on the host, checked afterwards.
# Needs root and the rig's images. Usage: nvmeof.sh [TIMEOUT_S]
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
RIG=${E2E_RIG:-$HERE/rig}
TIMEOUT=${1:-900}
SOCK=/tmp/ernic-vm-nvmeof-$$.sock
LOG=/tmp/ernic-vm-nvmeof-$$.log
IMG=/tmp/ernic-vm-nvmeof-$$.img
node "$ROOT/dist/bin/rocm-ernic.js" -s "$SOCK" -L info --backend "nvmeof:size=256M,file=$IMG,queues=4" >"$LOG" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; rm -f "$SOCK" "$IMG"' EXIT
for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.1; done
"$RIG/run-guest.sh" --socket "$SOCK" --smp 4 --net --timeout "$TIMEOUT" --script "$HERE/guest-nvmeof.sh"
rc=$?
kill -0 $server 2>/dev/null && echo "ok   - server still running" || { echo "FAIL - server exited"; rc=1; }
# What the guest wrote is in the host file: an ext4 superblock (magic 0xef53 at 1024 + 56).
magic=$(od -An -tx2 -j $((1024 + 56)) -N2 "$IMG" | tr -d ' ')
[ "$magic" = ef53 ] && echo "ok   - the namespace file on the host holds the guest's ext4" || { echo "FAIL - no ext4 superblock in $IMG ($magic)"; rc=1; }
echo "server: $(grep -c 'CM REQ accepted' "$LOG") CM connections accepted, $(grep -c 'CM REQ rejected' "$LOG") rejected, $(grep -c ' warn: ' "$LOG") warnings (log: $LOG)"
grep -E ' (warn|error): ' "$LOG" | grep -v 'serving\|NVMe-oF target' | tail -5 | sed 's/^/server: /'
exit $rc
