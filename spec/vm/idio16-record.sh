#!/bin/bash
# VM test of the capture tools and the idio16 example: QEMU 11.1 boots a guest
# against the example through `ernic-vfu record`; the stock gpio-pci-idio-16
# driver drives it; the recording must match libvfio-user's recording of the
# same guest steps (fixtures/vfio-user/qemu-boot-lvu-gpio.pcapng) apart from
# the documented rules.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
RIG=${E2E_RIG:-$HERE/rig}   # E2E_RIG=DIR: the same tests on another rig with the same run-guest.sh
T=/tmp/ernic-vm-idio16-$$
SRV=$T-srv.sock REC=$T-rec.sock OUT=$T.pcapng

node "$ROOT/dist/lib/examples/idio16.js" --socket "$SRV" >"$T-server.log" 2>&1 &
server=$!
node "$ROOT/dist/bin/ernic-vfu.js" record --listen "$REC" --connect "$SRV" --out "$OUT" --once >"$T-record.log" 2>&1 &
recorder=$!
trap 'kill $server $recorder 2>/dev/null; rm -f "$SRV" "$REC"' EXIT
for _ in $(seq 50); do [ -S "$SRV" ] && [ -S "$REC" ] && break; sleep 0.1; done

fail=0
"$RIG/run-guest.sh" --socket "$REC" --script "$HERE/guest-idio16.sh" | grep -E '^(ok|FAIL)|inputs|ACCES' || fail=1
wait $recorder
cat "$T-record.log"
node "$ROOT/dist/bin/ernic-vfu.js" compare "$ROOT/fixtures/vfio-user/qemu-boot-lvu-gpio.pcapng" "$OUT" || fail=1
echo "capture kept in $OUT"
exit $fail
