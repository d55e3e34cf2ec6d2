#!/bin/bash
# VM test of the vfio-user library: QEMU 11.1 (the rig in spec/vm/rig) boots
# a guest with the demo device behind a PCIe root port, the guest checks what
# lspci shows and uses BAR0, powers off; then a second QEMU connects to the
# same server, which must still be running and serve it the same way.
# Needs root and the rig's images (spec/vm/rig/build.sh).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
RIG=${E2E_RIG:-$HERE/rig}   # E2E_RIG=DIR: the same tests on another rig with the same run-guest.sh
SOCK=/tmp/ernic-vm-demo-$$.sock
LOG=$(mktemp /tmp/ernic-vm-demo-XXXX.log)

node "$ROOT/dist/bin/vfu-demo.js" --socket "$SOCK" -L info >"$LOG" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null; rm -f "$SOCK"' EXIT
for _ in $(seq 50); do [ -S "$SOCK" ] && break; sleep 0.1; done
[ -S "$SOCK" ] || { echo "server did not start"; cat "$LOG"; exit 1; }

# The device sits behind a root port so that the guest sees a PCIe endpoint
# with a link (on the root bus QEMU would make it an integrated endpoint and
# hide the link registers).
qemu_args="-device pcie-root-port,id=rp0,chassis=1,slot=1 -device {\"driver\":\"vfio-user-pci\",\"socket\":{\"path\":\"$SOCK\",\"type\":\"unix\"},\"bus\":\"rp0\"}"
fail=0
for boot in 1 2; do
  echo "=== guest $boot"
  "$RIG/run-guest.sh" --extra-qemu-args "$qemu_args" --script "$HERE/guest-demo.sh" || fail=1
  kill -0 $server 2>/dev/null || { echo "FAIL - server exited after guest $boot"; fail=1; break; }
done
echo "=== server log"
cat "$LOG"
n=$(grep -c 'client negotiated' "$LOG")
[ "$n" = 2 ] && echo "ok   - the same server served both QEMUs" || { echo "FAIL - server saw $n clients"; fail=1; }
exit $fail
